package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/ternpb"
)

// diskFullEntryBytes is the size of the entries that fill the disk.
const diskFullEntryBytes = 256 << 10

// mountTmpfs mounts a tmpfs of the given size (mount's size=, such as
// "256m") on a new directory, unmounted by the test's cleanup after
// everything registered later (the servers) has stopped. The test is
// skipped where mounting is impossible: not root, or not allowed.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700")
	if errors.Is(err, syscall.EPERM) || (err != nil && os.Geteuid() != 0) {
		t.Skipf("a full disk is simulated with a small tmpfs, and mounting one here failed (%v): run as root, or in a container allowed to mount (CAP_SYS_ADMIN)", err)
	}
	if err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount the tmpfs on %s: %v", dir, err)
		}
	})
	return dir
}

// diskFullPayload is the payload of the entry at off: its offset, then
// filler, so that a reader can tell each entry is its own.
func diskFullPayload(off tern.Offset) []byte {
	p := bytes.Repeat([]byte{byte(off)}, diskFullEntryBytes)
	copy(p, fmt.Sprintf("entry %012d;", off))
	return p
}

// fillLog appends batches of four entries until an append fails, and
// returns the failure and the log's end. Every acknowledged entry holds
// diskFullPayload of its offset.
func fillLog(t *testing.T, w *tern.Writer, end tern.Offset) (tern.Offset, error) {
	t.Helper()
	for range 4096 { // 4 GiB: more than the tmpfs holds
		batch := make([]tern.Entry, 4)
		for i := range batch {
			batch[i] = tern.Entry{Payload: diskFullPayload(end + tern.Offset(i))}
		}
		off, err := w.AppendBatch(deadline(t), batch)
		if err != nil {
			return end, err
		}
		if off != end {
			t.Fatalf("batch acknowledged at offset %d, want %d", off, end)
		}
		end += tern.Offset(len(batch))
	}
	t.Fatal("the disk never filled up")
	return end, nil
}

// checkLog reads [from, end) of l and requires each entry to hold
// diskFullPayload of its offset, without keeping them.
func checkLog(t *testing.T, l *tern.Log, from, end tern.Offset) {
	t.Helper()
	ctx := deadline(t)
	r, err := l.OpenReader(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for next := from; next < end; {
		es, err := r.NextBatch(ctx, 64)
		if err != nil {
			t.Fatalf("read at %d of [%d, %d): %v", next, from, end, err)
		}
		for _, e := range es {
			if e.Offset != next || !bytes.Equal(e.Payload, diskFullPayload(e.Offset)) {
				t.Fatalf("read offset %d (%.20q), want offset %d with its own payload", e.Offset, e.Payload, next)
			}
			next++
		}
	}
}

// checkFull requires the server to say its disk is full (/readyz 503 with
// the reason, tern_disk_full 1), or that it is not (200, 0).
func checkFull(t *testing.T, s *server, data string, full bool) {
	t.Helper()
	code, body := httpGet(t, s.httpAddr, "/readyz")
	if full && (code != http.StatusServiceUnavailable || !strings.Contains(body, "no space left on the disk of "+data)) {
		t.Fatalf("/readyz on a full disk: %d %q; want 503 saying no space is left on the disk of %s", code, body, data)
	}
	if !full && code != http.StatusOK {
		t.Fatalf("/readyz once space is freed: %d %q; want 200", code, body)
	}
	_, metrics := httpGet(t, s.httpAddr, "/metrics")
	want := fmt.Sprintf("tern_disk_full{dir=%q} %d\n", data, map[bool]int{false: 0, true: 1}[full])
	if !strings.Contains(metrics, want) {
		t.Fatalf("/metrics has no %q", want)
	}
}

// TestDiskFull fills the data directory's disk (a small tmpfs, which also
// holds the embedded etcd) with appends, twice: up to the reserve of
// --disk-reserve, and, with no reserve, up to the filesystem's ENOSPC.
// Each time the appends that do not fit fail with RESOURCE_EXHAUSTED
// naming the directory, /readyz turns 503 with the reason, the process
// stays up, reads, subscriptions and metadata changes go on, and once
// space is freed (a truncation that lets retention delete sealed segments,
// then the removal of a file) appends are taken again by themselves and
// /readyz turns 200. After a restart every acknowledged entry is intact.
func TestDiskFull(t *testing.T) {
	mnt := mountTmpfs(t, "256m") // the embedded etcd preallocates 128 MiB of WAL
	data := filepath.Join(mnt, "data")
	s := startServer(t, data, "--disk-reserve", "16MiB")
	c := openClient(t, s.addr)
	l, err := c.CreateLog(deadline(t), "full", tern.LogOptions{SegmentBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateSubscription(deadline(t), "sub", tern.SubOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := l.OpenWriter(deadline(t))
	if err != nil {
		t.Fatal(err)
	}

	// Up to the reserve.
	end, err := fillLog(t, w, 0)
	checkNoSpace(t, err, data)
	t.Logf("up to the reserve: %d entries acknowledged, then: %v", end, err)
	checkFull(t, s, data, true)
	rawAppendNoSpace(t, s, "full", data)
	checkLog(t, l, 0, end)
	subscribe(t, l, 0, 100)
	if _, err := c.CreateLog(deadline(t), "created-while-full", tern.LogOptions{}); err != nil {
		t.Fatalf("create a log on a full disk: %v", err)
	}
	if !s.running() {
		t.Fatal("the server exited on a full disk")
	}

	// Truncate: retention deletes the segments below, and the next append
	// is taken.
	if w, err = l.OpenWriter(deadline(t)); err != nil { // rawAppendNoSpace fenced it
		t.Fatal(err)
	}
	start := end / 2
	if err := l.Truncate(deadline(t), start); err != nil {
		t.Fatalf("truncate on a full disk: %v", err)
	}
	if off, err := w.Append(deadline(t), tern.Entry{Payload: diskFullPayload(end)}); err != nil || off != end {
		t.Fatalf("append once space was freed: offset %d, %v; want %d", off, err, end)
	}
	end++
	checkFull(t, s, data, false)

	// Without a reserve, up to ENOSPC. A filler file keeps some space to
	// free again without a metadata write.
	s.stop()
	s.args = []string{"--disk-reserve", "0"}
	s.restart()
	c = openClient(t, s.addr)
	if l, err = c.OpenLog(deadline(t), "full"); err != nil {
		t.Fatal(err)
	}
	if w, err = l.OpenWriter(deadline(t)); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	end, err = fillLog(t, w, end)
	checkNoSpace(t, err, data)
	t.Logf("up to ENOSPC: the log ends at %d, then: %v", end, err)
	if !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("append at ENOSPC: %v; want it to say no space left on device", err)
	}
	checkFull(t, s, data, true)
	checkLog(t, l, start, end)
	if err := l.Seek(deadline(t), "sub", start); err != nil {
		t.Fatalf("seek a subscription on a full disk: %v", err)
	}
	subscribe(t, l, start, 100)
	if !s.running() {
		t.Fatal("the server exited on a full disk")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if off, err := w.Append(deadline(t), tern.Entry{Payload: diskFullPayload(end)}); err != nil || off != end {
		t.Fatalf("append once space was freed: offset %d, %v; want %d", off, err, end)
	}
	end++
	checkFull(t, s, data, false)

	// Everything acknowledged is there after a restart, and so is the
	// subscription's cursor committed on the full disk.
	s.stop()
	s.restart()
	c = openClient(t, s.addr)
	if l, err = c.OpenLog(deadline(t), "full"); err != nil {
		t.Fatal(err)
	}
	info, err := l.Info(deadline(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.Start < start || info.End != end {
		t.Fatalf("after a restart the log holds [%d, %d), want [%d or more, %d)", info.Start, info.End, start, end)
	}
	checkLog(t, l, info.Start, end)
	if sub, err := l.Subscription(deadline(t), "sub"); err != nil || sub.Cursor != start+100 {
		t.Fatalf("subscription after a restart: %+v, %v; want its cursor at %d", sub, err, start+100)
	}
}

// rawAppendNoSpace appends to the log over raw gRPC, with a writer of its
// own, and requires the status RESOURCE_EXHAUSTED with the reason NO_SPACE
// and a message naming the data directory.
func rawAppendNoSpace(t *testing.T, s *server, log, data string) {
	t.Helper()
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api := ternpb.NewTernClient(conn)
	ctx := deadline(t)
	ow, err := api.OpenWriter(ctx, &ternpb.OpenWriterRequest{Log: log})
	if err != nil {
		t.Fatalf("open a writer on a full disk: %v", err)
	}
	_, err = api.Append(ctx, &ternpb.AppendRequest{Log: log, Epoch: ow.GetEpoch(), Entries: []*ternpb.Entry{{Payload: make([]byte, 4<<20)}}})
	wantStatus(t, err, codes.ResourceExhausted, "NO_SPACE")
	if !strings.Contains(status.Convert(err).Message(), data) {
		t.Fatalf("append on a full disk: %v; want the message to name %s", err, data)
	}
}

// checkNoSpace requires err to be the refusal of an append on a full disk:
// ErrNoSpace (RESOURCE_EXHAUSTED), naming the data directory.
func checkNoSpace(t *testing.T, err error, data string) {
	t.Helper()
	if !errors.Is(err, tern.ErrNoSpace) || !strings.Contains(err.Error(), data) {
		t.Fatalf("append on a full disk: %v; want ErrNoSpace (RESOURCE_EXHAUSTED) naming %s", err, data)
	}
}

// subscribe receives n entries of the subscription "sub" from its cursor
// at from, acknowledges them, and closes the subscriber, which commits
// the cursor.
func subscribe(t *testing.T, l *tern.Log, from tern.Offset, n int) {
	t.Helper()
	ctx := deadline(t)
	sub, err := l.Subscribe(ctx, "sub")
	if err != nil {
		t.Fatalf("subscribe on a full disk: %v", err)
	}
	for i := range n {
		e, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("subscription on a full disk: %v", err)
		}
		if want := from + tern.Offset(i); e.Offset != want || !bytes.Equal(e.Payload, diskFullPayload(e.Offset)) {
			t.Fatalf("subscription delivered offset %d, want %d with its payload", e.Offset, want)
		}
		if err := sub.Ack(e.Offset); err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("close a subscriber on a full disk (commits its cursor): %v", err)
	}
}
