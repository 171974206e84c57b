//go:build test

package milvus

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ternwal/tern/client"
)

// disturbance is a goroutine that does something to the servers once a log
// has grown, while a run goes on.
type disturbance struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // once done is closed
	what   string
}

// disturbAt watches, through a thin client of addrs, the logs whose name
// contains part, and each time one of them has reached the next of at (in
// increasing order), runs do with its name, in a goroutine. The caller ends
// the run and then calls finish, which waits for do and fails the test if
// do failed or did not run at every point: a run that ended before its
// disturbances proved nothing.
func disturbAt(t *testing.T, addrs []string, part, what string, do func(name string) error, at ...client.Offset) *disturbance {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	c, err := client.Open(ctx, client.Options{Server: addrs[0], Nodes: addrs[1:]})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	d := &disturbance{cancel: cancel, done: make(chan struct{}), what: what}
	// A test that ends early does not leave the goroutine logging after it.
	t.Cleanup(func() {
		d.cancel()
		<-d.done
	})
	go func() {
		defer close(d.done)
		defer c.Close()
		for _, n := range at {
			name, err := waitLogEnd(ctx, c, part, n)
			if err != nil {
				d.err = fmt.Errorf("no log named *%s* reached %d entries before the run ended (%w)", part, n, err)
				return
			}
			start := time.Now()
			if d.err = do(name); d.err != nil {
				// Now, not at finish: the run may not end without the servers.
				t.Errorf("%s: %v", what, d.err)
				return
			}
			t.Logf("%s, once %s had %d entries: done in %v", what, name, n, time.Since(start).Round(time.Millisecond))
		}
	}()
	return d
}

// finish waits for the disturbance and fails the test if it failed or did
// not happen.
func (d *disturbance) finish(t *testing.T) {
	t.Helper()
	select {
	case <-d.done:
	default:
		// The run is over: a disturbance that is still waiting for its log to
		// grow will not see it grow.
		d.cancel()
		<-d.done
	}
	d.cancel()
	if d.err != nil {
		t.Fatalf("%s: %v", d.what, d.err)
	}
}

// waitLogEnd polls the logs whose name contains part until one has its end
// at n or past, and returns that one's name.
func waitLogEnd(ctx context.Context, c *client.Client, part string, n client.Offset) (string, error) {
	logs := map[string]*client.Log{}
	for {
		// A cluster node lists the logs it does not serve without their
		// extent: describe each on its owner.
		infos, err := c.ListLogs(ctx, "")
		if err == nil {
			for _, info := range infos {
				if !strings.Contains(info.Name, part) || logs[info.Name] != nil {
					continue
				}
				if l, err := c.OpenLog(ctx, info.Name); err == nil {
					logs[info.Name] = l
				}
			}
		}
		for name, l := range logs {
			if info, err := l.Info(ctx); err == nil && info.End >= n {
				return name, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// restartDuring is a disturbance that stops s with SIGTERM and starts it
// again on the same address and data.
func restartDuring(s *ternServer) func(name string) error {
	return func(string) error {
		if err := s.stop(); err != nil {
			return err
		}
		return s.restart()
	}
}

// killOwnerDuring is a disturbance that kills -9 the node that serves the
// log, waits until another node serves it, and starts the killed node
// again, as its supervisor would.
func killOwnerDuring(t *testing.T, c *ternCluster) func(name string) error {
	return func(name string) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		owner, err := c.owner(ctx, name)
		if err != nil {
			return err
		}
		if owner == nil {
			return fmt.Errorf("no node serves %s while it is appended to", name)
		}
		killed := time.Now()
		if err := owner.kill9(); err != nil {
			return err
		}
		for {
			now, err := c.owner(ctx, name)
			if err != nil {
				return err
			}
			if now != nil && now != owner {
				t.Logf("killed %s, the owner of %s, with -9; %s took it over %v later", owner.name, name, now.name, time.Since(killed).Round(time.Millisecond))
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("no node took %s over after the kill -9 of %s: %w", name, owner.name, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
		return owner.restart()
	}
}
