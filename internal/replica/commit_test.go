package replica

import (
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ternwal/tern/internal/vfs"
)

// A group written while the group before it is being synced is not
// reported durable when that sync fails, even though its own succeeds: a
// failed fdatasync may have lost the earlier frames, and a durable count
// is a prefix.
func TestFailedSyncFailsTheGroupWrittenDuringIt(t *testing.T) {
	bad := journalPath(testDir, segA)
	var armed, failedOnce atomic.Bool
	syncing := make(chan struct{})      // the failing sync has started
	release := make(chan struct{})      // lets it fail
	wroteNext := make(chan struct{}, 1) // the next group was written meanwhile
	s := open(t, vfs.WithErrors(vfs.NewMem(), func(op vfs.Op, name string) error {
		if name != bad || !armed.Load() {
			return nil
		}
		switch {
		case op == vfs.OpSync && failedOnce.CompareAndSwap(false, true):
			close(syncing)
			<-release
			return syscall.EIO
		case op == vfs.OpWrite && failedOnce.Load():
			signal(wroteNext)
		}
		return nil
	}))
	mustAdd(t, s, segA, 1, 0, []byte("durable"))
	armed.Store(true)
	first, second := make(chan error, 1), make(chan error, 1)
	if err := s.Add(segA, 1, 1, []byte("lost"), FrameSum(1, []byte("lost")), func(err error) { first <- err }); err != nil {
		t.Fatal(err)
	}
	<-syncing
	if err := s.Add(segA, 1, 2, []byte("after"), FrameSum(2, []byte("after")), func(err error) { second <- err }); err != nil {
		t.Fatal(err)
	}
	<-wroteNext // written while the sync before it is under way
	close(release)
	wantErr(t, "the add whose sync failed", <-first, syscall.EIO)
	wantErr(t, "the add written during the failed sync", <-second, syscall.EIO)
	if sizes, err := s.List(segA); err != nil || len(sizes) != 1 {
		t.Errorf("List = %v, %v; want the one fragment made durable before the failure", sizes, err)
	}
}

// While a group is being synced, the next one is written: a sync that
// does not return does not hold up the writes queued behind it, only their
// report.
func TestWritesWhileSyncing(t *testing.T) {
	bad := journalPath(testDir, segA)
	var armed, held atomic.Bool
	syncing := make(chan struct{})
	release := make(chan struct{})
	wroteNext := make(chan struct{}, 1)
	s := open(t, vfs.WithErrors(vfs.NewMem(), func(op vfs.Op, name string) error {
		if name != bad || !armed.Load() {
			return nil
		}
		switch {
		case op == vfs.OpSync && held.CompareAndSwap(false, true):
			close(syncing)
			<-release
		case op == vfs.OpWrite && held.Load():
			signal(wroteNext)
		}
		return nil
	}))
	mustAdd(t, s, segA, 1, 0, []byte("a"))
	armed.Store(true)
	first, second := make(chan error, 1), make(chan error, 1)
	if err := s.Add(segA, 1, 1, []byte("b"), FrameSum(1, []byte("b")), func(err error) { first <- err }); err != nil {
		t.Fatal(err)
	}
	<-syncing
	if err := s.Add(segA, 1, 2, []byte("c"), FrameSum(2, []byte("c")), func(err error) { second <- err }); err != nil {
		t.Fatal(err)
	}
	<-wroteNext
	select {
	case err := <-second:
		t.Fatalf("add 2 reported (%v) before the sync that covers it", err)
	default:
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	checkFrags(t, s, segA, [][]byte{[]byte("a"), []byte("b"), []byte("c")})
}
