package engine

import (
	"fmt"
	"sort"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/record"
)

// The bounds of a log's deduplication table (see Dedup and
// docs/exactly-once.md).
const (
	// DedupWindow is how many appends the table remembers per producer:
	// the newest ones from the producer's Acked on.
	DedupWindow = 4096
	// DedupProducers is how many producers the table remembers per log;
	// the least recently used one is forgotten first.
	DedupProducers = 1024
	// DedupEntries is how many appends the table remembers per log, all
	// producers together (about 40 bytes each): past it, the oldest
	// appends of the least recently used producers are forgotten first, as
	// if their window had filled. It bounds what clients that never
	// acknowledge can make a log hold to a few MiB.
	DedupEntries = 1 << 16
	// DedupReachBytes is how far back from its end an engine reads a
	// log's batches to rebuild its Dedup after opening the log (see
	// DedupLoad): this many bytes of batches, to within a batch, or the
	// whole log if it is smaller. An append further back is not
	// deduplicated after a reopen.
	DedupReachBytes = 16 << 20
)

// Dedup is a log's deduplication table: for each producer that appended
// recently, the window of its recent appends (sequence number, first
// offset, entry count), so that an append retried with the same producer
// and sequence is answered with the original's offset instead of being
// appended twice.
//
// A producer's window holds its appends from its latest Acked on, at most
// DedupWindow of them (the oldest are dropped first); the table holds at
// most DedupProducers producers (the least recently used is dropped
// whole). Every sequence below a producer's window is forgotten, and an
// append with one fails with rpcerr.ErrInvalid rather than being appended
// a second time. A producer dropped whole is unknown again: its next
// append is taken as new, so a retry that comes after its producer was
// dropped may be appended twice. Recovery (Restore) rebuilds the table
// from the batches an engine reads back after it opens a log.
//
// The log's mutex guards a Dedup; it does no I/O. The zero value is an
// empty table.
type Dedup struct {
	producers map[uint64]*producer
	lru       producer // sentinel of the producers, most recently used first
	entries   int      // appends in the windows of all producers
}

// producer is one producer's window.
type producer struct {
	id         uint64
	low        uint64    // every sequence below low is forgotten
	evicted    bool      // the window has dropped appends for want of room
	seen       []applied // sorted by seq; seen[head:] is the window
	head       int
	prev, next *producer
}

// applied is one append of a producer: acknowledged at offset off when p.o
// is nil, or still waiting for p's outcome.
type applied struct {
	seq   uint64
	off   uint64
	p     Pending
	count uint32
}

func (d *Dedup) init() {
	if d.producers == nil {
		d.producers = make(map[uint64]*producer)
		d.lru.prev, d.lru.next = &d.lru, &d.lru
	}
}

// Reset empties the table.
func (d *Dedup) Reset() {
	d.producers, d.entries = nil, 0
	d.init()
}

// Len is the number of producers the table remembers.
func (d *Dedup) Len() int { return len(d.producers) }

// Window returns the sequences the table remembers of producer, and the
// lowest sequence it can answer for: for tests and metrics.
func (d *Dedup) Window(id uint64) (seqs []uint64, low uint64) {
	pr := d.producers[id]
	if pr == nil {
		return nil, 0
	}
	for _, a := range pr.seen[pr.head:] {
		seqs = append(seqs, a.seq)
	}
	return seqs, pr.low
}

// Find looks up the append seq, of count entries, of producer id, after
// forgetting the producer's sequences below acked. It returns the
// original's Pending and true for a duplicate: one that is acknowledged
// (its Pending has completed), or still in flight (its Pending completes
// with the original's outcome). An original that failed is forgotten, and
// the append is new. It fails with rpcerr.ErrInvalid for a sequence the
// window no longer holds, or one the producer used for a different number
// of entries.
func (d *Dedup) Find(id, seq, acked uint64, count int) (Pending, bool, error) {
	d.init()
	pr := d.producers[id]
	if pr == nil {
		return Pending{}, false, nil
	}
	d.touch(pr)
	n := pr.size()
	pr.trim(acked)
	d.entries -= n - pr.size()
	i, ok := pr.search(seq)
	if !ok {
		if seq < pr.low {
			return Pending{}, false, fmt.Errorf("%w: engine: sequence %d of producer %d is older than the deduplication window, which starts at %d: whether it was appended is no longer known, so it is not appended again (a window holds a producer's last %d appends, from its acknowledged sequence on)",
				rpcerr.ErrInvalid, seq, id, pr.low, DedupWindow)
		}
		return Pending{}, false, nil
	}
	a := &pr.seen[i]
	if a.p.o != nil {
		select {
		case <-a.p.o.done:
			if a.p.o.err != nil {
				pr.remove(i)
				d.entries--
				return Pending{}, false, nil
			}
			a.off, a.p = a.p.o.Base+a.p.rel, Pending{}
		default:
		}
	}
	if int(a.count) != count {
		return Pending{}, false, fmt.Errorf("%w: engine: sequence %d of producer %d was an append of %d entries, and is retried with %d: a retry must repeat its append",
			rpcerr.ErrInvalid, seq, id, a.count, count)
	}
	if a.p.o == nil {
		return Acknowledged(a.off), true, nil
	}
	return a.p, true, nil
}

// Record adds the append seq of producer id, of count entries, whose
// outcome p gives; Find has just said it is new.
func (d *Dedup) Record(id, seq uint64, count int, p Pending) {
	d.add(id, seq, count, 0, p, false)
}

// Applied is an append of a producer found in the log.
type Applied struct {
	Producer, Seq, Offset uint64
	Count                 uint32
}

// AppliedIn appends to dst the appends of producers that b, a batch read
// back from the log, holds, and returns it.
func AppliedIn(b record.Batch, dst []Applied) []Applied {
	if b.Flags&record.FlagAppends == 0 {
		return dst
	}
	off := b.BaseOffset
	for _, a := range b.Appends(nil) {
		if a.Producer != 0 {
			dst = append(dst, Applied{Producer: a.Producer, Seq: a.Seq, Offset: off, Count: a.Count})
		}
		off += uint64(a.Count)
	}
	return dst
}

// RestoreAll restores the appends found in the log, oldest first.
func (d *Dedup) RestoreAll(as []Applied) {
	for _, a := range as {
		d.Restore(a.Producer, a.Seq, int(a.Count), a.Offset)
	}
}

// Restore adds the append seq of producer id, of count entries at first
// offset off, found in the log at recovery, oldest first. The producer's
// sequences below the lowest restored are taken as forgotten: the log
// read back may not reach them.
func (d *Dedup) Restore(id, seq uint64, count int, off uint64) {
	d.add(id, seq, count, off, Pending{}, true)
}

func (d *Dedup) add(id, seq uint64, count int, off uint64, p Pending, restored bool) {
	d.init()
	pr := d.producers[id]
	switch {
	case pr == nil:
		pr = &producer{id: id}
		if restored {
			pr.low = seq
		}
		d.producers[id] = pr
		d.push(pr)
		if len(d.producers) > DedupProducers {
			old := d.lru.prev
			d.unlink(old)
			delete(d.producers, old.id)
			d.entries -= old.size()
		}
	default:
		d.touch(pr)
		if restored && !pr.evicted {
			pr.low = min(pr.low, seq)
		}
	}
	if seq < pr.low {
		return
	}
	before := pr.size()
	defer func() {
		d.entries += pr.size() - before
		d.shrink()
	}()
	a := applied{seq: seq, off: off, p: p, count: uint32(count)}
	if n := len(pr.seen); n == pr.head || pr.seen[n-1].seq < seq {
		pr.seen = append(pr.seen, a)
	} else {
		i, found := pr.search(seq)
		if found {
			pr.seen[i] = a
		} else {
			pr.seen = append(pr.seen, applied{})
			copy(pr.seen[i+1:], pr.seen[i:])
			pr.seen[i] = a
		}
	}
	if len(pr.seen)-pr.head > DedupWindow {
		pr.low = pr.seen[pr.head].seq + 1
		pr.evicted = true
		pr.drop(1)
	}
}

// shrink forgets the oldest appends of the least recently used producers
// until the table holds at most DedupEntries.
func (d *Dedup) shrink() {
	for pr := d.lru.prev; d.entries > DedupEntries && pr != &d.lru; {
		if pr.size() == 0 {
			pr = pr.prev
			continue
		}
		pr.low = pr.seen[pr.head].seq + 1
		pr.evicted = true
		pr.drop(1)
		d.entries--
	}
}

// size is the number of appends in the window.
func (pr *producer) size() int { return len(pr.seen) - pr.head }

// search returns where seq is in the window, or where it would go.
func (pr *producer) search(seq uint64) (int, bool) {
	w := pr.seen[pr.head:]
	i := sort.Search(len(w), func(k int) bool { return w[k].seq >= seq })
	return pr.head + i, i < len(w) && w[i].seq == seq
}

// trim forgets the sequences below acked.
func (pr *producer) trim(acked uint64) {
	if acked <= pr.low {
		return
	}
	pr.low = acked
	i, _ := pr.search(acked)
	pr.drop(i - pr.head)
}

// drop forgets the n oldest appends of the window.
func (pr *producer) drop(n int) {
	clear(pr.seen[pr.head : pr.head+n])
	pr.head += n
	if pr.head == len(pr.seen) {
		pr.seen, pr.head = pr.seen[:0], 0
	} else if pr.head > 64 && pr.head > len(pr.seen)/2 {
		k := copy(pr.seen, pr.seen[pr.head:])
		clear(pr.seen[k:])
		pr.seen, pr.head = pr.seen[:k], 0
	}
}

// remove forgets the append at i, whose original failed.
func (pr *producer) remove(i int) {
	copy(pr.seen[i:], pr.seen[i+1:])
	pr.seen[len(pr.seen)-1] = applied{}
	pr.seen = pr.seen[:len(pr.seen)-1]
}

func (d *Dedup) push(pr *producer) {
	pr.prev, pr.next = &d.lru, d.lru.next
	d.lru.next.prev = pr
	d.lru.next = pr
}

func (d *Dedup) unlink(pr *producer) {
	pr.prev.next, pr.next.prev = pr.next, pr.prev
	pr.prev, pr.next = nil, nil
}

func (d *Dedup) touch(pr *producer) {
	if d.lru.next != pr {
		d.unlink(pr)
		d.push(pr)
	}
}
