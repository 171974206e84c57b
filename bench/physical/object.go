package physical

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/ternwal/tern/bench/loadgen"
)

// cleanupTimeout bounds the removal of the objects a measurement wrote,
// which goes on after ctx is cancelled.
const cleanupTimeout = time.Minute

// ObjectPut measures PUTs of objects of size bytes by concurrency workers,
// each with one request in flight, for d (Variant "put"). The latency is
// that of each request; MB/s and EntriesPerSec (objects per second) are
// over all workers. bucket is a bucket's name, optionally followed by
// "/PREFIX": the objects are written under PREFIX in a directory of their
// own, and removed at the end.
func ObjectPut(ctx context.Context, client *minio.Client, bucket string, size, concurrency int, d time.Duration) (*loadgen.Result, error) {
	o, err := newObjects(client, bucket, size, concurrency)
	if err != nil {
		return nil, err
	}
	defer o.cleanup(ctx)
	buf := payload(size)
	m := startMeter()
	n, err := o.workers(ctx, func(w int) (int64, error) {
		i := 0
		return m.loop(ctx, m.start.Add(d), func() error {
			i++
			return o.put(ctx, w, fmt.Sprintf("put-%d-%d", w, i), buf)
		})
	})
	if err != nil {
		return nil, err
	}
	spec := loadgen.Spec{Kind: loadgen.KindAppend, EntryBytes: size, Batch: 1, Producers: concurrency, Logs: 1, Duration: d}
	return m.result("s3", "put", spec, n, size), nil
}

// ObjectGet measures GETs of whole objects of size bytes by concurrency
// workers, each with one request in flight, for d (Variant "get"). It first
// writes one object per worker, untimed; each worker then reads them all
// in turn, so the server may serve them from its memory. The latency runs
// from the request to the last byte of the body. bucket is as for
// ObjectPut.
func ObjectGet(ctx context.Context, client *minio.Client, bucket string, size, concurrency int, d time.Duration) (*loadgen.Result, error) {
	o, err := newObjects(client, bucket, size, concurrency)
	if err != nil {
		return nil, err
	}
	defer o.cleanup(ctx)
	buf := payload(size)
	for w := range concurrency {
		if err := o.put(ctx, w, fmt.Sprintf("get-%d", w), buf); err != nil {
			return nil, err
		}
	}
	m := startMeter()
	n, err := o.workers(ctx, func(w int) (int64, error) {
		body := make([]byte, size+1)
		i := w
		return m.loop(ctx, m.start.Add(d), func() error {
			i = (i + 1) % concurrency
			return o.get(ctx, fmt.Sprintf("get-%d", i), body)
		})
	})
	if err != nil {
		return nil, err
	}
	spec := loadgen.Spec{Kind: loadgen.KindCatchUp, EntryBytes: size, Batch: 1, Producers: concurrency, Logs: 1, Duration: d}
	return m.result("s3", "get", spec, n, size), nil
}

// ObjectGetCold measures a catch-up read from an object store: it writes
// total bytes as distinct objects of size bytes (untimed), drops the page
// cache (the store's disk is this machine's), then reads every object once,
// concurrency at a time (Variant "get, cold"). It is what a log's catch-up
// read does, which GETs of a few hot objects (ObjectGet) flatter.
func ObjectGetCold(ctx context.Context, client *minio.Client, bucket string, size, concurrency int, total int64) (*loadgen.Result, error) {
	o, err := newObjects(client, bucket, size, concurrency)
	if err != nil {
		return nil, err
	}
	defer o.cleanup(ctx)
	count := int((total + int64(size) - 1) / int64(size))
	buf := payload(size)
	var next atomic.Int64
	each := func(op func(i int) error) func(w int) (int64, error) {
		return func(int) (int64, error) {
			var n int64
			for {
				i := int(next.Add(1)) - 1
				if i >= count {
					return n, nil
				}
				if err := op(i); err != nil {
					return n, err
				}
				n++
			}
		}
	}
	if _, err := o.workers(ctx, each(func(i int) error { return o.put(ctx, 0, fmt.Sprintf("cold-%d", i), buf) })); err != nil {
		return nil, err
	}
	note := loadgen.DropCaches()
	next.Store(0)
	m := startMeter()
	m.note(note)
	n, err := o.workers(ctx, func(w int) (int64, error) {
		body := make([]byte, size+1)
		return each(func(i int) error {
			t0 := time.Now()
			err := o.get(ctx, fmt.Sprintf("cold-%d", i), body)
			m.hist.Record(time.Since(t0))
			return err
		})(w)
	})
	if err != nil {
		return nil, err
	}
	spec := loadgen.Spec{Kind: loadgen.KindCatchUp, EntryBytes: size, Batch: 1, Producers: concurrency, Logs: 1, TotalBytes: total}
	return m.result("s3", "get, cold", spec, n, size), nil
}

// objects is one measurement's objects: their names and the bucket they are in.
type objects struct {
	client      *minio.Client
	bucket      string
	dir         string // the prefix of every name, ending in "/"
	size        int
	concurrency int

	mu      sync.Mutex
	written []string
}

func newObjects(client *minio.Client, bucket string, size, concurrency int) (*objects, error) {
	switch {
	case size <= 0:
		return nil, fmt.Errorf("physical: object size %d: want a positive size", size)
	case concurrency <= 0:
		return nil, fmt.Errorf("physical: concurrency %d: want at least 1", concurrency)
	}
	name, prefix, _ := strings.Cut(bucket, "/")
	if name == "" {
		return nil, fmt.Errorf("physical: bucket %q: want NAME or NAME/PREFIX", bucket)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	// A directory of its own, so that a measurement never overwrites
	// anything, nor meets objects of another one.
	dir := prefix + "tern-physical-" + strings.ToLower(rand.Text()[:12]) + "/"
	return &objects{client: client, bucket: name, dir: dir, size: size, concurrency: concurrency}, nil
}

// workers runs work for each of o.concurrency workers at once, cancelling
// the others when one fails, and returns the sum of their counts.
func (o *objects) workers(ctx context.Context, work func(w int) (int64, error)) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int64
		first error
	)
	for w := range o.concurrency {
		wg.Go(func() {
			n, err := work(w)
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil && first == nil {
				first = err
				cancel()
			}
		})
	}
	wg.Wait()
	return total, first
}

// put stores buf at name as Tern's uploads do (internal/blob): one PUT,
// over plain HTTP with the body's SHA-256 signed in its headers rather
// than minio-go's per-chunk streaming signature, so that the limit costs
// the client no more than Tern's own PUTs.
func (o *objects) put(ctx context.Context, w int, name string, buf []byte) error {
	key := o.dir + name
	var sum string
	if o.client.EndpointURL().Scheme != "https" {
		h := sha256.Sum256(buf)
		sum = hex.EncodeToString(h[:])
	}
	_, err := minio.Core{Client: o.client}.PutObject(ctx, o.bucket, key, bytes.NewReader(buf), int64(len(buf)), "", sum,
		minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true, DisableContentSha256: true})
	if err != nil {
		return o.error("put", key, err)
	}
	o.mu.Lock()
	o.written = append(o.written, key)
	o.mu.Unlock()
	return nil
}

// get reads the object name whole into body, which has room for one byte
// more than the object should hold.
func (o *objects) get(ctx context.Context, name string, body []byte) error {
	key := o.dir + name
	obj, err := o.client.GetObject(ctx, o.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return o.error("get", key, err)
	}
	defer obj.Close()
	n, err := io.ReadFull(obj, body)
	if err == io.ErrUnexpectedEOF {
		err = nil
	}
	if err == nil && n != o.size {
		err = fmt.Errorf("read %d bytes, want %d", n, o.size)
	}
	if err != nil {
		return o.error("get", key, err)
	}
	return nil
}

func (o *objects) error(op, key string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("physical: %s s3://%s/%s: %w", op, o.bucket, key, err)
}

// cleanup removes the objects written, even when ctx was cancelled. Not
// removing them is not worth failing a measurement for.
func (o *objects) cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	keys := make(chan minio.ObjectInfo)
	go func() {
		defer close(keys)
		for _, k := range o.written {
			select {
			case keys <- minio.ObjectInfo{Key: k}:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range o.client.RemoveObjects(ctx, o.bucket, keys, minio.RemoveObjectsOptions{}) {
	}
}
