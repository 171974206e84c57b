package tern

import (
	"errors"
	"io"
	"time"

	"github.com/ternwal/tern/internal/blob"
)

// Observer is told what the engines of a data directory do, for metrics
// (tern serve exports them). Its funcs are called from many goroutines, on
// the append and read paths: they must be cheap and safe for concurrent
// use. A nil func is not called; the zero Observer observes nothing.
type Observer struct {
	// Sync is told how long each fdatasync of a local log's segment took
	// (a group commit's, or an interval sync's).
	Sync func(time.Duration)
	// Object is told each request to the object store of the object and
	// quorum logs: its operation ("put", "get", "getrange", "stat", "list",
	// "delete"), its result ("ok"; "not_found" and "exists", which are
	// answers; "error", a failure), and how long it took.
	Object func(op, result string, d time.Duration)
	// ReplicaLost is told the node ID of each replica dropped from the
	// ensemble of a quorum log's open segment (it failed, or fell behind);
	// the segment then rolls to a new ensemble.
	ReplicaLost func(node string)
}

// Bucket returns b, its requests reported to o.Object (b itself when that
// is nil): tern serve wraps a node's bucket of quorum offloads with it.
func (o Observer) Bucket(b blob.Bucket) blob.Bucket {
	if b == nil || o.Object == nil {
		return b
	}
	return blob.Observe(b, func(op blob.Op, d time.Duration, err error) {
		result := "ok"
		switch {
		case err == nil, errors.Is(err, io.EOF): // a GetRange past the object's end
		case errors.Is(err, blob.ErrNotFound):
			result = "not_found"
		case errors.Is(err, blob.ErrExist):
			result = "exists"
		default:
			result = "error"
		}
		o.Object(string(op), result, d)
	})
}
