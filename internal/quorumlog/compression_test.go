package quorumlog

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/objlog/objlogtest"
	"github.com/ternwal/tern/internal/quorum"
	"github.com/ternwal/tern/internal/record"
)

// TestQuorumCompression: a quorum log's compressed batches go to the
// replicas and then to the object store as they are, and read back from
// both; the log stores fewer bytes than were appended, and says so after a
// reopen and an offload too (from metadata).
func TestQuorumCompression(t *testing.T) {
	for _, codec := range []record.Codec{record.Zstd, record.LZ4} {
		t.Run(codec.String(), func(t *testing.T) {
			e := newEnv(t, blob.NewMem())
			c := newCluster(t, e, 3)
			c.hold.Store(true) // read from the replicas first
			l := e.open(Options{Replicas: c.replicas(quorum.Default), Codec: codec, CacheBytes: 1})
			epoch := e.Writer(l)
			prefix := strings.Repeat(`{"op":"insert","user":"someone","tags":["a","b"]}`, 4)
			var want []string
			for r := range 5 {
				p := fmt.Sprintf("%s%d", prefix, r)
				objlogtest.AppendN(t, l, epoch, p, 40)
				for i := range 40 {
					want = append(want, fmt.Sprintf("%s-%d", p, i))
				}
			}
			if got := objlogtest.ReadAll(t, l, 0, 200); !slices.Equal(got, want) {
				t.Fatal("read from the replicas does not give the entries appended")
			}
			if stored, logical := l.Stats().Bytes, l.LogicalBytes(); logical < 2*stored {
				t.Fatalf("%d bytes stored for %d appended: want at most half", stored, logical)
			}
			c.hold.Store(false)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = e.open(Options{Replicas: c.replicas(quorum.Default), CacheBytes: 1})
			defer l.Close()
			checkLogical := func(when string) {
				t.Helper()
				if stored, logical := l.Stats().Bytes, l.LogicalBytes(); logical < 2*stored {
					t.Fatalf("%s: %d bytes stored for %d appended: want at most half", when, stored, logical)
				}
			}
			checkLogical("reopened")
			if _, err := l.Offload(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := objlogtest.ReadAll(t, l, 0, 200); !slices.Equal(got, want) {
				t.Fatal("read from the object store does not give the entries appended")
			}
			checkLogical("offloaded")
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = e.open(Options{Replicas: c.replicas(quorum.Default), CacheBytes: 1})
			defer l.Close()
			checkLogical("reopened after the offload")
		})
	}
}
