package check

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// History records the operations of a test run on any number of logs. Every
// method of a History and of the handles it returns is safe for concurrent
// use. Record calls take a stamp from one logical clock: when a call returns
// before another begins, in real time, its stamp is the smaller, whichever
// goroutines made them. The zero value is not usable; build one with New.
type History struct {
	clock atomic.Uint64

	mu   sync.Mutex
	logs map[string]*logHistory
}

// New returns an empty History.
func New() *History {
	return &History{logs: map[string]*logHistory{}}
}

// logHistory is everything recorded about one log. Its fields are guarded by
// mu, but for name.
type logHistory struct {
	name string

	mu      sync.Mutex
	appends []*Append
	owner   []int32          // by value ID: the index in appends of the value's append
	index   map[string]int32 // value → value ID; an append's values have consecutive IDs
	fences  []*Fence
	readers []*Reader
	cursors []cursorEvent

	final    []string
	start    uint64
	hasFinal bool
	// truncBefore is the highest acknowledged truncation point: offsets
	// below it may be missing from the final read.
	truncBefore uint64
}

func (h *History) log(name string) *logHistory {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.logs[name]
	if !ok {
		l = &logHistory{name: name, index: map[string]int32{}}
		h.logs[name] = l
	}
	return l
}

type outcome uint8

const (
	pending outcome = iota // never completed: counts as unknown
	ok
	failed
	unknown
)

// An Append is one append of a batch of values, from its invocation to its
// outcome. Exactly one of OK, Fail and Unknown must be called, once, from
// any goroutine; an Append never completed counts as Unknown.
type Append struct {
	h       *History
	l       *logHistory
	epoch   uint64
	values  []string
	first   int32  // the value ID of values[0]
	invoked uint64 // stamp

	// Guarded by l.mu.
	outcome   outcome
	completed uint64 // stamp
	offset    uint64 // of values[0], when ok
	err       error
}

// Invoke records that a writer of the given epoch starts appending values,
// one batch, to log: they are to land at consecutive offsets, all or none.
// Call it before the request is sent, and complete the Append once its
// outcome is known. Values are the entries' payloads and must be unique
// within the log over the whole history; Invoke panics on a value it has
// seen before, or on an empty batch.
func (h *History) Invoke(log string, epoch uint64, values ...string) *Append {
	if len(values) == 0 {
		panic("check: append of no values")
	}
	l := h.log(log)
	a := &Append{h: h, l: l, epoch: epoch, values: slices.Clone(values)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.owner)+len(values) > math.MaxInt32 {
		panic(fmt.Sprintf("check: more than %d values appended to log %q", math.MaxInt32, log))
	}
	a.first = int32(len(l.owner))
	for i, v := range a.values {
		if _, dup := l.index[v]; dup {
			for _, w := range a.values[:i] {
				delete(l.index, w)
			}
			panic(fmt.Sprintf("check: value %q appended twice to log %q: values must be unique", v, log))
		}
		l.index[v] = a.first + int32(i)
	}
	for range a.values {
		l.owner = append(l.owner, int32(len(l.appends)))
	}
	l.appends = append(l.appends, a)
	a.invoked = h.clock.Add(1)
	return a
}

// OK records that the append was acknowledged, its first value at offset
// and the others after it.
func (a *Append) OK(offset uint64) { a.complete(ok, offset, nil) }

// Fail records that the append definitely did not take effect: use it only
// for errors that guarantee so, such as a request rejected before it was
// sent. When in doubt, use Unknown.
func (a *Append) Fail(err error) { a.complete(failed, 0, err) }

// Unknown records that the append's outcome is unknown: a timeout, a broken
// stream, most server errors.
func (a *Append) Unknown(err error) { a.complete(unknown, 0, err) }

func (a *Append) complete(o outcome, offset uint64, err error) {
	a.l.mu.Lock()
	defer a.l.mu.Unlock()
	if a.outcome != pending {
		panic(fmt.Sprintf("check: append of %q to log %q completed twice", a.values[0], a.l.name))
	}
	a.outcome, a.offset, a.err = o, offset, err
	a.completed = a.h.clock.Add(1)
}

// A Fence is a writer's open at a new epoch, which fences the older ones.
type Fence struct {
	h     *History
	l     *logHistory
	epoch uint64
	done  uint64 // stamp, 0 until Done; guarded by l.mu
}

// Fence records that a writer starts opening log at epoch. Call Done on the
// result once the open returned successfully; an open that failed is left
// undone and fences nothing as far as the check is concerned.
func (h *History) Fence(log string, epoch uint64) *Fence {
	return &Fence{h: h, l: h.log(log), epoch: epoch}
}

// Done records that the open returned: from now on no append of an older
// epoch may be acknowledged.
func (f *Fence) Done() {
	f.l.mu.Lock()
	defer f.l.mu.Unlock()
	if f.done != 0 {
		panic(fmt.Sprintf("check: fence of log %q at epoch %d done twice", f.l.name, f.epoch))
	}
	f.done = f.h.clock.Add(1)
	f.l.fences = append(f.l.fences, f)
}

// A Reader records what one reader of a log was delivered, as a series of
// streams: a stream is what one connection delivered, and it must deliver
// consecutive offsets. Its methods are safe for concurrent use, but Saw must
// be called in the order of delivery.
type Reader struct {
	h       *History
	l       *logHistory
	name    string
	sub     string // the subscription, for a subscriber
	created uint64 // stamp, to order readers of the same name

	mu      sync.Mutex
	seen    []sighting
	streams []stream
}

type sighting struct {
	offset uint64
	value  string
}

// stream is a run of r.seen from index at on.
type stream struct {
	at    int
	from  uint64 // the offset the stream must start at, if known
	known bool
}

// Reader returns a new reader of log (a tail follower or a catch-up reader),
// named for the report. Its first stream may start anywhere; call Restart
// before the first Saw to say where it must start.
func (h *History) Reader(log, name string) *Reader {
	return h.reader(log, name, "")
}

// Subscriber returns a new reader of log that consumes the subscription
// sub. Its Restarts are checked against the subscription's cursor as well:
// a subscriber resumes from the cursor, never from before it.
func (h *History) Subscriber(log, sub string) *Reader {
	return h.reader(log, sub, sub)
}

func (h *History) reader(log, name, sub string) *Reader {
	l := h.log(log)
	r := &Reader{h: h, l: l, name: name, sub: sub, streams: []stream{{}}}
	l.mu.Lock()
	defer l.mu.Unlock()
	r.created = h.clock.Add(1)
	l.readers = append(l.readers, r)
	return r
}

// Saw records that the reader was delivered value at offset.
func (r *Reader) Saw(offset uint64, value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, sighting{offset, value})
}

// Restart records that the reader reconnected, or resumed, and starts a new
// stream, whose first entry must be at from. A subscriber's from is checked
// against the cursor observations recorded before the Restart, so each of
// them must have been made before the reconnection began: record the
// observations and the Restarts of a subscription from one goroutine.
func (r *Reader) Restart(from uint64) {
	r.mu.Lock()
	r.streams = append(r.streams, stream{at: len(r.seen), from: from, known: true})
	r.mu.Unlock()
	if r.sub != "" {
		r.l.cursor(r.h, cursorEvent{sub: r.sub, kind: resumed, pos: from})
	}
}

// Final records the complete read of log after every fault was healed: the
// values at offsets start, start+1, ... up to the log's end, where start is
// the log's start after truncations. It may be called once per log.
func (h *History) Final(log string, start uint64, values []string) {
	l := h.log(log)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hasFinal {
		panic(fmt.Sprintf("check: two final reads of log %q", log))
	}
	l.final, l.start, l.hasFinal = slices.Clone(values), start, true
}

// Truncated records that a truncation of log below before was
// acknowledged: the offsets below it may be missing from the final read.
func (h *History) Truncated(log string, before uint64) {
	l := h.log(log)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.truncBefore = max(l.truncBefore, before)
}

type cursorKind uint8

const (
	observed cursorKind = iota // a committed cursor was read
	seeked                     // the harness moved the cursor
	resumed                    // a subscriber restarted from a position
)

type cursorEvent struct {
	sub   string
	kind  cursorKind
	pos   uint64
	stamp uint64
}

// Cursor records that the committed cursor of subscription sub on log was
// observed at pos: a position the subscription has promised never to
// deliver from before again. (A cursor that counts acknowledgements not yet
// committed, which a crash may undo, is not one.) Observations of one
// subscription must be recorded in the order they were made: from one
// goroutine, or each describe call and its record under one lock.
func (h *History) Cursor(log, sub string, pos uint64) {
	h.log(log).cursor(h, cursorEvent{sub: sub, kind: observed, pos: pos})
}

// Seek records that the harness moved the cursor of subscription sub on log
// to pos, after which the cursor may go backwards, once, but not below pos.
// Record it once the seek returned. A subscriber that goes on from pos
// starts a new stream: record that with Restart(pos).
func (h *History) Seek(log, sub string, pos uint64) {
	h.log(log).cursor(h, cursorEvent{sub: sub, kind: seeked, pos: pos})
}

func (l *logHistory) cursor(h *History, e cursorEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.stamp = h.clock.Add(1)
	l.cursors = append(l.cursors, e)
}
