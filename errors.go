package tern

import (
	"errors"

	"github.com/ternwal/tern/internal/segment"
	"github.com/ternwal/tern/internal/wal"
)

// Errors returned by Tern. Callers branch on them with errors.Is; the message
// of the returned error adds what is known where it happened.
var (
	// ErrNotFound: the log does not exist.
	ErrNotFound = errors.New("tern: log not found")
	// ErrExist: a log of that name exists already.
	ErrExist = errors.New("tern: log already exists")
	// ErrInvalidName: a log name breaks the naming rules.
	ErrInvalidName = errors.New("tern: invalid log name")
	// ErrFenced: a newer writer has been opened on the log.
	ErrFenced = wal.ErrFenced
	// ErrTruncated: the offset read is below the log's start. The error is a
	// *TruncatedError that says where the log now starts.
	ErrTruncated = wal.ErrTruncated
	// ErrOutOfRange: the offset is beyond the log's end.
	ErrOutOfRange = wal.ErrOutOfRange
	// ErrTooLarge: an entry is over the log's MaxEntryBytes, or a batch over
	// MaxBatchBytes.
	ErrTooLarge = errors.New("tern: too large")
	// ErrCorrupt: stored data failed its checks. The error is a
	// *CorruptError that names the file and position.
	ErrCorrupt = segment.ErrCorrupt
	// ErrClosed: the client, log, writer or reader is closed.
	ErrClosed = wal.ErrClosed
	// ErrLocked: another process has the data directory open.
	ErrLocked = errors.New("tern: data directory is in use by another process")
)

// TruncatedError reports a read below the log's start.
type TruncatedError = wal.TruncatedError

// CorruptError reports damaged data: the file and the byte position.
type CorruptError = segment.CorruptError
