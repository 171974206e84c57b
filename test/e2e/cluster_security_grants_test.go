package e2e

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ternwal/tern"
)

// clusterCall is one call of the API on the log a/x (or, for those that
// make or delete a log, on a/new-<principal> and a/del-<principal>), made
// by a client of a node: the calls on a log open it first (DescribeLog,
// which any permission on the log allows).
type clusterCall struct {
	name string
	perm string // the permission it needs on a/
	call func(ctx context.Context, c *tern.Client, principal string) error
}

func clusterCalls() []clusterCall {
	open := func(ctx context.Context, c *tern.Client) (*tern.Log, error) { return c.OpenLog(ctx, "a/x") }
	onLog := func(f func(ctx context.Context, l *tern.Log, p string) error) func(ctx context.Context, c *tern.Client, p string) error {
		return func(ctx context.Context, c *tern.Client, p string) error {
			l, err := open(ctx, c)
			if err != nil {
				return err
			}
			return f(ctx, l, p)
		}
	}
	return []clusterCall{
		{"CreateLog", "admin", func(ctx context.Context, c *tern.Client, p string) error {
			_, err := c.CreateLog(ctx, "a/new-"+p, tern.LogOptions{Mode: tern.ModeQuorum})
			return err
		}},
		{"DeleteLog", "admin", func(ctx context.Context, c *tern.Client, p string) error {
			return c.DeleteLog(ctx, "a/del-"+p)
		}},
		{"DescribeLog", "read", func(ctx context.Context, c *tern.Client, _ string) error {
			_, err := open(ctx, c)
			return err
		}},
		{"TruncateLog", "admin", onLog(func(ctx context.Context, l *tern.Log, _ string) error {
			return l.Truncate(ctx, 0)
		})},
		{"Append", "append", onLog(func(ctx context.Context, l *tern.Log, p string) error {
			w, err := l.OpenWriter(ctx)
			if err != nil {
				return err
			}
			defer w.Close()
			_, err = w.Append(ctx, tern.Entry{Payload: []byte("by " + p)})
			return err
		})},
		{"Read", "read", onLog(func(ctx context.Context, l *tern.Log, _ string) error {
			r, err := l.OpenReader(ctx, 0)
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = r.Next(ctx)
			return err
		})},
		{"CreateSubscription", "subscribe", onLog(func(ctx context.Context, l *tern.Log, p string) error {
			_, err := l.CreateSubscription(ctx, "s-"+p, tern.SubOptions{})
			return err
		})},
		{"Subscribe", "subscribe", onLog(func(ctx context.Context, l *tern.Log, _ string) error {
			s, err := l.Subscribe(ctx, "s")
			if err != nil {
				return err
			}
			defer s.Close()
			e, err := s.Next(ctx)
			if err == nil {
				err = s.Ack(e.Offset)
			}
			return err
		})},
	}
}

// The grants of the auth file hold in a cluster with mTLS between the
// nodes, for calls made through a node that does not serve the log: the
// client follows the redirect to the owner with its token, and the owner
// allows or denies each call as the principal's grants on a/ say. ListLogs
// shows each principal only what it may read.
func TestClusterSecurityGrants(t *testing.T) {
	sc := startSecureCluster(t)
	ctx := deadline(t)
	ops := sc.client(t, "n0", "ops", nil)
	x, err := ops.CreateLog(ctx, "a/x", tern.LogOptions{Mode: tern.ModeQuorum})
	if err != nil {
		t.Fatal(err)
	}
	w, err := x.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, tern.Entry{Payload: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := x.CreateSubscription(ctx, "s", tern.SubOptions{}); err != nil {
		t.Fatal(err)
	}
	info, err := x.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner := sc.ownerOf(t, info.ID)
	via := sc.other(owner)

	grants := map[string][]string{
		"ops":    {"read", "append", "subscribe", "admin"},
		"reader": {"read"},
		"writer": {"append"},
		"subber": {"read", "subscribe"},
	}
	for _, p := range []string{"reader", "writer", "subber", "ops"} {
		if _, err := ops.CreateLog(ctx, "a/del-"+p, tern.LogOptions{Mode: tern.ModeQuorum}); err != nil {
			t.Fatal(err)
		}
		c := sc.client(t, via, p, nil)
		for _, call := range clusterCalls() {
			cctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			err := call.call(cctx, c, p)
			cancel()
			allowed := slices.Contains(grants[p], call.perm) || call.name == "DescribeLog" && len(grants[p]) > 0
			switch {
			case allowed && err != nil:
				t.Errorf("%s %s through %s (the owner is %s): %v, want it allowed", p, call.name, via, owner, err)
			case !allowed && !errors.Is(err, tern.ErrPermissionDenied):
				t.Errorf("%s %s through %s (the owner is %s): %v, want %v", p, call.name, via, owner, err, tern.ErrPermissionDenied)
			}
		}

		logs, err := c.ListLogs(ctx, "")
		if err != nil {
			t.Fatalf("%s ListLogs: %v", p, err)
		}
		var names []string
		for _, l := range logs {
			names = append(names, l.Name)
		}
		wantSee := slices.Contains(grants[p], "read")
		if got := slices.Contains(names, "a/x"); got != wantSee {
			t.Errorf("%s ListLogs: %v; want a/x listed: %v", p, names, wantSee)
		}
	}

	// Without a token, or with one of no principal: UNAUTHENTICATED, from
	// the node that does not serve the log as from the owner.
	for _, id := range []string{via, owner} {
		for _, tok := range []string{"", "not-a-token-of-any-principal-0123456789"} {
			c, err := tern.Open(ctx, tern.Options{Server: sc.nodes[id].addr, TLS: sc.clientTLS(), Token: tok})
			if err == nil {
				_, err = c.OpenLog(ctx, "a/x")
				c.Close()
			}
			if !errors.Is(err, tern.ErrUnauthenticated) {
				t.Errorf("OpenLog through %s with the token %q: %v, want %v", id, tok, err, tern.ErrUnauthenticated)
			}
		}
	}
	checkLogs(t, sc.nodes, tlsErrors...)
}
