package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// clientProgram is a program of a module of its own that needs only the
// client module: what a database that talks to tern serve writes.
const clientProgram = `package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ternwal/tern/client"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "walapp:", err)
		os.Exit(1)
	}
}

func run(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Open(ctx, client.Options{Server: addr})
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := c.CreateLog(ctx, "app/channel-1", client.LogOptions{})
	if err != nil {
		return err
	}
	if _, err := l.CreateSubscription(ctx, "indexer", client.SubOptions{}); err != nil {
		return err
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		return err
	}
	for _, p := range []string{"a", "b", "c"} {
		off, err := w.Append(ctx, client.Entry{Payload: []byte(p)})
		if err != nil {
			return err
		}
		fmt.Printf("ack %d %s\n", off, p)
	}
	if _, err := w.Append(ctx, client.Entry{Payload: make([]byte, 9<<20)}); !errors.Is(err, client.ErrTooLarge) {
		return fmt.Errorf("an entry over the limit was not refused with ErrTooLarge: %v", err)
	}
	r, err := l.OpenReader(ctx, 1)
	if err != nil {
		return err
	}
	defer r.Close()
	es, err := r.NextBatch(ctx, 10)
	if err != nil {
		return err
	}
	for len(es) < 2 {
		more, err := r.NextBatch(ctx, 10)
		if err != nil {
			return err
		}
		es = append(es, more...)
	}
	for _, e := range es {
		fmt.Printf("read %d %s\n", e.Offset, e.Payload)
	}
	s, err := l.Subscribe(ctx, "indexer")
	if err != nil {
		return err
	}
	e, err := s.Next(ctx)
	if err != nil {
		return err
	}
	if err := s.Ack(e.Offset); err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	fmt.Printf("sub %d %s\n", e.Offset, e.Payload)
	if _, err := l.OpenReader(ctx, 99); !errors.Is(err, client.ErrOutOfRange) {
		return fmt.Errorf("a read past the end was not refused with ErrOutOfRange: %v", err)
	}
	return nil
}
`

// A program in a fresh module that requires only the client module, with a
// go directive of 1.24, builds, links nothing of the server's (no etcd, no
// bbolt, no minio), and appends, reads and subscribes against a real tern
// serve.
func TestClientModuleAlone(t *testing.T) {
	clientDir, err := filepath.Abs("../../client")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(clientDir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/walapp\n\ngo 1.24\n\nrequire github.com/ternwal/tern/client v0.0.0\n\nreplace github.com/ternwal/tern/client => " + clientDir + "\n"
	for name, body := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(clientProgram)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// No newer toolchain is fetched: tidy would have to raise the go
		// directive for a requirement that needs a newer Go.
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	goCmd("mod", "tidy")
	deps := goCmd("list", "-deps", ".")
	for _, dep := range strings.Fields(deps) {
		for _, banned := range []string{"go.etcd.io/", "bbolt", "minio"} {
			if strings.Contains(dep, banned) {
				t.Errorf("a program of the client module alone links %s", dep)
			}
		}
	}
	if !strings.Contains(deps, "github.com/ternwal/tern/client\n") {
		t.Fatalf("go list -deps does not name the client module:\n%s", deps)
	}
	if got := goCmd("mod", "edit", "-json"); !strings.Contains(got, `"Go": "1.24"`) {
		t.Fatalf("the program's go.mod is no longer at go 1.24:\n%s", got)
	}
	bin := filepath.Join(dir, "walapp")
	goCmd("build", "-o", bin, ".")

	s := startServer(t, t.TempDir())
	out, err := exec.Command(bin, s.addr).CombinedOutput()
	if err != nil {
		t.Fatalf("walapp: %v\n%s", err, out)
	}
	want := "ack 0 a\nack 1 b\nack 2 c\nread 1 b\nread 2 c\nsub 0 a\n"
	if string(out) != want {
		t.Fatalf("walapp printed\n%s\nwant\n%s", out, want)
	}
}
