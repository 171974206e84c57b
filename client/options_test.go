package client

import (
	"errors"
	"testing"
)

// Which settings apply depends on the mode: a log created with no mode
// takes the server's default, so its quorum settings are left for the
// server to check, while a mode that has none refuses them.
func TestWithDefaultsQuorumSettings(t *testing.T) {
	q := LogOptions{Ensemble: 5, AckQuorum: 3}
	if _, err := q.WithDefaults(); err != nil {
		t.Errorf("quorum settings with no mode (the server's default): %v", err)
	}
	for _, m := range []Mode{ModeLocal, ModeObject} {
		q.Mode = m
		if _, err := q.WithDefaults(); !errors.Is(err, ErrInvalid) {
			t.Errorf("quorum settings on a %s log: %v, want ErrInvalid", m, err)
		}
	}
	q.Mode = ModeQuorum
	if o, err := q.WithDefaults(); err != nil || o.Ensemble != 5 || o.AckQuorum != 3 {
		t.Errorf("a quorum log of 5 at 3: %+v, %v", o, err)
	}
	if _, err := (LogOptions{Mode: ModeQuorum, Ensemble: 3, AckQuorum: 4}).WithDefaults(); !errors.Is(err, ErrInvalid) {
		t.Errorf("an ack quorum over the ensemble: %v, want ErrInvalid", err)
	}
}
