package loadgen

import "context"

// Target is a system under test: one instance, opened fresh for a run.
// Its methods are called from many goroutines at once.
type Target interface {
	// Append appends entries as one batch to log number log (see Spec.Logs)
	// and returns once they are acknowledged, with the durability of the
	// variant under test. The entries must not be kept after it returns.
	Append(ctx context.Context, log int, entries [][]byte) error
	// Close releases the target; the run is over.
	Close() error
}

// AsyncAppender is a Target that can pipeline appends (Spec.InFlight).
type AsyncAppender interface {
	// AppendAsync starts appending entry to log number log and calls done,
	// from any goroutine, once it is acknowledged or has failed. It may
	// block to push back. The entry must not be kept after done is called.
	AppendAsync(ctx context.Context, log int, entry []byte, done func(error))
}

// Reader is a Target whose logs can be read back (e2e, catchup, pubsub).
type Reader interface {
	// Read calls fn with each entry of log number log, in order, from the
	// start of the log when fromStart is set, else from its current end,
	// until fn returns an error or ctx ends; it returns fn's error (or
	// ctx's). It calls ready once, when it is positioned: every entry
	// appended after ready is called must reach fn. fn must not keep entry
	// after it returns.
	Read(ctx context.Context, log int, fromStart bool, ready func(), fn func(entry []byte) error) error
}

// Noter is a Target with something to say about its run, such as write
// stalls or a setting it checked; Run adds it to Result.Notes.
type Noter interface {
	Notes() []string
}
