package tern_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ternwal/tern"
)

// The README's Go example: the lines between the README markers are the
// README's, as TestREADMEExample checks.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "tern-example-")
	check(err)
	defer os.RemoveAll(dir)

	// README begins
	c, err := tern.Open(ctx, tern.Options{Dir: dir}) // or tern.Options{Server: "127.0.0.1:7070"}: same API
	check(err)
	defer c.Close()

	l, err := c.CreateLog(ctx, "tenant/db/channel-1", tern.LogOptions{
		RetentionAge: 72 * time.Hour, // and/or RetentionBytes, RetentionEntries
	})
	check(err)
	w, err := l.OpenWriter(ctx) // a new writer session: fences any older one (tern.WithEpoch(n) to choose it)
	check(err)
	defer w.Close() // rides through server restarts and fail-over meanwhile

	off, err := w.Append(ctx, tern.Entry{Payload: []byte("hello")}) // durable when it returns
	check(err)
	first, err := w.AppendBatch(ctx, []tern.Entry{{Payload: []byte("a")}, {Payload: []byte("b")}}) // atomic
	check(err)
	p := w.AppendAsync(tern.Entry{Payload: []byte("c")}) // pipelined
	last, err := p.Wait(ctx)
	check(err)
	check(w.AppendTimeTick(ctx, 42)) // an ordered marker for open readers, never written
	fmt.Println("appended at", off, first, last)
	_, err = l.Append(ctx, tern.Entry{Payload: []byte("d")}) // a shared producer: fails while w is open
	fmt.Println(errors.Is(err, tern.ErrFenced))

	r, err := l.OpenReader(ctx, 0, tern.WithTicks())
	check(err)
	defer r.Close()
	e, err := r.Next(ctx) // waits at the tail until ctx ends; e.IsTick for ticks
	check(err)
	es, err := r.NextBatch(ctx, 1000) // fast catch-up
	check(err)
	fmt.Printf("read %s, then %d more\n", e.Payload, len(es))

	_, err = c.OpenLog(ctx, "no/such/log")
	fmt.Println(errors.Is(err, tern.ErrNotFound)) // the same sentinels for a server's logs

	_, err = l.CreateSubscription(ctx, "indexer", tern.SubOptions{Pin: true})
	check(err)
	s, err := l.Subscribe(ctx, "indexer") // from the durable cursor, at least once
	check(err)
	e, err = s.Next(ctx)
	check(err)
	check(s.Ack(e.Offset)) // committed in batches; Close commits
	check(s.Close())

	check(l.Truncate(ctx, 1)) // reads below it fail with ErrTruncated
	_, err = l.OpenReader(ctx, 0)
	fmt.Println(errors.Is(err, tern.ErrTruncated))
	// README ends

	// Output:
	// appended at 0 1 3
	// true
	// read hello, then 3 more
	// true
	// true
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// The README's Go example is Example's, line for line, so that it compiles
// and runs as the README shows it.
func TestREADMEExample(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(src), "// README begins\n")
	body, _, ok := strings.Cut(after, "\t// README ends")
	if !ok {
		t.Fatal("example_test.go has no README markers")
	}
	var want strings.Builder
	want.WriteString("```go\nimport \"github.com/ternwal/tern\"\n\n")
	for _, line := range strings.SplitAfter(strings.TrimRight(body, "\n"), "\n") {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	want.WriteString("\n```\n")
	if !strings.Contains(string(readme), want.String()) {
		t.Fatalf("README.md's Go example differs from Example's; it should read:\n%s", want.String())
	}
}
