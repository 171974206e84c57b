package quorum

import (
	"errors"
	"slices"
	"testing"
)

var five = []string{"n1", "n2", "n3", "n4", "n5"}

func TestChoose(t *testing.T) {
	for seed := range uint64(200) {
		got, err := Choose(3, five, []string{"n2"}, seed)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Fatalf("seed %d: %v, want 3 nodes", seed, got)
		}
		seen := map[string]bool{}
		for _, id := range got {
			if seen[id] {
				t.Fatalf("seed %d: %v chooses %s twice", seed, got, id)
			}
			seen[id] = true
			if id == "n2" {
				t.Fatalf("seed %d: %v chooses the avoided n2", seed, got)
			}
			if !slices.Contains(five, id) {
				t.Fatalf("seed %d: %v chooses %s, not live", seed, got, id)
			}
		}
		// The same sets in another order, with repeats, choose the same.
		shuffled := []string{"n5", "n3", "n1", "n4", "n2", "n3"}
		again, err := Choose(3, shuffled, []string{"n2", "n2"}, seed)
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("seed %d: %v, then %v, %v", seed, got, again, err)
		}
		// The choice of 1 is the first of the choice of 3: ranks do not depend on n.
		if one, _ := Choose(1, five, []string{"n2"}, seed); one[0] != got[0] {
			t.Fatalf("seed %d: Choose(1) = %v, Choose(3) = %v", seed, one, got)
		}
	}
}

func TestChooseTooFew(t *testing.T) {
	for _, tt := range []struct {
		n     int
		live  []string
		avoid []string
	}{
		{3, nil, nil},
		{3, []string{"a", "b"}, nil},
		{3, []string{"a", "b", "c"}, []string{"c"}},
		{3, []string{"a", "a", "b"}, nil},
		{1, []string{"a"}, []string{"a"}},
	} {
		if got, err := Choose(tt.n, tt.live, tt.avoid, 1); !errors.Is(err, ErrTooFewNodes) {
			t.Errorf("Choose(%d, %q, %q) = %q, %v; want ErrTooFewNodes", tt.n, tt.live, tt.avoid, got, err)
		}
	}
	for _, n := range []int{0, -1, MaxEnsemble + 1} {
		if _, err := Choose(n, five, nil, 1); err == nil || errors.Is(err, ErrTooFewNodes) {
			t.Errorf("Choose(%d): %v, want an invalid size", n, err)
		}
	}
	// Exactly enough: all of them.
	got, err := Choose(3, five, []string{"n1", "n4"}, 9)
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"n2", "n3", "n5"}) {
		t.Errorf("Choose of 3 out of 3 = %v, %v", got, err)
	}
}

// Over many seeds, each of 5 nodes is in about 3/5 of the ensembles of 3.
func TestChooseSpread(t *testing.T) {
	const seeds = 3000
	count := map[string]int{}
	for seed := range uint64(seeds) {
		got, err := Choose(3, five, nil, seed)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range got {
			count[id]++
		}
	}
	for _, id := range five {
		if c := count[id]; c < seeds*45/100 || c > seeds*75/100 {
			t.Errorf("%s is in %d of %d ensembles", id, c, seeds)
		}
	}
}

// A node joining changes only ensembles it enters, by taking one place.
func TestChooseStable(t *testing.T) {
	six := append(slices.Clone(five), "n6")
	for seed := range uint64(500) {
		before, _ := Choose(3, five, nil, seed)
		after, _ := Choose(3, six, nil, seed)
		if slices.Equal(before, after) {
			continue
		}
		i := slices.Index(after, "n6")
		if i < 0 || !slices.Equal(slices.Delete(slices.Clone(after), i, i+1), before[:2]) {
			t.Fatalf("seed %d: %v became %v", seed, before, after)
		}
	}
}
