package tern

import (
	"context"

	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/objlog"
	"github.com/ternwal/tern/internal/wal"
)

// An open log's write and read path is an engine.Engine: a *wal.Log for a
// log in local segment files, an *objlog.Log for one in object storage
// (quorumlog.Open returns one too, its open segments on replicas).
var (
	_ engine.Engine = (*wal.Log)(nil)
	_ engine.Engine = (*objlog.Log)(nil)
	_ compacter     = (*objlog.Log)(nil)
)

// compacter is an engine that can rewrite the objects of its sealed
// segments into a few large ones now: an object log's.
type compacter interface {
	Compact(ctx context.Context) (int, error)
}
