package quorumlog

import (
	"testing"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/objlog/objlogtest"
	"github.com/ternwal/tern/internal/quorum"
)

// A writer dies with appends in flight to its ensemble; a newer writer, as
// another node taking the log over would, recovers the segment and
// rebuilds the deduplication state from the replicas: every retry is
// answered with the offset its append has, or appended if it never got
// there. The same after a clean close (the segment sealed, perhaps
// offloaded) and a reopen with a newer epoch.
func TestQuorumDedupAcrossWriters(t *testing.T) {
	e := newEnv(t, blob.NewMem())
	c := newCluster(t, e, 3)
	a := e.open(Options{Replicas: c.replicas(quorum.Default), FlushBytes: 200, MaxBatchBytes: 100})
	defer a.Close()
	ea := e.Writer(a)
	keys := objlogtest.Keys(3, 30)
	acked, err := objlogtest.AppendKeys(a, ea, keys[:45])
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys[45:] { // in flight when the next writer fences
		if _, err := a.Append(ea, k.Entries(), engine.AppendOptions{Producer: k.Producer, Seq: k.Seq}); err != nil {
			t.Fatal(err)
		}
	}

	b := e.open(Options{Replicas: c.replicas(quorum.Default), FlushBytes: 200, MaxBatchBytes: 100})
	eb := e.Writer(b)
	at := objlogtest.Placed(t, b)
	for k, off := range acked {
		if at[k] != off {
			t.Fatalf("acknowledged %+v at %d, the log has it at %d", k, off, at[k])
		}
	}
	objlogtest.RetryAll(t, b, eb, keys, at)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	l := e.open(Options{Replicas: c.replicas(quorum.Default)})
	defer l.Close()
	el := e.Writer(l)
	objlogtest.RetryAll(t, l, el, keys, objlogtest.Placed(t, l))
}
