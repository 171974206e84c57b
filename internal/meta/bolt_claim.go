package meta

import "context"

// ClaimWriter implements Store. The claim holds until a newer epoch of the
// log is stored through b, the log is deleted, the claim is released or b
// is closed; no other process can store one while b holds the file lock.
func (b *Bolt) ClaimWriter(ctx context.Context, name string, o ClaimOptions) (Claim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var c *boltClaim
	err := b.update(name, func(l *Log) error {
		if err := openSession(l, o); err != nil {
			return err
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed {
			return errClosed
		}
		if old := b.claims[l.ID]; old != nil {
			old.lose()
		}
		// Registered before the commit, so that the next transaction,
		// which may bump the epoch again, finds it.
		c = &boltClaim{claim: newClaim(*l), b: b, id: l.ID}
		b.claims[l.ID] = c
		return nil
	})
	if err != nil {
		if c != nil { // the epoch was not stored
			c.release()
		}
		return nil, wrap("claim writer", name, err)
	}
	return c, nil
}

// fence ends the claim on log id, if any. It is called inside the write
// transaction that stores a newer epoch or deletes the log, before the
// commit: a claim is lost no later than the change that ends it is durable.
func (b *Bolt) fence(id uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.claims[id]; c != nil {
		c.lose()
		delete(b.claims, id)
	}
}

// boltClaim is a Bolt's Claim.
type boltClaim struct {
	*claim
	b  *Bolt
	id uint64 // the log's
}

// Valid implements Claim: no lease backs the claim, so it is valid until it
// is lost.
func (c *boltClaim) Valid() bool { return !c.lost.Load() }

// Release implements Claim. It does no I/O: the claim exists only in this
// process. With a canceled ctx it returns ctx's error and keeps the claim,
// as the etcd store does.
func (c *boltClaim) Release(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.release()
	return nil
}

func (c *boltClaim) release() {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.lose()
	if c.b.claims[c.id] == c {
		delete(c.b.claims, c.id)
	}
}

// EndSession implements Store.
func (b *Bolt) EndSession(ctx context.Context, name string, epoch uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return wrap("end session", name, b.update(name, func(l *Log) error {
		endSession(l, epoch) // unchanged: the same record is written back
		return nil
	}))
}
