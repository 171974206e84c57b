package objlog

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/objlog/objlogtest"
)

// TestSlowPutHoldsNoSlots holds the first fragment's PUT: small fragments
// after it keep being uploaded, past UploadsInFlight, and are acknowledged
// in order once it ends; full fragments stop at UploadsInFlight, which
// bounds the memory they hold.
func TestSlowPutHoldsNoSlots(t *testing.T) {
	for _, c := range []struct {
		name       string
		flushBytes int
		entry      string
		stored     int  // fragments stored while the first is held
		waits      bool // and one more append waits for a slot
	}{
		{"small fragments", 1 << 20, "small", 6, false},
		{"full fragments", 8, "an entry longer than FlushBytes", 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			release := make(chan struct{})
			f := blob.NewFaulty(blob.NewMem(), nil)
			e := newEnv(t, f)
			l := e.open(Options{FlushBytes: c.flushBytes, MaxInFlight: 2})
			defer l.Close()
			epoch := e.Writer(l)
			held := make(chan struct{}, 1)
			f.SetDecide(func(op blob.Op, key string) blob.Fault {
				if op == "put" && strings.HasSuffix(key, "/00000000") {
					held <- struct{}{}
					<-release
				}
				return blob.Fault{}
			})
			defer func() {
				select {
				case <-release:
				default:
					close(release)
				}
			}()
			var ps []engine.Pending
			stored := func() int {
				infos, _ := e.Bucket.List(context.Background(), "7/")
				return len(infos)
			}
			// One append at a time, each one after the previous fragment
			// was stored.
			p, err := l.Append(epoch, objlogtest.Entry(c.entry), engine.AppendOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
			<-held // the first fragment is cut, alone
			for i := range c.stored {
				p, err := l.Append(epoch, objlogtest.Entry(c.entry), engine.AppendOptions{})
				if err != nil {
					t.Fatal(err)
				}
				ps = append(ps, p)
				for deadline := time.Now().Add(10 * time.Second); stored() < i+1; time.Sleep(2 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("%d fragments stored while the first PUT is held; want %d", stored(), i+1)
					}
				}
			}
			if c.waits {
				// One more waits for a slot: nothing more is stored.
				p, err := l.Append(epoch, objlogtest.Entry(c.entry), engine.AppendOptions{})
				if err != nil {
					t.Fatal(err)
				}
				ps = append(ps, p)
				time.Sleep(50 * time.Millisecond)
				if n := stored(); n != c.stored {
					t.Fatalf("%d fragments stored while the first PUT is held; want %d", n, c.stored)
				}
			}
			for _, p := range ps {
				select {
				case <-p.Done():
					t.Fatal("an append was acknowledged before the first")
				default:
				}
			}
			close(release)
			for i, p := range ps {
				if off, err := p.Wait(context.Background()); err != nil || off != uint64(i) {
					t.Fatalf("append %d: at %d, %v", i, off, err)
				}
			}
		})
	}
}
