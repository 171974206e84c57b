package engine

import "context"

// Outcome is the result of a group of appends committed as one, which
// every append of the group waits for. The engines of local and object
// logs both hand out Pendings of their groups' Outcomes.
type Outcome struct {
	done chan struct{} // closed when Base and err are set
	Base uint64        // the group's first offset (a tick's position)
	err  error
}

// NewOutcome returns an Outcome not known yet.
func NewOutcome() Outcome { return Outcome{done: make(chan struct{})} }

// Finish records err (nil: committed at Base) and wakes the waiters. It is
// called once.
func (o *Outcome) Finish(err error) {
	o.err = err
	close(o.done)
}

// Failed reports whether the group failed; it is meaningful once finished.
func (o *Outcome) Failed() bool { return o.err != nil }

// Err is the error the group failed with; it is meaningful once finished.
func (o *Outcome) Err() error { return o.err }

// Pending returns the append rel entries into the group.
func (o *Outcome) Pending(rel uint64) Pending { return Pending{o: o, rel: rel} }

// closed is a channel closed from the start, the done of every Outcome
// that Acknowledged makes.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Acknowledged returns the Pending of an append acknowledged at offset
// off: it has completed.
func Acknowledged(off uint64) Pending {
	return Pending{o: &Outcome{done: closed, Base: off}}
}

// Pending is an append waiting for its acknowledgement.
type Pending struct {
	o   *Outcome
	rel uint64
}

// Wait blocks until the append is acknowledged or has failed, or ctx ends,
// and returns the offset of the append's first entry. A ctx that ends first
// does not cancel the append: its outcome is then unknown to the caller.
func (p Pending) Wait(ctx context.Context) (uint64, error) {
	select {
	case <-p.o.done:
	default:
		select {
		case <-p.o.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if p.o.err != nil {
		return 0, p.o.err
	}
	return p.o.Base + p.rel, nil
}

// Done is closed when the outcome is known.
func (p Pending) Done() <-chan struct{} { return p.o.done }
