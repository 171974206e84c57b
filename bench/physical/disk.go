package physical

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/internal/vfs"
)

// preallocBytes is the least a preallocated DiskSync file holds; its
// writes go round it.
const preallocBytes = 16 << 20

// SyncFile is the file DiskSync writes to.
type SyncFile int

const (
	// Growing appends to a new file, so each fdatasync also commits the
	// file's growth, until the file holds MaxFileBytes; then the writes go
	// on from its start, overwriting (Variant "write+fdatasync").
	Growing SyncFile = iota
	// NewFiles appends to a new file, and when it holds MaxFileBytes
	// removes it and appends to another: every fdatasync commits growth,
	// as it does for a log whose segments are new files (Variant
	// "write+fdatasync (new files)").
	NewFiles
	// Preallocated overwrites a file of zeros that was written and synced
	// beforehand, so fdatasync has only data to flush (Variant
	// "pwrite+fdatasync (preallocated)").
	Preallocated
)

var syncVariants = map[SyncFile]string{
	Growing:      "write+fdatasync",
	NewFiles:     "write+fdatasync (new files)",
	Preallocated: "pwrite+fdatasync (preallocated)",
}

// DiskSync measures durable writes as a write-ahead log makes them: one at
// a time, each write of size bytes followed by fdatasync, the latency being
// that of the pair, to the file that kind says.
func DiskSync(ctx context.Context, dir string, size int, kind SyncFile, d time.Duration) (_ *loadgen.Result, err error) {
	variant, ok := syncVariants[kind]
	switch {
	case !ok:
		return nil, fmt.Errorf("physical: unknown file kind %d", kind)
	case size <= 0:
		return nil, fmt.Errorf("physical: write size %d: want a positive size", size)
	}
	f, err := os.CreateTemp(dir, "physical-sync-*")
	if err != nil {
		return nil, fmt.Errorf("physical: %w", err)
	}
	defer func() { removeFile(f, &err) }()
	var (
		removing  sync.WaitGroup // NewFiles: the full files being removed
		removeMu  sync.Mutex
		removeErr error
	)
	defer func() {
		removing.Wait()
		err = errors.Join(err, removeErr)
	}()

	limit := int64(max(fileLimit/size, 1) * size)
	if kind == Preallocated {
		limit = int64((max(preallocBytes, 16*size) + size - 1) / size * size)
		if err := writeZeros(ctx, f, limit); err != nil {
			return nil, err
		}
	}
	buf := payload(size)
	m := startMeter()
	var off int64
	n, err := m.loop(ctx, time.Now().Add(d), func() error {
		if off+int64(size) > limit {
			off = 0
			switch kind {
			case Growing:
				m.note(fmt.Sprintf("the file reached %d bytes, and writes went on from its start", limit))
			case NewFiles:
				m.note(fmt.Sprintf("each file took %d bytes, then writes went on in a new one", limit))
				next, err := os.CreateTemp(dir, "physical-sync-*")
				if err != nil {
					return err
				}
				// Removed meanwhile, as a log removes old segments, and
				// not timed as part of a write.
				old := f
				removing.Go(func() {
					var err error
					removeFile(old, &err)
					removeMu.Lock()
					removeErr = errors.Join(removeErr, err)
					removeMu.Unlock()
				})
				f = next
			}
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			return err
		}
		off += int64(size)
		return vfs.Datasync(f)
	})
	if err != nil {
		return nil, measureError(variant, err)
	}
	spec := loadgen.Spec{Kind: loadgen.KindAppend, EntryBytes: size, Batch: 1, Producers: 1, Logs: 1, Duration: d}
	return m.result("disk", variant, spec, n, size), nil
}

// DiskDirect measures sequential writes of size bytes with O_DIRECT, one at
// a time, to a new file: the bandwidth of the disk itself, without the page
// cache. With sync each write is followed by fdatasync (Variant
// "o_direct+fdatasync"), else not ("o_direct"). size must be a multiple of
// 4096.
func DiskDirect(ctx context.Context, dir string, size int, sync bool, d time.Duration) (_ *loadgen.Result, err error) {
	if err := checkDirectSize(size); err != nil {
		return nil, err
	}
	variant := "o_direct"
	if sync {
		variant = "o_direct+fdatasync"
	}
	f, err := createDirect(dir, "physical-direct-*")
	if err != nil {
		return nil, err
	}
	defer removeFile(f, &err)
	buf, free, err := alignedBuffer(size)
	if err != nil {
		return nil, err
	}
	defer free()
	fill(buf)

	limit := int64(max(fileLimit/size, 1) * size)
	m := startMeter()
	var off int64
	n, err := m.loop(ctx, time.Now().Add(d), func() error {
		if off+int64(size) > limit {
			off = 0
			m.note(fmt.Sprintf("the file reached %d bytes, and writes went on from its start", limit))
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			return err
		}
		off += int64(size)
		if sync {
			return vfs.Datasync(f)
		}
		return nil
	})
	if err != nil {
		return nil, measureError(variant, err)
	}
	spec := loadgen.Spec{Kind: loadgen.KindAppend, EntryBytes: size, Batch: 1, Producers: 1, Logs: 1, Duration: d}
	return m.result("disk", variant, spec, n, size), nil
}

// DiskRead measures a cold sequential read, as a reader catching up from
// the start of a log does when the log is not in memory: it writes total
// bytes (rounded up to whole writes) with O_DIRECT, untimed, then reads
// them back in order in blocks of size with O_DIRECT, timing each read
// (Variant "o_direct read"). size must be a multiple of 4096. Extra
// "write_s" is how long the untimed write took.
func DiskRead(ctx context.Context, dir string, size int, total int64) (_ *loadgen.Result, err error) {
	if err := checkDirectSize(size); err != nil {
		return nil, err
	}
	if total <= 0 {
		return nil, fmt.Errorf("physical: read total %d: want a positive number of bytes", total)
	}
	const variant = "o_direct read"
	chunk := max(size, (1<<20)/size*size) // write in at least 1 MiB
	total = (total + int64(chunk) - 1) / int64(chunk) * int64(chunk)

	f, err := createDirect(dir, "physical-read-*")
	if err != nil {
		return nil, err
	}
	defer removeFile(f, &err)
	buf, free, err := alignedBuffer(chunk)
	if err != nil {
		return nil, err
	}
	defer free()
	fill(buf)
	t0 := time.Now()
	for off := int64(0); off < total; off += int64(chunk) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			return nil, measureError(variant, err)
		}
	}
	if err := vfs.Datasync(f); err != nil {
		return nil, measureError(variant, err)
	}
	writeSeconds := time.Since(t0).Seconds()

	r, err := openDirect(f.Name(), os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	block := buf[:size]
	m := startMeter()
	var n int64
	for off := int64(0); off < total; off += int64(size) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if _, err := r.ReadAt(block, off); err != nil {
			return nil, measureError(variant, err)
		}
		m.hist.Record(time.Since(t0))
		n++
	}
	spec := loadgen.Spec{Kind: loadgen.KindCatchUp, EntryBytes: size, Batch: 1, Producers: 1, Logs: 1, TotalBytes: total}
	res := m.result("disk", variant, spec, n, size)
	res.SetExtra("write_s", writeSeconds)
	return res, nil
}

func checkDirectSize(size int) error {
	if size <= 0 || size%blockBytes != 0 {
		return fmt.Errorf("physical: O_DIRECT size %d: want a positive multiple of %d", size, blockBytes)
	}
	return nil
}

// createDirect creates a new file in dir and opens it for O_DIRECT writes.
func createDirect(dir, pattern string) (*os.File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, fmt.Errorf("physical: %w", err)
	}
	f.Close()
	d, err := openDirect(f.Name(), os.O_RDWR)
	if err != nil {
		os.Remove(f.Name())
		return nil, err
	}
	return d, nil
}

// writeZeros writes n zero bytes at the start of f and syncs them.
func writeZeros(ctx context.Context, f *os.File, n int64) error {
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < n; off += int64(len(zeros)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), n-off)], off); err != nil {
			return fmt.Errorf("physical: preallocate: %w", err)
		}
	}
	if err := vfs.Datasync(f); err != nil {
		return fmt.Errorf("physical: preallocate: %w", err)
	}
	return nil
}

// removeFile closes and removes f, adding a failure to *err: a file left
// behind in a person's directory is worth an error.
func removeFile(f *os.File, err *error) {
	*err = errors.Join(*err, f.Close(), os.Remove(f.Name()))
}

// measureError adds what was being measured to err, unless the measurement
// was cancelled.
func measureError(variant string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("physical: %s: %w", variant, err)
}
