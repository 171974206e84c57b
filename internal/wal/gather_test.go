package wal

import "testing"

// A gather waits for the producers its flight acknowledged while they come
// back in time (a closed loop), and stops waiting for them once maxNoShows
// gathers in a row have waited in vain (an open loop), until one comes back
// in time again.
func TestGathered(t *testing.T) {
	const from, target = 10, 14
	type step struct {
		added   uint64
		late    bool // the deadline has passed
		inTime  bool // an append came back before it
		done    bool
		noShows int
	}
	for _, c := range []struct {
		name    string
		noShows int
		steps   []step
	}{
		{"all come back in time", 1, []step{{11, false, true, false, 0}, {13, false, true, false, 0}, {14, false, true, true, 0}}},
		{"more than awaited", 0, []step{{20, false, true, true, 0}}},
		{"some come back, then the deadline", 1, []step{{12, false, true, false, 0}, {12, true, true, true, 0}}},
		{"none comes back", 0, []step{{10, false, false, false, 0}, {10, true, false, true, 1}}},
		{"one comes back after the deadline", 1, []step{{11, true, false, true, 2}}},
		{"one came back in time, seen after the deadline", 1, []step{{11, true, true, true, 0}}},
		{"all come back after the deadline", 1, []step{{14, true, false, true, 1}}},
		{"an open loop is not waited for", maxNoShows, []step{{10, false, false, true, maxNoShows}}},
		{"an open loop whose producer came back before the gather", maxNoShows, []step{{11, false, true, false, 0}, {14, false, true, true, 0}}},
		{"waited for again once one came back in time", maxNoShows, []step{{11, false, true, false, 0}, {11, true, true, true, 0}, {10, false, false, false, 0}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &Log{noShows: c.noShows}
			for i, s := range c.steps {
				if done := l.gathered(s.added, from, target, s.late, s.inTime); done != s.done || l.noShows != s.noShows {
					t.Fatalf("step %d (%d of %d come, late %v, in time %v): done %v with %d no-shows, want %v with %d",
						i, s.added-from, target-from, s.late, s.inTime, done, l.noShows, s.done, s.noShows)
				}
			}
		})
	}
}

// In a row of gathers that all wait in vain, only the first maxNoShows wait.
func TestGatherStopsWaitingForAnOpenLoop(t *testing.T) {
	l := &Log{}
	waited := 0
	for range 10 {
		if !l.gathered(5, 5, 7, false, false) {
			waited++
			l.gathered(6, 5, 7, true, false) // the deadline passes; one comes after it
		}
	}
	if waited != maxNoShows {
		t.Fatalf("%d of 10 gathers waited for producers that never came back, want %d", waited, maxNoShows)
	}
}
