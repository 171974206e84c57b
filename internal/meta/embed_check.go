package meta

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/server/v3/embed"
)

// ErrEtcdDamaged is wrapped by the error of a start of the embedded etcd on
// data it cannot use: a database that bbolt cannot open or whose check
// fails, or a WAL that etcd cannot read or repair.
var ErrEtcdDamaged = errors.New("meta: the embedded etcd's data is damaged")

const (
	// fullCheckBytes is the largest database whose every page is checked
	// before etcd starts on it; a larger one is only opened, which checks
	// its meta pages, as the check of a large file takes seconds.
	fullCheckBytes = 256 << 20
	// slowStart is how long a start of etcd takes before it is logged as
	// slow, and slowStartEvery how often it is logged again.
	slowStart      = 3 * time.Second
	slowStartEvery = 10 * time.Second
)

// dbPath is the path of etcd's bbolt database under its data directory.
func dbPath(dir string) string { return filepath.Join(dir, "member", "snap", "db") }

// damagedAdvice says what to do about damaged etcd data in dir.
func damagedAdvice(dir string) string {
	return fmt.Sprintf("restore %s from a backup (or an etcd snapshot: etcdutl snapshot restore), "+
		"or move it aside to start with empty metadata, which forgets every log of this data directory", dir)
}

// checkEtcdDir checks, before etcd starts on dir, that its database can be
// read and passes bbolt's check: etcd panics on a database it cannot open,
// and a damaged page can crash it later, in a goroutine of its own.
func checkEtcdDir(dir string) (err error) {
	path := dbPath(dir)
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // a new member
	case err != nil:
		return fmt.Errorf("meta: start etcd: %w: check that this user may read and write %s", err, dir)
	case !info.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a file: %s", ErrEtcdDamaged, path, damagedAdvice(dir))
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("meta: start etcd: cannot open etcd's database: %w: check that this user may read and write %s", err, dir)
	}
	f.Close()
	defer func() {
		if p := recover(); p != nil { // bbolt panics on some damage
			err = fmt.Errorf("%w: its database %s: %v: %s", ErrEtcdDamaged, path, p, damagedAdvice(dir))
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("%w: its database %s cannot be opened: %v: %s", ErrEtcdDamaged, path, err, damagedAdvice(dir))
	}
	defer db.Close()
	if info.Size() > fullCheckBytes {
		return nil
	}
	err = db.View(func(tx *bolt.Tx) error {
		var errs []error
		for e := range tx.Check() {
			errs = append(errs, e)
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return fmt.Errorf("%w: its database %s fails its check: %v: %s", ErrEtcdDamaged, path, err, damagedAdvice(dir))
	}
	return nil
}

// startEmbed is embed.StartEtcd with etcd's fatal errors, which cfg's
// logger turns into panics (etcdConfig), returned as errors, and with the
// errors of etcd's bootstrap on its data (a WAL it cannot read) marked as
// ErrEtcdDamaged. etcd logs both first, with their causes, which last
// keeps.
func startEmbed(dir string, cfg *embed.Config, last *lastFatal) (e *embed.Etcd, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: etcd stopped on its data in %s: %v%s: %s", ErrEtcdDamaged, dir, p, last.get(), damagedAdvice(dir))
		}
	}()
	e, err = embed.StartEtcd(cfg)
	if err != nil && last.get() != "" {
		return nil, fmt.Errorf("%w: etcd cannot start on its data in %s: %v: %s", ErrEtcdDamaged, dir, err, damagedAdvice(dir))
	}
	return e, err
}

// lastFatal keeps the fields of the last entry etcd logged at a fatal or
// panic level, or as "bootstrap failed": the failures of a start on its
// data, not on its ports.
type lastFatal struct {
	mu  sync.Mutex
	msg string
}

func (l *lastFatal) set(msg string) {
	l.mu.Lock()
	l.msg = msg
	l.mu.Unlock()
}

// get returns the fields as " (k=v ...)", or "" if none was logged.
func (l *lastFatal) get() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.msg == "" {
		return ""
	}
	return " (" + l.msg + ")"
}

// logSlowStart logs, while the start of etcd in dir lasts longer than
// slowStart, that it is still starting; the function it returns ends that.
func logSlowStart(dir string, logger *slog.Logger) (stop func()) {
	done := make(chan struct{})
	t0 := time.Now()
	go func() {
		wait := slowStart
		for {
			select {
			case <-done:
				return
			case <-time.After(wait):
			}
			logger.Warn("meta: etcd is still starting (repairing its WAL?)", "dir", dir, "waited", time.Since(t0).Round(time.Second))
			wait = slowStartEvery
		}
	}()
	return func() { close(done) }
}
