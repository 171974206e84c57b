package quorum

import (
	"errors"
	"fmt"
	"testing"
)

// configs are the ensembles the exhaustive tests cover.
var configs = []Config{
	{1, 1}, {2, 1}, {2, 2}, {3, 1}, {3, 2}, {3, 3}, {4, 2}, {4, 3}, {5, 3}, {5, 4},
}

// entries is how many offsets each exhaustive case writes, from base.
const (
	entries = 3
	base    = 100
)

// vectors calls f with every vector of n values in [lo[i], hi] (lo nil: 0).
func vectors(n int, lo []uint64, hi uint64, f func([]uint64)) {
	v := make([]uint64, n)
	var rec func(i int)
	rec = func(i int) {
		if i == n {
			f(v)
			return
		}
		start := uint64(0)
		if lo != nil {
			start = lo[i]
		}
		for x := start; x <= hi; x++ {
			v[i] = x
			rec(i + 1)
		}
	}
	rec(0)
}

// subsets calls f with every subset of n replicas, as a bit mask.
func subsets(n int, f func(mask int)) {
	for m := 0; m < 1<<n; m++ {
		f(m)
	}
}

func members(mask int) (out []int) {
	for r := 0; mask != 0; r, mask = r+1, mask>>1 {
		if mask&1 != 0 {
			out = append(out, r)
		}
	}
	return out
}

// acked returns the acknowledged end of durable prefixes ends (relative to
// base): what a Tracker fed every end reports.
func acked(t *testing.T, cfg Config, ends []uint64) uint64 {
	t.Helper()
	tr, err := NewTracker(cfg, base)
	if err != nil {
		t.Fatal(err)
	}
	for r, e := range ends {
		if _, err := tr.Ack(r, base+e); err != nil {
			t.Fatal(err)
		}
	}
	return tr.Confirmed()
}

// answers are the responses of the replicas in mask, whose durable ends are
// ends (relative to base).
func answers(mask int, ends []uint64) []Response {
	var as []Response
	for _, r := range members(mask) {
		as = append(as, Response{Replica: r, End: base + ends[r]})
	}
	return as
}

// TestRecoverKeepsEveryAcknowledged checks, for every state of the replicas'
// durable prefixes and every set of replicas a recovery can hear from, that
// the recovered end keeps every acknowledged offset, invents none, and that
// the copies make an ack quorum hold the whole segment.
func TestRecoverKeepsEveryAcknowledged(t *testing.T) {
	cases := 0
	for _, cfg := range configs {
		vectors(cfg.Ensemble, nil, entries, func(ends []uint64) {
			ack := acked(t, cfg, ends)
			subsets(cfg.Ensemble, func(mask int) {
				as := answers(mask, ends)
				rec, err := Recover(cfg, base, as)
				if len(as) < max(cfg.RecoveryQuorum(), cfg.AckQuorum) {
					if !errors.Is(err, ErrTooFew) {
						t.Fatalf("%+v ends %v answers %v: got %+v, %v; want ErrTooFew", cfg, ends, as, rec, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("%+v ends %v answers %v: %v", cfg, ends, as, err)
				}
				cases++
				if rec.End < ack {
					t.Fatalf("%+v ends %v answers %v: recovered end %d is below the acknowledged end %d", cfg, ends, as, rec.End, ack)
				}
				if base+ends[rec.Source] != rec.End || mask&(1<<rec.Source) == 0 {
					t.Fatalf("%+v ends %v answers %v: source %d does not hold [base, %d) or did not answer", cfg, ends, as, rec.Source, rec.End)
				}
				full := 0
				for _, r := range members(mask) {
					if base+ends[r] >= rec.End {
						full++
					}
				}
				for _, c := range rec.Copies {
					if mask&(1<<c.Replica) == 0 || c.End != base+ends[c.Replica] || c.End >= rec.End {
						t.Fatalf("%+v ends %v answers %v: copy %+v is not a short replica that answered", cfg, ends, as, c)
					}
					full++
				}
				if full < cfg.AckQuorum {
					t.Fatalf("%+v ends %v answers %v: after the copies %d replicas hold the segment, want %d", cfg, ends, as, full, cfg.AckQuorum)
				}
			})
		})
	}
	t.Logf("%d recoveries checked", cases)
}

// TestFencedWriterCannotPassRecovery checks the BookKeeper bug class where
// recovery truncates an acknowledged entry: the old writer goes on writing
// to the replicas that are not fenced yet, while recovery reads the fenced
// ones. For every state before the fence, every fenced set a recovery can
// use, and every way the unfenced replicas go on, whatever the old writer
// gets acknowledged stays below the recovered end.
func TestFencedWriterCannotPassRecovery(t *testing.T) {
	cases := 0
	for _, cfg := range configs {
		vectors(cfg.Ensemble, nil, entries, func(before []uint64) {
			before = append([]uint64(nil), before...)
			subsets(cfg.Ensemble, func(fenced int) {
				if len(members(fenced)) < max(cfg.RecoveryQuorum(), cfg.AckQuorum) {
					return
				}
				rec, err := Recover(cfg, base, answers(fenced, before))
				if err != nil {
					t.Fatal(err)
				}
				// The unfenced replicas may take anything more; the
				// fenced ones refuse the old writer.
				lo := append([]uint64(nil), before...)
				vectors(cfg.Ensemble, lo, entries, func(after []uint64) {
					for r := range after {
						if fenced&(1<<r) != 0 && after[r] != before[r] {
							return
						}
					}
					cases++
					if ack := acked(t, cfg, after); ack > rec.End {
						t.Fatalf("%+v before %v fenced %v after %v: the old writer got %d acknowledged, past the recovered end %d",
							cfg, before, members(fenced), after, ack, rec.End)
					}
				})
			})
		})
	}
	t.Logf("%d histories checked", cases)
}

// TestTooFewAnswersCanLose shows that the checks above can fail: ending the
// segment at the acknowledged end that a minority of answers implies (as a
// recovery that trusted the last acknowledged offset the replicas had heard
// of would) truncates an acknowledged entry in some state.
func TestTooFewAnswersCanLose(t *testing.T) {
	cfg := Default
	found := ""
	vectors(cfg.Ensemble, nil, entries, func(ends []uint64) {
		ack := acked(t, cfg, ends)
		subsets(cfg.Ensemble, func(mask int) {
			as := answers(mask, ends)
			if found != "" || len(as) < cfg.RecoveryQuorum() {
				return
			}
			// The naive rule: the k-th largest answer, as if the answers
			// were the whole ensemble's.
			es := make([]uint64, len(as))
			for i, a := range as {
				es[i] = a.End
			}
			if k := min(cfg.AckQuorum, len(es)); kthLargest(es, k) < ack {
				found = fmt.Sprintf("ends %v, answers %v: naive end %d, acknowledged %d", ends, as, kthLargest(es, k), ack)
			}
		})
	})
	if found == "" {
		t.Fatal("the naive rule never lost an acknowledged entry: the exhaustive tests would not notice a broken Recover")
	}
	t.Log(found)
}

// TestTrackerOrders feeds one replica's reports at a time in every order
// of a small history and checks that the acknowledged end is the ack
// quorum's and never goes back.
func TestTrackerOrders(t *testing.T) {
	cfg := Default
	// Each replica reports 1, 2, then 3 entries; every interleaving of the
	// three sequences, as a string of replica numbers.
	var orders []string
	var rec func(s string, left [3]int)
	rec = func(s string, left [3]int) {
		if len(s) == 9 {
			orders = append(orders, s)
			return
		}
		for r := range left {
			if left[r] > 0 {
				l := left
				l[r]--
				rec(s+string(rune('0'+r)), l)
			}
		}
	}
	rec("", [3]int{3, 3, 3})
	for _, o := range orders {
		tr, err := NewTracker(cfg, base)
		if err != nil {
			t.Fatal(err)
		}
		var ends [3]uint64
		last := uint64(base)
		for _, c := range o {
			r := int(c - '0')
			ends[r]++
			got, err := tr.Ack(r, base+ends[r])
			if err != nil {
				t.Fatal(err)
			}
			if want := base + kthLargest(ends[:], cfg.AckQuorum); got != want || got < last {
				t.Fatalf("order %s: acknowledged end %d, want %d (previous %d)", o, got, want, last)
			}
			last = got
		}
		if last != base+3 {
			t.Fatalf("order %s: ends at %d, want %d", o, last, base+3)
		}
	}
	t.Logf("%d orders checked", len(orders))
}

func TestTrackerRefuses(t *testing.T) {
	tr, err := NewTracker(Default, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Ack(0, 15); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Ack(0, 14); !errors.Is(err, ErrBackwards) {
		t.Fatalf("a durable end going back: got %v, want ErrBackwards", err)
	}
	if _, err := tr.Ack(3, 20); err == nil {
		t.Fatal("a report from replica 3 of 3 was accepted")
	}
	if got := tr.Confirmed(); got != 10 {
		t.Fatalf("one replica at 15: acknowledged end %d, want 10", got)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{0, 0}, {3, 0}, {3, 4}, {MaxEnsemble + 1, 1}} {
		if c.Validate() == nil {
			t.Errorf("%+v was accepted", c)
		}
		if _, err := NewTracker(c, 0); err == nil {
			t.Errorf("NewTracker(%+v) was accepted", c)
		}
	}
	if err := Default.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := (Config{5, 3}).RecoveryQuorum(); got != 3 {
		t.Fatalf("5/3 recovery quorum %d, want 3", got)
	}
}

func TestRecoverRefuses(t *testing.T) {
	for _, as := range [][]Response{
		{{Replica: 0, End: 5}, {Replica: 5, End: 5}},
		{{Replica: 0, End: 5}, {Replica: 1, End: 1}},
	} {
		if _, err := Recover(Default, 2, as); err == nil || errors.Is(err, ErrTooFew) {
			t.Errorf("answers %v: got %v, want a bad-answer error", as, err)
		}
	}
	// The same replica twice counts once.
	if _, err := Recover(Default, 0, []Response{{0, 5}, {0, 5}}); !errors.Is(err, ErrTooFew) {
		t.Errorf("one replica twice: got %v, want ErrTooFew", err)
	}
}
