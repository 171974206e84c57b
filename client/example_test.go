package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/ternwal/tern/client"
)

// A program that talks to a tern serve on this machine. (It needs the
// server, so go test compiles it without running it; the main module's
// test/e2e runs the same calls against a real tern serve.)
func Example() {
	ctx := context.Background()
	c, err := client.Open(ctx, client.Options{Server: "127.0.0.1:7070"})
	if err != nil {
		log.Fatal(err) // says whether the server could not be reached
	}
	defer c.Close()

	l, err := c.CreateLog(ctx, "tenant/db/channel-1", client.LogOptions{})
	if errors.Is(err, client.ErrExist) {
		l, err = c.OpenLog(ctx, "tenant/db/channel-1")
	}
	if err != nil {
		log.Fatal(err)
	}
	w, err := l.OpenWriter(ctx) // fences any older writer of the log
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	off, err := w.Append(ctx, client.Entry{Payload: []byte("hello")}) // durable when it returns
	if err != nil {
		log.Fatal(err)
	}

	r, err := l.OpenReader(ctx, off, client.WithTicks())
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	e, err := r.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d: %s\n", e.Offset, e.Payload)
}
