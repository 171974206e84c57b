package quorumlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/objlog/objlogtest"
	"github.com/ternwal/tern/internal/quorum"
	"github.com/ternwal/tern/internal/replica"
	"github.com/ternwal/tern/internal/vfs"
)

// journalCluster is a cluster of n replica nodes whose journals are files
// under dirs[id], so that a test can damage them as a disk would.
func journalCluster(t *testing.T, e *env, n int, memBytes int64) (*cluster, map[string]string) {
	t.Helper()
	c := &cluster{nodes: map[string]*faultNode{}}
	dirs := map[string]string{}
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		c.nodes[id], dirs[id] = c.journalNode(t, e, memBytes)
		c.ids = append(c.ids, id)
	}
	return c, dirs
}

// journalNode returns a replica of c that keeps its journal on disk, and
// the journal's directory.
func (c *cluster) journalNode(t *testing.T, e *env, memBytes int64) (*faultNode, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := replica.Open(replica.Options{FS: vfs.OS, Dir: dir, Bucket: e.Bucket, MemBytes: memBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &faultNode{Node: replica.NewLocal(s), store: s, hold: &c.hold}, dir
}

// flipFragment flips a bit in the data of fragment k of segment seq of log
// 7 in the journal under dir, and returns the journal's path.
func flipFragment(t *testing.T, dir string, seq uint64, k int) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("%020d", 7), fmt.Sprintf("%020d.frags", seq))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const header, frameHeader = 48, 28 // journal format version 2 (internal/replica/doc.go)
	pos := header
	for range k {
		pos += frameHeader + int(binary.LittleEndian.Uint32(b[pos+4:]))
	}
	size := int(binary.LittleEndian.Uint32(b[pos+4:]))
	if pos+frameHeader+size > len(b) || size < 60 {
		t.Fatalf("fragment %d of %s: %d bytes at %d of %d", k, path, size, pos, len(b))
	}
	at := int64(pos + frameHeader + 50) // in the first batch's entries
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{b[at] ^ 0x08}, at); err != nil {
		t.Fatal(err)
	}
	return path
}

// segmentInfo returns what replica node holds of segment seq.
func segmentInfo(c *cluster, node string, seq uint64) replica.SegmentInfo {
	for _, in := range c.nodes[node].store.Segments() {
		if in.ID.Seq == seq {
			return in
		}
	}
	return replica.SegmentInfo{}
}

// syncBuffer is a log destination the handler writes to from any goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestQuorumReadRepairsDamagedReplica flips a bit in one replica's journal
// copy of a fragment, of a sealed segment not yet offloaded and of the open
// segment, and reads the log through a new handle, which asks that replica
// first: the read returns every entry as written, from another replica,
// and the owner logs the damaged copy. The offload then stores the
// segments from a healthy replica, and says so too.
func TestQuorumReadRepairsDamagedReplica(t *testing.T) {
	for _, open := range []bool{false, true} {
		t.Run(fmt.Sprintf("open=%v", open), func(t *testing.T) {
			e := newEnv(t, blob.NewMem())
			// Little replica memory: the open segment's durable
			// fragments are read from the journals.
			c, dirs := journalCluster(t, e, 3, 600)
			c.hold.Store(true) // the sealed segments stay on the replicas
			var logged syncBuffer
			logger := slog.New(slog.NewTextHandler(&logged, nil))
			opts := Options{Replicas: c.replicas(quorum.Default), SegmentBytes: 700, FlushBytes: 300, MaxBatchBytes: 100,
				MaxInFlight: 1, CacheBytes: 1, Logger: logger}
			w := e.open(opts)
			defer func() { w.Close() }()
			epoch := e.Writer(w)
			var want []string
			round := func() {
				prefix := fmt.Sprintf("r%d", len(want)/10)
				objlogtest.AppendN(t, w, epoch, prefix, 10)
				for i := range 10 {
					want = append(want, fmt.Sprintf("%s-%d", prefix, i))
				}
			}
			for range 12 {
				round()
			}
			// The damaged replica must be the one readers ask first,
			// hold the fragment, and read it from its journal. A sealed
			// segment's third replica may lag behind (the ack quorum
			// is two), and the open segment needs fragments.
			var target meta.Segment
			var node string
			for tries := 0; node == ""; tries++ {
				if tries == 20 {
					t.Fatalf("no segment fits the test: %+v", e.Segments())
				}
				segs := e.Segments()
				for _, m := range segs {
					if m.Sealed == open || (open && m.Seq != segs[len(segs)-1].Seq) {
						continue
					}
					in := segmentInfo(c, m.Ensemble[0], m.Seq)
					if in.Count >= 1 && in.MemBytes < in.Bytes && (open || in.Count == uint64(len(m.Objects))) {
						target, node = m, m.Ensemble[0]
						break
					}
				}
				if node == "" {
					round()
				}
			}
			journal := flipFragment(t, dirs[node], target.Seq, 0)

			r := e.open(Options{Replicas: c.replicas(quorum.Default), CacheBytes: 1, Logger: logger})
			defer func() { r.Close() }()
			if got := objlogtest.ReadAll(t, r, 0, uint64(len(want))); !slices.Equal(got, want) {
				t.Fatalf("read %q, want %q", got, want)
			}
			if s := logged.String(); !strings.Contains(s, "damaged") || !strings.Contains(s, node) || !strings.Contains(s, journal) {
				t.Fatalf("the damaged copy on %s was not logged; the log says:\n%s", node, s)
			}

			// The writer seals the open segment; then a new handle
			// offloads every segment, the damaged one from another
			// replica.
			r.Close()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			c.hold.Store(false)
			before := len(logged.String())
			o := e.open(Options{Replicas: c.replicas(quorum.Default), CacheBytes: 1, Logger: logger})
			defer o.Close()
			if _, err := o.Offload(context.Background()); err != nil {
				t.Fatal(err)
			}
			if s := logged.String()[before:]; !strings.Contains(s, node) || !strings.Contains(s, journal) {
				t.Fatalf("the offload did not log the replica it could not offload from; the log says:\n%s", s)
			}
			for _, s := range e.Segments() {
				if len(s.Ensemble) != 0 {
					t.Fatalf("segment %d is still on replicas %v after the offload", s.Seq, s.Ensemble)
				}
			}
			r = e.open(Options{CacheBytes: 1})
			if got := objlogtest.ReadAll(t, r, 0, uint64(len(want))); !slices.Equal(got, want) {
				t.Fatalf("read from the bucket %q, want %q", got, want)
			}
		})
	}
}

// TestQuorumRecoveryReadsAroundDamagedCopy recovers an open quorum segment
// whose longest copy, the one recovery copies forward from, has a damaged
// fragment: that fragment is copied from another replica that holds it,
// the segment recovers whole, and the damaged copy is logged.
func TestQuorumRecoveryReadsAroundDamagedCopy(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	c, dirs := journalCluster(t, e, 3, 0)
	// n0 has room for two fragments in memory: it reads the older from its
	// journal.
	c.nodes["n0"], dirs["n0"] = c.journalNode(t, e, 300)
	// An ack quorum of all three: recovery copies forward to both others.
	old := e.leftOpen(c.ids, 3)
	// n0 holds the most fragments, with fragment 1 damaged, which n2
	// lacks and n1 holds a good copy of.
	id := replica.SegmentID{Log: 7, Seq: 1}
	c.addFragments(t, id, old, map[string]int{"n0": 5, "n1": 2, "n2": 1})
	journal := flipFragment(t, dirs["n0"], 1, 1)

	var logged syncBuffer
	l := e.open(Options{Replicas: c.replicas(quorum.Default), CacheBytes: 1, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	defer l.Close()
	e.Writer(l)
	if segs := e.Segments(); !segs[0].Sealed || segs[0].End != 50 {
		t.Fatalf("recovered segment: %+v, want sealed at 50", segs[0])
	}
	for i, g := range objlogtest.ReadAll(t, l, 0, 50) {
		if want := fmt.Sprintf("f-%d", i); g != want {
			t.Fatalf("entry %d is %q, want %q", i, g, want)
		}
	}
	if s := logged.String(); !strings.Contains(s, "damaged") || !strings.Contains(s, "n0") || !strings.Contains(s, journal) {
		t.Fatalf("the damaged copy on n0 was not logged; the log says:\n%s", s)
	}
}
