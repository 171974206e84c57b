// Package meta keeps Tern's metadata: which logs exist, their options, their
// writer epochs and truncation points. Metadata changes at log creation and
// deletion, writer changes and truncations, never per append.
//
// Store is implemented on a bbolt file in the data directory (OpenBolt), for
// a program that embeds Tern without etcd. Every implementation passes the
// acceptance suite in package metatest.
package meta

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrNotFound is returned for a log that does not exist.
	ErrNotFound = errors.New("meta: log not found")
	// ErrExist is returned when creating a log whose name is taken.
	ErrExist = errors.New("meta: log already exists")
	// ErrLocked is returned when another process holds the store.
	ErrLocked = errors.New("meta: store is in use by another process")
)

// Log is the metadata of one log.
type Log struct {
	Name    string
	ID      uint64    // assigned by CreateLog, unique for the store's lifetime, never reused
	Created time.Time // set by CreateLog
	// Options is opaque to the store: the caller's encoded log options.
	Options []byte
	// Epoch is the epoch of the newest writer; 0 before the first writer.
	Epoch uint64
	// Start is the truncation point: offsets below it may be gone.
	Start uint64
}

// Store is the metadata store. Implementations are safe for concurrent use.
type Store interface {
	// CreateLog stores a new log with the given Name and Options, assigns its
	// ID and Created time, and returns it. It fails with ErrExist if the name
	// is taken.
	CreateLog(ctx context.Context, l Log) (Log, error)
	// Log returns the named log or ErrNotFound.
	Log(ctx context.Context, name string) (Log, error)
	// ListLogs returns the logs whose names start with prefix, by name.
	ListLogs(ctx context.Context, prefix string) ([]Log, error)
	// DeleteLog removes the named log or returns ErrNotFound.
	DeleteLog(ctx context.Context, name string) error
	// BumpEpoch atomically increments the log's epoch and returns the new
	// value, durably stored before it returns.
	BumpEpoch(ctx context.Context, name string) (uint64, error)
	// AdvanceStart raises the log's Start to start if that is higher (it never
	// moves back) and returns the Start now stored.
	AdvanceStart(ctx context.Context, name string, start uint64) (uint64, error)
	// Close releases the store.
	Close() error
}
