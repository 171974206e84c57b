package check

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// none marks an offset that is not known.
const none = math.MaxUint64

// Check checks the history and reports its anomalies. Call it once
// recording has ended: it holds each log's lock while it checks the log,
// and records made meanwhile may or may not count. It may be called more
// than once.
func (h *History) Check() *Report {
	h.mu.Lock()
	logs := make([]*logHistory, 0, len(h.logs))
	for _, l := range h.logs {
		logs = append(logs, l)
	}
	h.mu.Unlock()
	slices.SortFunc(logs, func(a, b *logHistory) int { return strings.Compare(a.name, b.name) })

	rep := &Report{}
	for _, l := range logs {
		l.mu.Lock()
		c := &logCheck{
			rep:          rep,
			l:            l,
			vals:         make([]value, len(l.owner)),
			bases:        make([]uint64, len(l.appends)),
			inFinal:      make([]bool, len(l.appends)),
			outside:      map[uint64]string{},
			inconsistent: map[uint64]bool{},
			uninvoked:    map[string]bool{},
		}
		for i := range c.vals {
			c.vals[i] = value{final: none, seen: none}
		}
		c.finalRead()
		c.readers()
		c.appends()
		c.overlaps()
		c.realTime()
		c.fencing()
		c.cursors()
		l.mu.Unlock()
	}
	return rep
}

// logCheck is the check of one log, whose lock it holds.
type logCheck struct {
	rep *Report
	l   *logHistory

	vals []value // by value ID
	// By append: the offset of the first value, acknowledged or (for an
	// append with no acknowledgement) implied by where its values were read;
	// or none.
	bases []uint64
	// By append: some of its values are in the final read.
	inFinal []bool
	// The value first read at each offset the final read does not cover
	// (those below its start and above its end).
	outside      map[uint64]string
	inconsistent map[uint64]bool // offsets reported as inconsistent
	uninvoked    map[string]bool // values read but never invoked, reported
}

type value struct {
	final uint64 // its offset in the final read, or none
	seen  uint64 // the offset it was first read at (the final read first), or none
	dup   bool   // read at two offsets, and reported
}

func (c *logCheck) add(k Kind, offset uint64, v string, op func() string) {
	c.rep.add(k, c.l.name, offset, v, op)
}

// covers reports whether the final read has offset o.
func (c *logCheck) covers(o uint64) bool {
	return c.l.hasFinal && o >= c.l.start && o-c.l.start < uint64(len(c.l.final))
}

// id returns the ID of value v, read at offset o by who, and reports v as
// unexpected if it was never invoked.
func (c *logCheck) id(v string, o uint64, who string) (int32, bool) {
	id, ok := c.l.index[v]
	if !ok && !c.uninvoked[v] {
		c.uninvoked[v] = true
		c.add(Unexpected, o, v, func() string { return who + " has a value that was never appended" })
	}
	return id, ok
}

// sight notes that who read value id (v) at offset o, and reports it as
// duplicated if it was read at another offset before.
func (c *logCheck) sight(id int32, v string, o uint64, who string) {
	st := &c.vals[id]
	switch {
	case st.seen == none:
		st.seen = o
	case st.seen != o && !st.dup:
		st.dup = true
		first := st.seen
		c.add(Duplicated, o, v, func() string {
			return fmt.Sprintf("%s has it at %d; it was also read at %d", who, o, first)
		})
	}
}

// compare checks value v at offset o, read or acknowledged as what
// describes, against the final read; at offsets the final read does not
// cover, against what readers read there. A read is noted for the next.
// (Acknowledgements that claim the same offset are found by overlaps.)
func (c *logCheck) compare(o uint64, v string, read bool, what func() string) {
	if c.covers(o) {
		if f := c.l.final[o-c.l.start]; f != v {
			c.inconsistentAt(o, v, func() string { return fmt.Sprintf("%s, but the final read has %q", what(), f) })
		}
		return
	}
	w, ok := c.outside[o]
	switch {
	case !ok && read:
		c.outside[o] = v
	case ok && w != v:
		c.inconsistentAt(o, v, func() string { return fmt.Sprintf("%s, but %q was read there", what(), w) })
	}
}

func (c *logCheck) inconsistentAt(o uint64, v string, op func() string) {
	if c.inconsistent[o] {
		return
	}
	c.inconsistent[o] = true
	c.add(Inconsistent, o, v, op)
}

func (c *logCheck) finalRead() {
	l := c.l
	if !l.hasFinal {
		c.rep.NoFinal = append(c.rep.NoFinal, l.name)
		return
	}
	c.rep.FinalEntries += len(l.final)
	const who = "the final read"
	for i, v := range l.final {
		o := l.start + uint64(i)
		id, ok := c.id(v, o, who)
		if !ok {
			continue
		}
		if c.vals[id].final == none {
			c.vals[id].final = o
		}
		c.sight(id, v, o, who)
	}
}

// readers checks each reader's streams for density, and what they read
// against the final read and each other.
func (c *logCheck) readers() {
	rs := slices.Clone(c.l.readers)
	slices.SortFunc(rs, func(a, b *Reader) int {
		return cmp.Or(strings.Compare(a.name, b.name), cmp.Compare(a.created, b.created))
	})
	for _, r := range rs {
		r.mu.Lock()
		// Saw only appends: the prefix held here does not change.
		seen, streams := r.seen, slices.Clone(r.streams)
		r.mu.Unlock()
		who := fmt.Sprintf("reader %q", r.name)
		if r.sub != "" {
			who = fmt.Sprintf("subscriber %q", r.name)
		}
		for si, s := range streams {
			end := len(seen)
			if si+1 < len(streams) {
				end = streams[si+1].at
			}
			next, known, first := s.from, s.known, true
			for _, e := range seen[s.at:end] {
				c.rep.Reads++
				if known && e.offset != next {
					c.misordered(who, e, next, first)
				}
				next, known, first = e.offset+1, true, false
				if id, ok := c.id(e.value, e.offset, who); ok {
					c.sight(id, e.value, e.offset, who)
				}
				c.compare(e.offset, e.value, true, func() string { return fmt.Sprintf("%s read %q", who, e.value) })
			}
		}
	}
}

// misordered reports entry e of a stream, which should have been at next.
func (c *logCheck) misordered(who string, e sighting, next uint64, first bool) {
	c.add(Reordered, e.offset, e.value, func() string {
		switch {
		case first && e.offset > next:
			return fmt.Sprintf("%s resumed from %d, but its stream started at %d: a gap", who, next, e.offset)
		case first:
			return fmt.Sprintf("%s resumed from %d, but its stream started at %d: a step back", who, next, e.offset)
		case e.offset > next:
			return fmt.Sprintf("%s skipped from %d to %d in one stream: a gap", who, next-1, e.offset)
		default:
			return fmt.Sprintf("%s stepped back from %d to %d in one stream", who, next-1, e.offset)
		}
	})
}

// base returns the offset of a's first value, acknowledged or implied by
// where its values were read (the final read first, since what readers saw
// may not have been durable), and whether some of its values are in the
// final read.
func (c *logCheck) base(a *Append) (base uint64, inFinal bool) {
	for j := range a.values {
		if c.vals[a.first+int32(j)].final != none {
			inFinal = true
			break
		}
	}
	if a.outcome == ok {
		return a.offset, inFinal
	}
	for _, final := range []bool{true, false} {
		for j := range a.values {
			st := c.vals[a.first+int32(j)]
			o := st.seen
			if final {
				o = st.final
			}
			if o != none && o >= uint64(j) {
				return o - uint64(j), inFinal
			}
		}
	}
	return none, inFinal
}

// lostValue is a value that should be in the final read and is not.
type lostValue struct {
	offset uint64
	app    int32
	j      int32
}

// appends checks each append's values: where they were read, whether the
// final read has them, whether a definite failure took effect.
func (c *logCheck) appends() {
	l := c.l
	var lost []lostValue
	lo, hi, present := uint64(none), uint64(0), false
	for ai, a := range l.appends {
		c.rep.Invoked++
		switch a.outcome {
		case ok:
			c.rep.OK++
		case failed:
			c.rep.Failed++
		default:
			c.rep.Unknown++
		}
		base, inFinal := c.base(a)
		c.bases[ai], c.inFinal[ai] = base, inFinal
		switch {
		case a.outcome == failed:
			c.failedSurfaced(a)
			inFinal = false // no promise holds for the rest of the batch
		case a.outcome != ok && inFinal:
			c.rep.Surfaced++
		}
		for j, v := range a.values {
			st := &c.vals[a.first+int32(j)]
			exp := uint64(none)
			if base != none && a.outcome != failed {
				exp = base + uint64(j)
			}
			if exp != none && st.seen != none && !st.dup && st.seen != exp {
				c.add(Unexpected, st.seen, v, func() string {
					if a.outcome == ok {
						return fmt.Sprintf("read at %d, but %s", st.seen, describe(a))
					}
					return fmt.Sprintf("read at %d, but the rest of its batch puts it at %d: %s", st.seen, exp, describe(a))
				})
			}
			if a.outcome == ok {
				c.compare(exp, v, false, func() string { return describe(a) })
				if st.final != none {
					lo, hi, present = min(lo, exp), max(hi, exp), true
				}
			}
			if !l.hasFinal || st.final != none {
				continue
			}
			o := exp
			switch {
			case (a.outcome == ok || inFinal) && exp != none:
			case st.seen != none:
				o = st.seen
			default:
				continue
			}
			if o < l.truncBefore {
				if a.outcome == ok {
					c.rep.Truncated++
				}
				continue
			}
			lost = append(lost, lostValue{o, int32(ai), int32(j)})
		}
	}
	for _, x := range lost {
		k := LostSuffix
		switch {
		case x.offset < l.start || present && x.offset < lo:
			k = LostPrefix
		case present && x.offset <= hi:
			k = LostMiddle
		}
		a := l.appends[x.app]
		c.add(k, x.offset, a.values[x.j], func() string {
			switch {
			case a.outcome == ok:
				return "missing from the final read: " + describe(a)
			case a.outcome != failed && c.inFinal[x.app]:
				return "missing from the final read, which has the rest of its batch: " + describe(a)
			default:
				return "read, but missing from the final read: " + describe(a)
			}
		})
	}
}

func (c *logCheck) failedSurfaced(a *Append) {
	for j, v := range a.values {
		if o := c.vals[a.first+int32(j)].seen; o != none {
			c.add(FailedSurfaced, o, v, func() string { return "read, but " + describe(a) })
		}
	}
}

// acknowledged returns the log's acknowledged appends in a new slice, in
// the order they were invoked.
func (c *logCheck) acknowledged() []*Append {
	var acked []*Append
	for _, a := range c.l.appends {
		if a.outcome == ok {
			acked = append(acked, a)
		}
	}
	return acked
}

// overlaps reports the offsets that two acknowledged appends claim.
func (c *logCheck) overlaps() {
	acked := c.acknowledged()
	slices.SortStableFunc(acked, func(a, b *Append) int { return cmp.Compare(a.offset, b.offset) })
	var last *Append // of the appends before, the one that ends last
	for _, a := range acked {
		if last != nil {
			for o := a.offset; o < min(end(a), end(last)); o++ {
				c.inconsistentAt(o, a.values[o-a.offset], func() string {
					return fmt.Sprintf("%s, but so was %s", describe(a), describe(last))
				})
			}
		}
		if last == nil || end(a) > end(last) {
			last = a
		}
	}
}

// realTime checks that an append invoked after another was acknowledged
// lands after it. Appends are recorded in the order of their invocation.
func (c *logCheck) realTime() {
	done := c.acknowledged()
	slices.SortFunc(done, func(a, b *Append) int { return cmp.Compare(a.completed, b.completed) })
	var last *Append // of the appends acknowledged so far, the one that ends last
	i := 0
	for bi, b := range c.l.appends {
		for ; i < len(done) && done[i].completed < b.invoked; i++ {
			if last == nil || end(done[i]) > end(last) {
				last = done[i]
			}
		}
		if base := c.bases[bi]; last != nil && c.landed(bi) && base < end(last) {
			c.add(Reordered, base, b.values[0], func() string {
				return fmt.Sprintf("%s landed at %d, but was invoked after %s", describe(b), base, describe(last))
			})
		}
	}
}

// landed reports whether append ai is known to have landed at its base:
// acknowledged, or of unknown outcome and in the final read.
func (c *logCheck) landed(ai int) bool {
	a := c.l.appends[ai]
	return c.bases[ai] != none && (a.outcome == ok || a.outcome != failed && c.inFinal[ai])
}

// end returns the offset after the last value of an acknowledged append.
func end(a *Append) uint64 { return a.offset + uint64(len(a.values)) }

// fencing checks that no append was acknowledged after a newer epoch had
// fenced its writer: none invoked after the newer writer's open returned,
// and none that landed after an append of a newer epoch.
func (c *logCheck) fencing() {
	fences := slices.Clone(c.l.fences)
	slices.SortFunc(fences, func(a, b *Fence) int { return cmp.Compare(a.done, b.done) })
	newest := make([]*Fence, len(fences)) // newest[i]: the fence of the highest epoch among fences[:i+1]
	for i, f := range fences {
		newest[i] = f
		if i > 0 && newest[i-1].epoch >= f.epoch {
			newest[i] = newest[i-1]
		}
	}

	// The appends known to have landed, by epoch, and for each the one of
	// the lowest offset among it and those of newer epochs.
	var landed []int
	for ai := range c.l.appends {
		if c.landed(ai) {
			landed = append(landed, ai)
		}
	}
	slices.SortStableFunc(landed, func(x, y int) int {
		return cmp.Compare(c.l.appends[x].epoch, c.l.appends[y].epoch)
	})
	lowest := make([]int, len(landed))
	for i := len(landed) - 1; i >= 0; i-- {
		lowest[i] = landed[i]
		if i+1 < len(landed) && c.bases[lowest[i+1]] < c.bases[landed[i]] {
			lowest[i] = lowest[i+1]
		}
	}

	for _, a := range c.l.appends {
		if a.outcome != ok {
			continue
		}
		n := sort.Search(len(fences), func(i int) bool { return fences[i].done > a.invoked })
		if n > 0 && newest[n-1].epoch > a.epoch {
			f := newest[n-1]
			c.add(FencedAcked, a.offset, a.values[0], func() string {
				return fmt.Sprintf("%s, invoked after the open at epoch %d returned", describe(a), f.epoch)
			})
			continue
		}
		i := sort.Search(len(landed), func(i int) bool { return c.l.appends[landed[i]].epoch > a.epoch })
		if i == len(landed) {
			continue
		}
		bi := lowest[i]
		if b := c.l.appends[bi]; a.offset > c.bases[bi] {
			c.add(FencedAcked, a.offset, a.values[0], func() string {
				if b.outcome == ok {
					return fmt.Sprintf("%s, above the newer %s", describe(a), describe(b))
				}
				return fmt.Sprintf("%s, above the newer %s, found at %d", describe(a), describe(b), c.bases[bi])
			})
		}
	}
}

// cursors checks, for each subscription, that the committed cursor never
// goes backwards but once after each seek, and never below the seek's
// position; and that subscribers resume from the committed cursor or after.
func (c *logCheck) cursors() {
	events := slices.Clone(c.l.cursors)
	slices.SortFunc(events, func(a, b cursorEvent) int {
		return cmp.Or(strings.Compare(a.sub, b.sub), cmp.Compare(a.stamp, b.stamp))
	})
	var (
		floor  uint64 // the last observed cursor
		have   bool   // whether floor was observed
		credit bool   // a seek allows one step back
		target uint64 // not below this: the last seek's position
	)
	for i, e := range events {
		if i == 0 || e.sub != events[i-1].sub {
			floor, have, credit, target = 0, false, false, 0
		}
		switch e.kind {
		case seeked:
			credit, target = true, e.pos
		case observed:
			if have && e.pos < floor {
				if credit && e.pos >= target {
					credit = false
				} else {
					prev := floor
					c.add(CursorBackwards, e.pos, "", func() string {
						return fmt.Sprintf("subscription %q: the committed cursor was observed at %d after %d", e.sub, e.pos, prev)
					})
				}
			}
			floor, have = e.pos, true
		case resumed:
			if have && e.pos < floor && !(credit && e.pos >= target) {
				prev := floor
				c.add(CursorBackwards, e.pos, "", func() string {
					return fmt.Sprintf("subscriber %q resumed from %d, below the committed cursor %d", e.sub, e.pos, prev)
				})
			}
		}
	}
}

// describe describes an append for an example.
func describe(a *Append) string {
	var b strings.Builder
	fmt.Fprintf(&b, "append of %q", a.values[0])
	if n := len(a.values) - 1; n > 0 {
		fmt.Fprintf(&b, " (+%d more)", n)
	}
	fmt.Fprintf(&b, " at epoch %d ", a.epoch)
	switch a.outcome {
	case ok:
		fmt.Fprintf(&b, "acknowledged at %d", a.offset)
	case failed:
		fmt.Fprintf(&b, "failed (%v)", a.err)
	case unknown:
		fmt.Fprintf(&b, "of unknown outcome (%v)", a.err)
	default:
		b.WriteString("never completed")
	}
	return b.String()
}
