package meta_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/meta"
)

// A bbolt store's metadata loaded into etcd reads back the same through the
// Store API: logs with their IDs, epochs, sessions and starts,
// subscriptions, segments and the installation, and new logs get IDs above
// the moved ones. A second Load is a no-op, and a root of another
// installation is refused.
func TestLoadBoltIntoEtcd(t *testing.T) {
	ctx := t.Context()
	b, err := meta.OpenBolt(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range 150 { // more than one transaction's worth
		name := fmt.Sprintf("ns/log-%03d", i)
		if _, err := b.CreateLog(ctx, meta.Log{Name: name, Options: []byte(`{"x":1}`), Installation: "I"}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := b.DeleteLog(ctx, name); err != nil {
				t.Fatal(err)
			}
		}
	}
	const name = "ns/log-001"
	c, err := b.ClaimWriter(ctx, name, meta.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AdvanceStart(ctx, name, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSub(ctx, name, meta.Sub{Name: "s1", Pin: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CommitCursor(ctx, name, "s1", 42); err != nil {
		t.Fatal(err)
	}
	l, err := b.Log(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now().UTC().Truncate(time.Microsecond)
	if err := b.CreateSegment(ctx, name, meta.Segment{Seq: 1, Epoch: l.Epoch, Base: 0, Created: created}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SealSegment(ctx, name, meta.Segment{Seq: 1, Epoch: l.Epoch, Base: 0, Sealed: true, End: 9, Bytes: 90,
		Objects: []meta.SegmentObject{{Key: "0", Base: 0, Bytes: 90}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSegment(ctx, name, meta.Segment{Seq: 2, Epoch: l.Epoch, Base: 9, Created: created}); err != nil {
		t.Fatal(err)
	}

	contents, err := b.Contents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if contents.LastID != 150 || len(contents.Logs) != 100 {
		t.Fatalf("Contents: last ID %d and %d logs, want 150 and 100", contents.LastID, len(contents.Logs))
	}
	srv := startEtcd(t, t.TempDir())
	e := openEtcd(t, srv.Endpoints(), meta.EtcdOptions{})
	defer e.Close()
	if err := e.Load(ctx, contents); err != nil {
		t.Fatalf("Load: %v", err)
	}
	if err := e.Load(ctx, contents); err != nil {
		t.Fatalf("Load again: %v", err)
	}

	same := func(what string, get func(s meta.Store) (any, error)) {
		t.Helper()
		want, err := get(b)
		if err != nil {
			t.Fatalf("%s in bbolt: %v", what, err)
		}
		got, err := get(e)
		if err != nil {
			t.Fatalf("%s in etcd: %v", what, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s in etcd:\n%+v\nwant, as in bbolt:\n%+v", what, got, want)
		}
	}
	same("installation", func(s meta.Store) (any, error) { return s.Installation(ctx) })
	same("logs", func(s meta.Store) (any, error) { return s.ListLogs(ctx, "") })
	same("subscriptions", func(s meta.Store) (any, error) { return s.ListSubs(ctx, name) })
	same("segments", func(s meta.Store) (any, error) { return s.Segments(ctx, name) })

	// The open segment stays the only open one: a new one is refused until it is sealed.
	if err := e.CreateSegment(ctx, name, meta.Segment{Seq: 3, Epoch: l.Epoch, Base: 20}); !errors.Is(err, meta.ErrSegmentExist) {
		t.Fatalf("CreateSegment while segment 2 is open: err = %v, want ErrSegmentExist", err)
	}
	nl, err := e.CreateLog(ctx, meta.Log{Name: "new"})
	if err != nil {
		t.Fatal(err)
	}
	if nl.ID != 151 {
		t.Fatalf("a log created after the load has ID %d, want 151", nl.ID)
	}
	ec, err := e.ClaimWriter(ctx, name, meta.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ec.Epoch() <= l.Epoch {
		t.Fatalf("a claim after the load has epoch %d, not above the moved %d", ec.Epoch(), l.Epoch)
	}
	ec.Release(ctx)

	// A root holding part of an interrupted load, and no install record,
	// is cleared and written again.
	cli := rawClient(t, srv.Endpoints())
	if _, err := cli.Put(ctx, "/part/names/gone", "stale"); err != nil {
		t.Fatal(err)
	}
	p := openEtcd(t, srv.Endpoints(), meta.EtcdOptions{Root: "/part/"})
	defer p.Close()
	if err := p.Load(ctx, contents); err != nil {
		t.Fatalf("Load over an interrupted load: %v", err)
	}
	if _, err := p.Log(ctx, "gone"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("a log of the interrupted load after Load: err = %v, want ErrNotFound", err)
	}
	if logs, err := p.ListLogs(ctx, ""); err != nil || len(logs) != 100 {
		t.Fatalf("ListLogs after Load over an interrupted load: %d logs, %v; want 100", len(logs), err)
	}

	other := contents
	other.Installation.ID = "ANOTHERINSTALLATION0000000"
	if err := e.Load(ctx, other); !errors.Is(err, meta.ErrOtherInstallation) {
		t.Fatalf("Load of another installation: err = %v, want ErrOtherInstallation", err)
	}
}
