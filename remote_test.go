package tern_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/grpcopts"
	"github.com/ternwal/tern/internal/server"
)

// The tests named TestMode* run the same assertions on an embedded client
// and on a remote client of an in-process server, so that the two behave
// alike; TestRemote* cover what only a remote client has.

// testServer is an in-process tern serve on an embedded client.
type testServer struct {
	addr string
	stop func()
}

// startServer serves the data directory dir on addr ("127.0.0.1:0" for any
// port) until stop, which t.Cleanup also calls.
func startServer(t testing.TB, dir, addr string) *testServer {
	t.Helper()
	return startServerWith(t, tern.Options{Dir: dir}, addr)
}

// startServerWith serves a client opened with opts.
func startServerWith(t testing.TB, opts tern.Options, addr string) *testServer {
	t.Helper()
	c, err := tern.Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	srv := server.New(c, server.Options{})
	g := grpc.NewServer(grpcopts.Server()...)
	srv.Register(g)
	served := make(chan struct{})
	go func() {
		defer close(served)
		g.Serve(lis)
	}()
	var once sync.Once
	s := &testServer{addr: lis.Addr().String(), stop: func() {
		once.Do(func() {
			if err := srv.Close(); err != nil {
				t.Errorf("close server: %v", err)
			}
			g.Stop()
			<-served
			if err := c.Close(); err != nil {
				t.Errorf("close the server's client: %v", err)
			}
		})
	}}
	t.Cleanup(s.stop)
	return s
}

func openRemote(t *testing.T, addr string) *tern.Client {
	t.Helper()
	c, err := tern.Open(t.Context(), tern.Options{Server: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// forEachMode runs f as the subtests "embedded", on a client of a data
// directory, and "remote", on a client of a server of one; and again as
// "embedded-object" and "remote-object", where the logs are created in
// object mode by default, on a local directory standing in for the object
// store.
func forEachMode(t *testing.T, f func(t *testing.T, c *tern.Client)) {
	for _, object := range []bool{false, true} {
		opts := func(t *testing.T) tern.Options {
			o := tern.Options{Dir: t.TempDir()}
			if object {
				o.Storage.URL, o.DefaultMode = "dir://"+t.TempDir(), tern.ModeObject
			}
			return o
		}
		suffix := map[bool]string{false: "", true: "-object"}[object]
		t.Run("embedded"+suffix, func(t *testing.T) {
			c, err := tern.Open(t.Context(), opts(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			f(t, c)
		})
		t.Run("remote"+suffix, func(t *testing.T) {
			s := startServerWith(t, opts(t), "127.0.0.1:0")
			f(t, openRemote(t, s.addr))
		})
	}
}

func mustCreate(t *testing.T, c *tern.Client, name string, opts tern.LogOptions) (*tern.Log, *tern.Writer) {
	t.Helper()
	l, err := c.CreateLog(t.Context(), name, opts)
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return l, w
}

func mustAppend(t *testing.T, w *tern.Writer, payload string) tern.Offset {
	t.Helper()
	off, err := w.Append(t.Context(), tern.Entry{Payload: []byte(payload)})
	if err != nil {
		t.Fatal(err)
	}
	return off
}

func mustReader(t *testing.T, l *tern.Log, from tern.Offset, opts ...tern.ReadOption) *tern.Reader {
	t.Helper()
	r, err := l.OpenReader(t.Context(), from, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// next returns the next entry, failing the test after 10s.
type nexter interface {
	Next(ctx context.Context) (tern.Entry, error)
}

func mustNext(t *testing.T, r nexter) tern.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	e, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func wantEntry(t *testing.T, e tern.Entry, off tern.Offset, payload string) {
	t.Helper()
	if e.IsTick || e.Offset != off || string(e.Payload) != payload {
		t.Fatalf("read %+v, want the entry %q at offset %d", e, payload, off)
	}
}

func TestModeLogs(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		ctx := t.Context()
		opts := tern.LogOptions{
			Fsync:        tern.Fsync{Mode: tern.FsyncInterval, Interval: 10 * time.Millisecond},
			SegmentBytes: 1 << 20, SegmentAge: time.Minute, RetentionAge: time.Hour,
			RetentionBytes: 1 << 30, RetentionEntries: 1000, MaxEntryBytes: 4096,
		}
		if strings.HasSuffix(t.Name(), "-object") {
			opts.Fsync = tern.Fsync{}
			opts.FlushBytes, opts.FlushInterval, opts.UploadsInFlight = 1<<20, 5*time.Millisecond, 2
		}
		l, err := c.CreateLog(ctx, "tenant/db/ch-1", opts)
		if err != nil {
			t.Fatal(err)
		}
		// The mode not given is the client's default.
		opts.Mode = tern.ModeLocal
		if strings.HasSuffix(t.Name(), "-object") {
			opts.Mode = tern.ModeObject
		}
		if l.Name() != "tenant/db/ch-1" || l.Options() != opts {
			t.Fatalf("created %q with %+v, want %+v", l.Name(), l.Options(), opts)
		}
		if _, err := c.CreateLog(ctx, "tenant/db/ch-1", tern.LogOptions{}); !errors.Is(err, tern.ErrExist) {
			t.Fatalf("create again: %v, want ErrExist", err)
		}
		if _, err := c.CreateLog(ctx, "bad//name", tern.LogOptions{}); !errors.Is(err, tern.ErrInvalidName) {
			t.Fatalf("create bad name: %v, want ErrInvalidName", err)
		}
		if _, err := c.OpenLog(ctx, "tenant/none"); !errors.Is(err, tern.ErrNotFound) {
			t.Fatalf("open missing: %v, want ErrNotFound", err)
		}
		if _, err := c.CreateLog(ctx, "other", tern.LogOptions{}); err != nil {
			t.Fatal(err)
		}

		l2, err := c.OpenLog(ctx, "tenant/db/ch-1")
		if err != nil {
			t.Fatal(err)
		}
		if l2.Options() != opts {
			t.Fatalf("opened with %+v, want %+v", l2.Options(), opts)
		}
		w, err := l2.OpenWriter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, w, "a")
		mustAppend(t, w, "b")
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		info, err := l.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Name != "tenant/db/ch-1" || info.Start != 0 || info.End != 2 || info.Epoch != w.Epoch() || info.Options != opts || info.Created.IsZero() {
			t.Fatalf("info %+v", info)
		}
		if err := l.Truncate(ctx, 3); !errors.Is(err, tern.ErrOutOfRange) {
			t.Fatalf("truncate beyond the end: %v, want ErrOutOfRange", err)
		}

		infos, err := c.ListLogs(ctx, "tenant/")
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != 1 || infos[0].Name != "tenant/db/ch-1" || infos[0].End != 2 {
			t.Fatalf("list tenant/: %+v", infos)
		}
		if infos, err = c.ListLogs(ctx, ""); err != nil || len(infos) != 2 {
			t.Fatalf("list all: %+v, %v", infos, err)
		}

		if err := c.DeleteLog(ctx, "tenant/db/ch-1"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.OpenLog(ctx, "tenant/db/ch-1"); !errors.Is(err, tern.ErrNotFound) {
			t.Fatalf("open deleted: %v, want ErrNotFound", err)
		}
		if err := c.DeleteLog(ctx, "tenant/db/ch-1"); !errors.Is(err, tern.ErrNotFound) {
			t.Fatalf("delete again: %v, want ErrNotFound", err)
		}
		if err := c.DeleteLog(ctx, "/x"); !errors.Is(err, tern.ErrInvalidName) {
			t.Fatalf("delete bad name: %v, want ErrInvalidName", err)
		}
		if infos, err = c.ListLogs(ctx, "tenant/"); err != nil || len(infos) != 0 {
			t.Fatalf("list after delete: %+v, %v", infos, err)
		}
	})
}

func TestModeConcurrentAppends(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, w := mustCreate(t, c, "concurrent", tern.LogOptions{})
		const goroutines, appends = 16, 200
		var (
			mu      sync.Mutex
			written = map[tern.Offset]string{}
			wg      sync.WaitGroup
		)
		record := func(off tern.Offset, payload string) error {
			mu.Lock()
			defer mu.Unlock()
			if prev, ok := written[off]; ok {
				return fmt.Errorf("offset %d given to %q and %q", off, prev, payload)
			}
			written[off] = payload
			return nil
		}
		errs := make(chan error, goroutines)
		for g := range goroutines {
			wg.Go(func() {
				var pending []*tern.Pending
				var pendingPayloads []string
				for i := range appends {
					p := fmt.Sprintf("g%02d-%04d", g, i)
					var err error
					switch i % 4 {
					case 0:
						var off tern.Offset
						off, err = w.Append(t.Context(), tern.Entry{Payload: []byte(p)})
						if err == nil {
							err = record(off, p)
						}
					case 1:
						var off tern.Offset
						off, err = w.AppendBatch(t.Context(), []tern.Entry{{Payload: []byte(p + "a")}, {Payload: []byte(p + "b")}})
						if err == nil {
							err = errors.Join(record(off, p+"a"), record(off+1, p+"b"))
						}
					default:
						pending = append(pending, w.AppendAsync(tern.Entry{Payload: []byte(p)}))
						pendingPayloads = append(pendingPayloads, p)
					}
					if err != nil {
						errs <- err
						return
					}
				}
				last := tern.Offset(0)
				for i, p := range pending {
					off, err := p.Wait(t.Context())
					if err == nil {
						err = record(off, pendingPayloads[i])
					}
					if err == nil && i > 0 && off <= last {
						err = fmt.Errorf("append %q queued after another got offset %d, below %d", pendingPayloads[i], off, last)
					}
					if err != nil {
						errs <- err
						return
					}
					last = off
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		total := goroutines * appends * 5 / 4 // every fourth append is a batch of two
		if len(written) != total {
			t.Fatalf("%d entries written, want %d", len(written), total)
		}

		r := mustReader(t, l, 0)
		for n := 0; n < total; {
			es, err := r.NextBatch(t.Context(), 500)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				if want := tern.Offset(n); e.Offset != want || string(e.Payload) != written[want] {
					t.Fatalf("read %q at %d, want %q at %d", e.Payload, e.Offset, written[want], want)
				}
				n++
			}
		}
	})
}

func TestModeEntries(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, w := mustCreate(t, c, "entries", tern.LogOptions{})
		at := time.Unix(1700000000, 123456789)
		buf := []byte("payload")
		p := w.AppendAsync(tern.Entry{Payload: buf, Properties: map[string][]byte{"k": []byte("v"), "empty": {}}, Time: at})
		copy(buf, "changed") // AppendAsync copied the bytes
		if off, err := p.Wait(t.Context()); err != nil || off != 0 {
			t.Fatalf("append: %d, %v", off, err)
		}
		before := time.Now()
		mustAppend(t, w, "")
		e := mustNext(t, mustReader(t, l, 0))
		if string(e.Payload) != "payload" || len(e.Properties) != 2 || string(e.Properties["k"]) != "v" || !e.Time.Equal(at) {
			t.Fatalf("read %+v", e)
		}
		r := mustReader(t, l, 1)
		if e := mustNext(t, r); len(e.Payload) != 0 || e.Time.Before(before.Add(-time.Minute)) {
			t.Fatalf("read %+v, want an empty entry stamped about now", e)
		}
		if _, err := w.AppendBatch(t.Context(), nil); !errors.Is(err, tern.ErrInvalid) {
			t.Fatalf("append of no entries: %v, want ErrInvalid", err)
		}
		if _, err := r.NextBatch(t.Context(), 0); err == nil {
			t.Fatal("NextBatch of 0 succeeded")
		}
	})
}

// Entries of every size up to a few hundred bytes, and around 16 KiB,
// where the lengths that frame them on the wire grow a byte, are read back
// as they were appended.
func TestModeEntrySizes(t *testing.T) {
	var sizes []int
	for n := range 300 {
		sizes = append(sizes, n)
	}
	for n := 1<<14 - 40; n < 1<<14+8; n++ {
		sizes = append(sizes, n)
	}
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, w := mustCreate(t, c, "sizes", tern.LogOptions{})
		ps := make([]*tern.Pending, len(sizes))
		for i, n := range sizes {
			ps[i] = w.AppendAsync(tern.Entry{Payload: bytes.Repeat([]byte{byte(i)}, n)})
		}
		for i, p := range ps {
			if off, err := p.Wait(t.Context()); err != nil || off != tern.Offset(i) {
				t.Fatalf("append of %d bytes: offset %d, %v", sizes[i], off, err)
			}
		}
		r := mustReader(t, l, 0)
		for i, n := range sizes {
			if e := mustNext(t, r); !bytes.Equal(e.Payload, bytes.Repeat([]byte{byte(i)}, n)) {
				t.Fatalf("entry %d: read %d bytes, want %d bytes of %d", i, len(e.Payload), n, byte(i))
			}
		}
	})
}

func TestModeFencing(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, w1 := mustCreate(t, c, "fenced", tern.LogOptions{})
		mustAppend(t, w1, "one")
		w2, err := l.OpenWriter(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer w2.Close()
		if w2.Epoch() <= w1.Epoch() {
			t.Fatalf("epochs %d then %d", w1.Epoch(), w2.Epoch())
		}
		if _, err := w1.Append(t.Context(), tern.Entry{Payload: []byte("old")}); !errors.Is(err, tern.ErrFenced) {
			t.Fatalf("append of the fenced writer: %v, want ErrFenced", err)
		}
		if _, err := w1.AppendAsync(tern.Entry{Payload: []byte("old")}).Wait(t.Context()); !errors.Is(err, tern.ErrFenced) {
			t.Fatalf("async append of the fenced writer: %v, want ErrFenced", err)
		}
		if _, err := w1.AppendBatch(t.Context(), []tern.Entry{{Payload: []byte("a")}, {Payload: []byte("b")}}); !errors.Is(err, tern.ErrFenced) {
			t.Fatalf("batch of the fenced writer: %v, want ErrFenced", err)
		}
		if err := w1.AppendTimeTick(t.Context(), 1); !errors.Is(err, tern.ErrFenced) {
			t.Fatalf("tick of the fenced writer: %v, want ErrFenced", err)
		}
		if off := mustAppend(t, w2, "two"); off != 1 {
			t.Fatalf("the new writer appended at %d, want 1", off)
		}
		if err := w1.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := w1.Append(t.Context(), tern.Entry{Payload: []byte("x")}); !errors.Is(err, tern.ErrClosed) {
			t.Fatalf("append after Close: %v, want ErrClosed", err)
		}
	})
}

func TestModeFollow(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, w := mustCreate(t, c, "follow", tern.LogOptions{})
		mustAppend(t, w, "e0")
		r := mustReader(t, l, 1)
		got := make(chan tern.Entry, 1)
		errc := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			e, err := r.Next(ctx)
			got <- e
			errc <- err
		}()
		time.Sleep(50 * time.Millisecond) // let the reader wait at the tail
		mustAppend(t, w, "e1")
		e := <-got
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		wantEntry(t, e, 1, "e1")
		if _, err := l.OpenReader(t.Context(), 3); !errors.Is(err, tern.ErrOutOfRange) {
			t.Fatalf("open beyond the end: %v, want ErrOutOfRange", err)
		}
	})
}

func TestModeTruncated(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, w := mustCreate(t, c, "truncated", tern.LogOptions{})
		for i := range 10 {
			mustAppend(t, w, fmt.Sprint(i))
		}
		if err := l.Truncate(t.Context(), 5); err != nil {
			t.Fatal(err)
		}
		_, err := l.OpenReader(t.Context(), 2)
		var te *tern.TruncatedError
		if !errors.As(err, &te) || te.Start != 5 || te.Offset != 2 || !errors.Is(err, tern.ErrTruncated) {
			t.Fatalf("read below the start: %v, want a TruncatedError at 2 with start 5", err)
		}
		wantEntry(t, mustNext(t, mustReader(t, l, 5)), 5, "5")

		// A subscription whose cursor fell below the start.
		if _, err := l.CreateSubscription(t.Context(), "late", tern.SubOptions{From: 1}); !errors.As(err, &te) || te.Start != 5 {
			t.Fatalf("subscription below the start: %v, want a TruncatedError", err)
		}
	})
}

// FromStart reads from the start wherever truncation moved it, FromEnd
// only what is appended after the reader opened; embedded and remote.
func TestModeFromStartAndEnd(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, w := mustCreate(t, c, "positions", tern.LogOptions{})
		for i := range 10 {
			mustAppend(t, w, fmt.Sprint(i))
		}
		wantEntry(t, mustNext(t, mustReader(t, l, tern.FromStart)), 0, "0")
		if err := l.Truncate(t.Context(), 7); err != nil {
			t.Fatal(err)
		}
		if _, err := l.OpenReader(t.Context(), 0); !errors.Is(err, tern.ErrTruncated) {
			t.Fatalf("read from 0 after a truncation: %v, want ErrTruncated", err)
		}
		wantEntry(t, mustNext(t, mustReader(t, l, tern.FromStart)), 7, "7")

		end := mustReader(t, l, tern.FromEnd)
		// Nothing until an append: the reader waits at the tail.
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		_, err := end.Next(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a reader at the end read %v before any append, want it to wait", err)
		}
		mustAppend(t, w, "new")
		wantEntry(t, mustNext(t, end), 10, "new")
	})
}

// A log deleted under its readers and subscribers ends them with
// ErrNotFound, embedded and remote.
func TestModeDeletedUnderReaders(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, w := mustCreate(t, c, "doomed", tern.LogOptions{})
		mustAppend(t, w, "0")
		r := mustReader(t, l, 0)
		wantEntry(t, mustNext(t, r), 0, "0")
		if _, err := l.CreateSubscription(t.Context(), "s", tern.SubOptions{}); err != nil {
			t.Fatal(err)
		}
		sub, err := l.Subscribe(t.Context(), "s")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		wantEntry(t, mustNext(t, sub), 0, "0")
		w.Close()
		if err := c.DeleteLog(t.Context(), "doomed"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if _, err := r.Next(ctx); !errors.Is(err, tern.ErrNotFound) {
			t.Errorf("a reader of a deleted log: %v, want ErrNotFound", err)
		}
		if _, err := sub.Next(ctx); !errors.Is(err, tern.ErrNotFound) {
			t.Errorf("a subscriber of a deleted log: %v, want ErrNotFound", err)
		}
	})
}

func TestModeTicks(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, w := mustCreate(t, c, "ticks", tern.LogOptions{})
		r := mustReader(t, l, 0, tern.WithTicks())
		plain := mustReader(t, l, 0)
		mustAppend(t, w, "e0")
		if err := w.AppendTimeTick(t.Context(), 42); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, w, "e1")
		wantEntry(t, mustNext(t, r), 0, "e0")
		if e := mustNext(t, r); !e.IsTick || e.Tick != 42 || e.Offset != 1 {
			t.Fatalf("read %+v, want the tick 42 at offset 1", e)
		}
		wantEntry(t, mustNext(t, r), 1, "e1")
		wantEntry(t, mustNext(t, plain), 0, "e0")
		wantEntry(t, mustNext(t, plain), 1, "e1")

		// A tick after asynchronous appends comes after them.
		p := w.AppendAsync(tern.Entry{Payload: []byte("e2")})
		if err := w.AppendTimeTick(t.Context(), 43); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantEntry(t, mustNext(t, r), 2, "e2")
		if e := mustNext(t, r); !e.IsTick || e.Tick != 43 || e.Offset != 3 {
			t.Fatalf("read %+v, want the tick 43 at offset 3", e)
		}
	})
}

func TestModeSubscriptions(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		ctx := t.Context()
		l, w := mustCreate(t, c, "subs", tern.LogOptions{})
		for i := range 5 {
			mustAppend(t, w, fmt.Sprint(i))
		}
		info, err := l.CreateSubscription(ctx, "s1", tern.SubOptions{From: 0, Pin: true})
		if err != nil {
			t.Fatal(err)
		}
		if info.Name != "s1" || info.Log != "subs" || info.Cursor != 0 || !info.Pin || info.Lag != 5 {
			t.Fatalf("created %+v", info)
		}
		if _, err := l.CreateSubscription(ctx, "s1", tern.SubOptions{}); !errors.Is(err, tern.ErrSubExist) {
			t.Fatalf("create again: %v, want ErrSubExist", err)
		}
		if _, err := l.CreateSubscription(ctx, "bad/name", tern.SubOptions{}); !errors.Is(err, tern.ErrInvalidName) {
			t.Fatalf("create bad name: %v, want ErrInvalidName", err)
		}
		if _, err := l.CreateSubscription(ctx, "s2", tern.SubOptions{FromEnd: true}); err != nil {
			t.Fatal(err)
		}

		s, err := l.Subscribe(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			wantEntry(t, mustNext(t, s), tern.Offset(i), fmt.Sprint(i))
		}
		if err := s.Ack(4); !errors.Is(err, tern.ErrOutOfRange) {
			t.Fatalf("ack of an offset not delivered: %v, want ErrOutOfRange", err)
		}
		if err := s.Ack(2); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Next(ctx); !errors.Is(err, tern.ErrClosed) {
			t.Fatalf("next after Close: %v, want ErrClosed", err)
		}
		if info, err = l.Subscription(ctx, "s1"); err != nil || info.Cursor != 3 || info.Lag != 2 {
			t.Fatalf("after ack of 2 and Close: %+v, %v", info, err)
		}

		// Resumes after the last acknowledgement, from any goroutine.
		s, err = l.Subscribe(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		wantEntry(t, mustNext(t, s), 3, "3")
		done := make(chan error)
		go func() { done <- s.Ack(3) }()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		infos, err := l.Subscriptions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != 2 || infos[0].Name != "s1" || infos[0].Cursor != 4 || infos[0].Lag != 1 || infos[1].Name != "s2" || infos[1].Lag != 0 {
			t.Fatalf("subscriptions %+v", infos)
		}

		if err := l.Seek(ctx, "s1", 1); err != nil {
			t.Fatal(err)
		}
		if err := l.Seek(ctx, "s1", 100); !errors.Is(err, tern.ErrOutOfRange) {
			t.Fatalf("seek beyond the end: %v, want ErrOutOfRange", err)
		}
		if err := l.Seek(ctx, "none", 1); !errors.Is(err, tern.ErrSubNotFound) {
			t.Fatalf("seek a missing subscription: %v, want ErrSubNotFound", err)
		}
		s, err = l.Subscribe(ctx, "s1", tern.WithTicks())
		if err != nil {
			t.Fatal(err)
		}
		wantEntry(t, mustNext(t, s), 1, "1")

		// The subscriber follows the tail, ticks included.
		mustAppend(t, w, "5")
		if err := w.AppendTimeTick(ctx, 7); err != nil {
			t.Fatal(err)
		}
		es, err := collect(t, s, 5)
		if err != nil {
			t.Fatal(err)
		}
		if last := es[4]; !last.IsTick || last.Tick != 7 || last.Offset != 6 || es[3].Offset != 5 {
			t.Fatalf("read %+v, want entries 2 to 5 and the tick 7 at 6", es)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		if err := l.DeleteSubscription(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Subscription(ctx, "s1"); !errors.Is(err, tern.ErrSubNotFound) {
			t.Fatalf("describe deleted: %v, want ErrSubNotFound", err)
		}
		if _, err := l.Subscribe(ctx, "s1"); !errors.Is(err, tern.ErrSubNotFound) {
			t.Fatalf("subscribe deleted: %v, want ErrSubNotFound", err)
		}
		if err := l.DeleteSubscription(ctx, "s1"); !errors.Is(err, tern.ErrSubNotFound) {
			t.Fatalf("delete again: %v, want ErrSubNotFound", err)
		}
	})
}

// collect returns the next n entries and ticks of s.
func collect(t *testing.T, s *tern.Subscriber, n int) ([]tern.Entry, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out []tern.Entry
	for len(out) < n {
		es, err := s.NextBatch(ctx, n-len(out))
		if err != nil {
			return out, err
		}
		out = append(out, es...)
	}
	return out, nil
}

func TestModeTooLarge(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		_, w := mustCreate(t, c, "small", tern.LogOptions{MaxEntryBytes: 1024})
		big := tern.Entry{Payload: bytes.Repeat([]byte("x"), 1025)}
		if _, err := w.Append(t.Context(), big); !errors.Is(err, tern.ErrTooLarge) {
			t.Fatalf("append: %v, want ErrTooLarge", err)
		}
		if _, err := w.AppendBatch(t.Context(), []tern.Entry{{Payload: []byte("ok")}, big}); !errors.Is(err, tern.ErrTooLarge) {
			t.Fatalf("batch: %v, want ErrTooLarge", err)
		}
		props := tern.Entry{Payload: []byte("x"), Properties: map[string][]byte{"k": make([]byte, 1024)}}
		if _, err := w.AppendAsync(props).Wait(t.Context()); !errors.Is(err, tern.ErrTooLarge) {
			t.Fatalf("async append: %v, want ErrTooLarge", err)
		}
		if off := mustAppend(t, w, strings.Repeat("y", 1024)); off != 0 {
			t.Fatalf("append at the limit: offset %d", off)
		}
	})
}

func TestModeNextDeadline(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, w := mustCreate(t, c, "idle", tern.LogOptions{})
		if _, err := l.CreateSubscription(t.Context(), "s", tern.SubOptions{}); err != nil {
			t.Fatal(err)
		}
		s, err := l.Subscribe(t.Context(), "s")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		r := mustReader(t, l, 0)
		for _, x := range []nexter{r, s} {
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			_, err := x.Next(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("next on an idle log: %v, want DeadlineExceeded", err)
			}
		}
		mustAppend(t, w, "late")
		wantEntry(t, mustNext(t, r), 0, "late")
		wantEntry(t, mustNext(t, s), 0, "late")
	})
}

func TestRemoteOpenUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = tern.Open(ctx, tern.Options{Server: addr})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the server at "+addr) || !strings.Contains(err.Error(), "tern serve") {
		t.Fatalf("open %s with nothing listening: %v", addr, err)
	}
}

func TestRemoteClose(t *testing.T) {
	s := startServer(t, t.TempDir(), "127.0.0.1:0")
	c := openRemote(t, s.addr)
	l, w := mustCreate(t, c, "closing", tern.LogOptions{})
	if _, err := l.CreateSubscription(t.Context(), "s", tern.SubOptions{}); err != nil {
		t.Fatal(err)
	}
	sub, err := l.Subscribe(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	r := mustReader(t, l, 0)
	pending := w.AppendAsync(tern.Entry{Payload: []byte("queued")})
	wantEntry(t, mustNext(t, sub), 0, "queued")
	if err := sub.Ack(0); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error)
	go func() {
		_, err := r.Next(t.Context()) // entry 0, then waits until the Close
		if err == nil {
			_, err = r.Next(t.Context())
		}
		waiting <- err
	}()

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, fn := range []string{"tern.(*appendStream)", "tern.startRecv"} {
		if strings.Contains(stacks, fn) {
			t.Errorf("a goroutine in %s outlived Close:\n%s", fn, stacks)
		}
	}
	if _, err := pending.Wait(t.Context()); err != nil {
		t.Fatalf("an append queued before Close: %v", err)
	}
	if err := <-waiting; !errors.Is(err, tern.ErrClosed) {
		t.Fatalf("a reader waiting during Close: %v, want ErrClosed", err)
	}
	if _, err := c.OpenLog(t.Context(), "closing"); !errors.Is(err, tern.ErrClosed) {
		t.Fatalf("open after Close: %v, want ErrClosed", err)
	}
	if _, err := w.Append(t.Context(), tern.Entry{}); !errors.Is(err, tern.ErrClosed) {
		t.Fatalf("append after Close: %v, want ErrClosed", err)
	}
	if _, err := l.Info(t.Context()); !errors.Is(err, tern.ErrClosed) {
		t.Fatalf("info after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	// Closing the client closed the subscriber, which committed its ack.
	c2 := openRemote(t, s.addr)
	l2, err := c2.OpenLog(t.Context(), "closing")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := l2.Subscription(t.Context(), "s"); err != nil || info.Cursor != 1 {
		t.Fatalf("subscription after Close: %+v, %v", info, err)
	}
}

// TestRemoteServerRestart checks that a writer rides through a restart of
// its server: what it queued while the server was down is appended once
// the server is back, exactly once, and it goes on appending at its epoch.
func TestRemoteServerRestart(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "127.0.0.1:0")
	c := openRemote(t, s.addr)
	l, w := mustCreate(t, c, "restart", tern.LogOptions{})
	mustAppend(t, w, "before")
	r := mustReader(t, l, 0)
	wantEntry(t, mustNext(t, r), 0, "before")

	s.stop()
	short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := w.Append(short, tern.Entry{Payload: []byte("down")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append with the server down: %v, want the context's deadline (the writer retries)", err)
	}
	queued := w.AppendAsync(tern.Entry{Payload: []byte("queued")})

	startServer(t, dir, s.addr)
	if off, err := queued.Wait(t.Context()); err != nil || off != 2 {
		t.Fatalf("append queued while the server was down: %d, %v, want 2", off, err)
	}
	if off := mustAppend(t, w, "after"); off != 3 {
		t.Fatalf("appended at %d after the restart, want 3", off)
	}
	info, err := l.Info(t.Context())
	if err != nil || info.Epoch != w.Epoch() || info.End != 4 {
		t.Fatalf("after the restart: %+v, %v; want epoch %d and end 4", info, err, w.Epoch())
	}
	r2 := mustReader(t, l, 0)
	for i, want := range []string{"before", "down", "queued", "after"} {
		wantEntry(t, mustNext(t, r2), tern.Offset(i), want)
	}
}

// BenchmarkRemoteAppend appends 100-byte entries with Append from parallel
// goroutines, all through one remote Writer.
func BenchmarkRemoteAppend(b *testing.B) {
	for _, mode := range []string{"embedded", "remote"} {
		b.Run(mode, func(b *testing.B) {
			_, w := benchWriter(b, mode)
			payload := bytes.Repeat([]byte("x"), 100)
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := w.Append(context.Background(), tern.Entry{Payload: payload}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// A tick sent right after OpenReader or Subscribe returns reaches the reader
// and the subscriber: they are open on the server by then.
func TestModeTickRightAfterOpen(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		l, w := mustCreate(t, c, "ticks", tern.LogOptions{})
		if _, err := l.CreateSubscription(t.Context(), "s", tern.SubOptions{}); err != nil {
			t.Fatal(err)
		}
		for i := range uint64(20) {
			r := mustReader(t, l, tern.Offset(i), tern.WithTicks())
			s, err := l.Subscribe(t.Context(), "s", tern.WithTicks())
			if err != nil {
				t.Fatal(err)
			}
			if err := w.AppendTimeTick(t.Context(), 100+i); err != nil {
				t.Fatal(err)
			}
			mustAppend(t, w, "e")
			if e := mustNext(t, r); !e.IsTick || e.Tick != 100+i {
				t.Fatalf("round %d: the reader read %+v first, want tick %d", i, e, 100+i)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			e, err := s.Next(ctx)
			cancel()
			if err != nil || !e.IsTick || e.Tick != 100+i {
				t.Fatalf("round %d: the subscriber read %+v, %v first, want tick %d", i, e, err, 100+i)
			}
			if e, err := s.Next(t.Context()); err != nil || e.IsTick {
				t.Fatalf("round %d: then %+v, %v, want the entry", i, e, err)
			} else if err := s.Ack(e.Offset); err != nil {
				t.Fatal(err)
			}
			r.Close()
			s.Close()
		}
	})
}

// A call a client of a server cannot make fails with ErrUnsupported, never a
// silent nil; an embedded client makes it. Both refuse bad arguments alike,
// before either implementation is reached.
func TestModeUnsupported(t *testing.T) {
	forEachMode(t, func(t *testing.T, c *tern.Client) {
		remote := strings.HasPrefix(t.Name(), "TestModeUnsupported/remote")
		ctx := t.Context()
		l, _ := mustCreate(t, c, "u", tern.LogOptions{})
		_, idErr := c.LogID(ctx, "u")
		_, metaErr := c.ListLogsMeta(ctx, "")
		for name, err := range map[string]error{
			"LogID":        idErr,
			"ListLogsMeta": metaErr,
			"Compact":      l.Compact(ctx),
			"CloseLog":     c.CloseLog("u"),
		} {
			if remote && !errors.Is(err, tern.ErrUnsupported) {
				t.Errorf("%s on a client of a server: %v, want ErrUnsupported", name, err)
			}
			if !remote && err != nil {
				t.Errorf("%s on an embedded client: %v", name, err)
			}
		}
		l, err := c.OpenLog(ctx, "u") // after CloseLog
		if err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"CreateLog":          func() error { _, err := c.CreateLog(ctx, "/bad", tern.LogOptions{}); return err }(),
			"CloseLog":           c.CloseLog("bad//name"),
			"Subscribe":          func() error { _, err := l.Subscribe(ctx, "no/slash"); return err }(),
			"CreateSubscription": func() error { _, err := l.CreateSubscription(ctx, "", tern.SubOptions{}); return err }(),
		} {
			if !errors.Is(err, tern.ErrInvalidName) {
				t.Errorf("%s with a bad name: %v, want ErrInvalidName", name, err)
			}
		}
		if _, err := c.CreateLog(ctx, "neg", tern.LogOptions{SegmentAge: -time.Second}); !errors.Is(err, tern.ErrInvalid) {
			t.Errorf("CreateLog with a negative segment age: %v, want ErrInvalid", err)
		}
		r, err := l.OpenReader(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, err := r.NextBatch(ctx, 0); !errors.Is(err, tern.ErrInvalid) {
			t.Errorf("NextBatch(0): %v, want ErrInvalid", err)
		}
	})
}

// A client is of a data directory or of a server, never both at once.
func TestOpenDirAndServer(t *testing.T) {
	_, err := tern.Open(t.Context(), tern.Options{Dir: t.TempDir(), Server: "127.0.0.1:1"})
	if !errors.Is(err, tern.ErrInvalid) {
		t.Fatalf("Open with both Dir and Server: %v, want ErrInvalid", err)
	}
}
