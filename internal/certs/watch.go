package certs

import (
	"context"
	"os"
	"time"
)

// stamp is what a file looks like from outside: a change of any field is
// taken as a change of the file. A file that cannot be stat'ed has the zero
// stamp, so its return is a change too.
type stamp struct {
	mtime int64 // nanoseconds since the epoch
	size  int64
	inode uint64
}

func stampOf(path string) stamp {
	if path == "" {
		return stamp{}
	}
	fi, err := os.Stat(path) // follows links: a swapped link target is a change
	if err != nil {
		return stamp{}
	}
	return stamp{mtime: fi.ModTime().UnixNano(), size: fi.Size(), inode: inode(fi)}
}

func (s *Store) stamps() [3]stamp {
	return [3]stamp{stampOf(s.files.Cert), stampOf(s.files.Key), stampOf(s.files.ClientCA)}
}

// Watch polls the files every `every` (their modification time, size and
// inode) and reloads the Store when one of them changed since the last load,
// calling report(nil) after a successful reload and report(err) after a
// failed one (report may be nil). A failed reload is reported once and
// tried again when a file changes again; meanwhile the Store keeps the
// material it had. Certificate and key written one after the other may
// be seen half-way, the new certificate with the old key: that reload fails
// and the next poll, seeing the new key, succeeds. Watch returns when ctx
// ends; it runs report on its own goroutine.
func (s *Store) Watch(ctx context.Context, every time.Duration, report func(err error)) {
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := s.reloadIfChanged()
		if changed && report != nil {
			report(err)
		}
	}
}

// reloadIfChanged reloads when a file changed since the last load, and says
// whether it did.
func (s *Store) reloadIfChanged() (bool, error) {
	s.reload.Lock()
	defer s.reload.Unlock()
	if s.stamps() == s.seen {
		return false, nil
	}
	return true, s.reloadLocked()
}
