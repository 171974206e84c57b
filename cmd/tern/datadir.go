package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/server"
	"github.com/ternwal/tern/internal/vfs"
)

// One data directory, two ways in
//
// A directory made by the CLI (or an embedded program) keeps its metadata in
// its bbolt file, meta.db; tern serve moves that into its etcd on its first
// start (tern.Options.MoveMetadata) and marks the directory (meta.etcd).
// The CLI opens a marked directory whose server is stopped by starting the
// directory's embedded etcd itself, for the command's time, as tern serve
// would; while a server has the directory, it says which one and to use
// --server.

// etcdMark and the form of its content are those tern.Open writes.
const etcdMark = "meta.etcd"

// openDir opens the data directory a.dir in this process.
func (a *app) openDir(ctx context.Context, opts tern.Options) (*tern.Client, error) {
	mark, err := os.ReadFile(filepath.Join(a.dir, etcdMark))
	if errors.Is(err, os.ErrNotExist) {
		c, err := tern.Open(ctx, opts)
		return c, a.lockedErr(err)
	}
	if err != nil {
		return nil, err
	}
	// A served directory: its server must be stopped, and its etcd the
	// embedded one under the directory.
	lock, err := vfs.OS.Lock(filepath.Join(a.dir, "LOCK"))
	if err != nil {
		return nil, a.lockedErr(err)
	}
	lock.Close()
	root := markRoot(string(mark))
	etcdDir := filepath.Join(a.dir, "etcd")
	if _, err := os.Stat(filepath.Join(etcdDir, "member")); err != nil {
		return nil, fmt.Errorf("the metadata of data directory %s is not in it: %s; start its tern serve and use --server ADDR (or $TERN_SERVER)",
			a.dir, strings.TrimSpace(string(mark)))
	}
	etcd, err := meta.StartEtcd(ctx, etcdDir, opts.Logger)
	if err != nil {
		return nil, a.lockedErr(fmt.Errorf("start the embedded etcd of data directory %s: %w", a.dir, err))
	}
	opts.Etcd, opts.EtcdRoot = etcd.Endpoints(), root
	c, err := tern.Open(ctx, opts)
	if err != nil {
		etcd.Close()
		return nil, a.lockedErr(err)
	}
	a.atExit = append(a.atExit, func() { etcd.Close() })
	return c, nil
}

// markRoot is the etcd root named by the content of a meta.etcd mark
// (`... at ENDPOINTS, root "/tern/"`), or "" for the default.
func markRoot(mark string) string {
	i := strings.LastIndex(mark, `, root "`)
	if i < 0 {
		return ""
	}
	root, err := strconv.Unquote(strings.TrimSpace(mark[i+len(", root "):]))
	if err != nil {
		return ""
	}
	return root
}

// lockedErr says, for an error that the directory is locked, which tern
// serve has it and how to reach that server instead.
func (a *app) lockedErr(err error) error {
	if err == nil || (!errors.Is(err, tern.ErrLocked) && !errors.Is(err, vfs.ErrLocked) && !errors.Is(err, meta.ErrLocked)) {
		return err
	}
	info, ok := server.ReadServeFile(a.dir)
	if !ok || syscall.Kill(info.PID, 0) != nil {
		return err // no server's file, or a killed server's: another process has it
	}
	hint := ""
	if info.TLS {
		hint = " with --tls-ca FILE (or $TERN_TLS_CA) for its certificate"
	}
	return fmt.Errorf("data directory %s is in use by tern serve (pid %d) at %s: work on its logs through it, with --server %s (or export TERN_SERVER=%s)%s, or stop it first",
		a.dir, info.PID, info.Addr, info.Addr, info.Addr, hint)
}

// quietLogger is the logger of a data directory opened by a command: only
// warnings and errors, on stderr.
func (a *app) quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
