package meta

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// claim is the part of a Claim that both stores share: the epoch and the
// one-way switch to lost. Its zero value is not usable; see newClaim.
type claim struct {
	epoch   uint64
	session uint64
	lost    atomic.Bool
	lostc   chan struct{}
	once    sync.Once
}

func newClaim(l Log) *claim {
	return &claim{epoch: l.Epoch, session: l.Session, lostc: make(chan struct{})}
}

// Epoch implements Claim.
func (c *claim) Epoch() uint64 { return c.epoch }

// Session implements Claim.
func (c *claim) Session() uint64 { return c.session }

// Lost implements Claim.
func (c *claim) Lost() <-chan struct{} { return c.lostc }

// lose marks the claim lost for good and closes Lost. It is idempotent and
// does no I/O, so it may be called with locks held.
func (c *claim) lose() {
	c.once.Do(func() {
		c.lost.Store(true)
		close(c.lostc)
	})
}

// ClaimOptions say which writer session ClaimWriter opens.
type ClaimOptions struct {
	// Session is the session to open: 0 for a new one above the log's; the
	// log's own to reopen it (after a restart, or on another node); a
	// higher one to fence the log's. A lower one fails with ErrStaleEpoch.
	Session uint64
	// Shared opens the shared producers' session: the log's, if it is
	// shared, or else a new one, if the log has no session or its
	// exclusive writer closed it (EndSession). While an exclusive session
	// is open it fails with ErrSessionHeld: shared producers never fence
	// an exclusive writer. Shared with a Session is invalid.
	Shared bool
	// Reopen: Session only if it is the log's; a higher one fails with
	// ErrStaleEpoch too.
	Reopen bool
}

// openSession applies o to l as one ClaimWriter does: it sets l's session
// and raises its epoch, or says why o cannot be opened.
func openSession(l *Log, o ClaimOptions) error {
	cur, ended := l.Session, l.Ended
	if cur == 0 && l.Epoch > 0 {
		// A record from before sessions: its epoch was the session, and
		// no record says whether its writer is still there.
		cur, ended = l.Epoch, true
	}
	next := o.Session
	switch {
	case o.Shared && o.Session != 0:
		return fmt.Errorf("meta: a shared session has no chosen epoch (epoch %d)", o.Session)
	case o.Shared && l.Shared:
		next = cur
	case o.Shared && cur != 0 && !ended:
		return fmt.Errorf("%w: epoch %d is an exclusive writer's", ErrSessionHeld, cur)
	case o.Session == 0:
		next = cur + 1
	case o.Session < cur:
		return fmt.Errorf("%w: epoch %d is below the log's epoch %d", ErrStaleEpoch, o.Session, cur)
	case o.Reopen && o.Session != cur:
		return fmt.Errorf("%w: epoch %d is not the log's epoch %d", ErrStaleEpoch, o.Session, cur)
	case o.Session == cur && l.Shared:
		return fmt.Errorf("%w: epoch %d is the shared producers'; open a higher one", ErrSessionHeld, cur)
	}
	l.Session, l.Shared, l.Ended = next, o.Shared, false
	l.Epoch++
	return nil
}

// endSession marks l's session ended if it is exclusive and epoch is still
// l's, and reports whether it changed l.
func endSession(l *Log, epoch uint64) bool {
	if l.Epoch != epoch || l.Shared || l.Ended || l.Session == 0 {
		return false
	}
	l.Ended = true
	return true
}
