package replica

import (
	"context"
	"errors"
	"sync"
)

// errStreamClosed is returned by Send after Close.
var errStreamClosed = errors.New("replica: stream is closed")

// Local is a Node in process: it calls a Store directly. The data passed to
// Send becomes the Store's in-memory copy of the fragment.
type Local struct {
	store *Store
}

var _ Node = (*Local)(nil)

// NewLocal returns a Node for s.
func NewLocal(s *Store) *Local { return &Local{store: s} }

// Stream opens a stream of adds. Send never blocks: the Store answers a
// fragment it has no room for with rpcerr.ErrReplicaFull.
func (l *Local) Stream(ctx context.Context, seg SegmentID, epoch uint64, onDurable func(uint64), onErr func(error)) (Sender, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := &localStream{
		store: l.store,
		seg:   seg,
		epoch: epoch,
		wake:  make(chan struct{}, 1),
		quit:  make(chan struct{}),
	}
	st.stop = context.AfterFunc(ctx, func() { st.fail(context.Cause(ctx)) })
	go st.deliver(onDurable, onErr)
	return st, nil
}

// localStream is a Local's Sender. The Store's committer reports to it; its
// own goroutine calls the callbacks, so that they never hold up the
// committer.
type localStream struct {
	store *Store
	seg   SegmentID
	epoch uint64
	wake  chan struct{} // capacity 1: there is news for deliver
	quit  chan struct{} // closed by Close
	stop  func() bool   // unregisters the context's AfterFunc
	once  sync.Once

	mu     sync.Mutex
	count  uint64 // durable count due to the stream's adds
	err    error  // why the stream failed
	closed bool
}

func (st *localStream) Send(n uint64, data []byte, sum uint32) error {
	st.mu.Lock()
	err, closed := st.err, st.closed
	st.mu.Unlock()
	switch {
	case err != nil:
		return err
	case closed:
		return errStreamClosed
	}
	if err := st.store.Add(st.seg, st.epoch, n, data, sum, func(err error) { st.acked(n, err) }); err != nil {
		st.fail(err)
		return err
	}
	return nil
}

// acked is called by the committer for fragment n.
func (st *localStream) acked(n uint64, err error) {
	if err != nil {
		st.fail(err)
		return
	}
	st.mu.Lock()
	st.count = max(st.count, n+1)
	st.mu.Unlock()
	st.notify()
}

func (st *localStream) fail(err error) {
	st.mu.Lock()
	if st.err == nil {
		st.err = err
	}
	st.mu.Unlock()
	st.notify()
}

func (st *localStream) notify() {
	signal(st.wake)
}

// deliver calls the callbacks until the stream fails or is closed.
func (st *localStream) deliver(onDurable func(uint64), onErr func(error)) {
	var reported uint64
	for {
		select {
		case <-st.wake:
		case <-st.quit:
			return
		}
		st.mu.Lock()
		count, err, closed := st.count, st.err, st.closed
		st.mu.Unlock()
		if count > reported {
			reported = count
			onDurable(count)
		}
		if err != nil {
			if !closed {
				onErr(err)
			}
			return
		}
	}
}

func (st *localStream) Close() error {
	st.once.Do(func() {
		st.mu.Lock()
		st.closed = true
		st.mu.Unlock()
		st.stop()
		close(st.quit)
	})
	return nil
}

func (l *Local) Fence(ctx context.Context, seg SegmentID, epoch uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return l.store.Fence(seg, epoch)
}

func (l *Local) List(ctx context.Context, seg SegmentID) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return l.store.List(seg)
}

func (l *Local) Read(ctx context.Context, seg SegmentID, n uint64, off int64, p []byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return l.store.Read(seg, n, off, p)
}

func (l *Local) Seal(ctx context.Context, seg SegmentID, count uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.store.Seal(seg, count)
}

func (l *Local) Offload(ctx context.Context, seg SegmentID, objs []Object) error {
	return l.store.Offload(ctx, seg, objs)
}

func (l *Local) Drop(ctx context.Context, seg SegmentID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.store.Drop(seg)
}
