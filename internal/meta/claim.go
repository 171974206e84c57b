package meta

import (
	"sync"
	"sync/atomic"
)

// claim is the part of a Claim that both stores share: the epoch and the
// one-way switch to lost. Its zero value is not usable; see newClaim.
type claim struct {
	epoch uint64
	lost  atomic.Bool
	lostc chan struct{}
	once  sync.Once
}

func newClaim(epoch uint64) *claim {
	return &claim{epoch: epoch, lostc: make(chan struct{})}
}

// Epoch implements Claim.
func (c *claim) Epoch() uint64 { return c.epoch }

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
