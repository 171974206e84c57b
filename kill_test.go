package tern

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const killChildEnv = "TERN_TEST_KILL_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir)
		return
	}
	os.Exit(m.Run())
}

// killChild is the child half of TestKill9: it appends from several
// goroutines and prints "offset payload" for every acknowledged entry, after
// the acknowledgement, until it is killed.
func killChild(dir string) {
	ctx := context.Background()
	c, err := Open(ctx, Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	l, err := c.OpenLog(ctx, "kill")
	if err != nil {
		log.Fatal(err)
	}
	w, err := l.OpenWriter(ctx)
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				p := fmt.Sprintf("g%d-%d", g, i)
				var off Offset
				var err error
				if i%3 == 0 {
					off, err = w.AppendBatch(ctx, []Entry{{Payload: []byte(p + "a")}, {Payload: []byte(p + "b")}})
				} else {
					off, err = w.Append(ctx, Entry{Payload: []byte(p)})
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(3)
				}
				mu.Lock()
				if i%3 == 0 {
					fmt.Fprintf(out, "%d %sa\n%d %sb\n", off, p, off+1, p)
				} else {
					fmt.Fprintf(out, "%d %s\n", off, p)
				}
				out.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestKill9 kills a process that is appending concurrently with SIGKILL,
// several times over the same log, and checks that every entry it reported
// acknowledged is there afterwards.
func TestKill9(t *testing.T) {
	dir := t.TempDir()
	c := openClient(t, dir)
	if _, err := c.CreateLog(t.Context(), "kill", LogOptions{SegmentBytes: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	c.Close()

	acked := map[Offset]string{}
	for round := range 3 {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		lines := 0
		for lines < 3000 && sc.Scan() {
			off, p, ok := strings.Cut(sc.Text(), " ")
			n, err := strconv.ParseUint(off, 10, 64)
			if !ok || err != nil {
				break // a line cut by the kill, or a test framework line
			}
			acked[Offset(n)] = p
			lines++
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if lines < 3000 {
			t.Fatalf("round %d: the child reported only %d acknowledgements before it stopped", round, lines)
		}
	}

	c = openClient(t, dir)
	l, err := c.OpenLog(t.Context(), "kill")
	if err != nil {
		t.Fatal(err)
	}
	got := map[Offset]string{}
	for _, e := range readAll(t, l, 0) {
		got[e.Offset] = string(e.Payload)
	}
	for off, p := range acked {
		if got[off] != p {
			t.Fatalf("acknowledged offset %d: read %q, want %q", off, got[off], p)
		}
	}
	t.Logf("%d acknowledged entries over 3 kills, %d entries in the log", len(acked), len(got))
}
