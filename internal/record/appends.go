package record

import (
	"encoding/binary"
	"fmt"
)

// Append is one append a batch holds: Count consecutive entries that
// Producer appended as number Seq of its stream. Producer 0 is anonymous,
// with Seq 0.
type Append struct {
	Producer uint64
	Seq      uint64
	Count    uint32
}

// AppendBytes bounds the bytes one append adds to a batch's appends
// section: a run's producer and length, a sequence and a count.
const AppendBytes = 4 * binary.MaxVarintLen64

// appendsSection builds the appends section of a batch as entries are
// added, keeping its encoded size up to date so that Builder.Bytes stays
// exact and cheap.
type appendsSection struct {
	list     []Append // every append with at least one entry, in entry order
	runStart int      // index in list of the current run's first append
	named    bool     // some append has a producer: the batch has a section
	bytes    int      // the encoded size of list
	next     Append   // started by StartAppend, pushed by its first entry
	started  bool
}

func (s *appendsSection) reset() {
	s.list = s.list[:0]
	s.runStart, s.named, s.bytes, s.started = 0, false, 0, false
}

func (s *appendsSection) size() int {
	if !s.named {
		return 0
	}
	return s.bytes
}

func (s *appendsSection) start(producer, seq uint64) {
	s.next, s.started = Append{Producer: producer, Seq: seq}, true
}

// add counts one more entry in the current append, pushing the append
// started last (or an anonymous one) if the entry is its first.
func (s *appendsSection) add() {
	if s.started || len(s.list) == 0 {
		s.push(s.next)
		s.next, s.started = Append{}, false
	}
	a := &s.list[len(s.list)-1]
	s.bytes += uvarintLen(uint64(a.Count)+1) - uvarintLen(uint64(a.Count))
	a.Count++
}

// push adds a, with no entry yet, and its bytes but those of its count's
// growth.
func (s *appendsSection) push(a Append) {
	s.named = s.named || a.Producer != 0
	if n := len(s.list); n > 0 && s.list[n-1].Producer == a.Producer {
		runLen := uint64(n - s.runStart)
		s.bytes += uvarintLen(runLen+1) - uvarintLen(runLen)
		s.bytes += varintLen(int64(a.Seq-s.list[n-1].Seq)) + uvarintLen(0)
	} else {
		s.runStart = n
		s.bytes += uvarintLen(a.Producer) + uvarintLen(1) + varintLen(int64(a.Seq)) + uvarintLen(0)
	}
	s.list = append(s.list, a)
}

// appendTo encodes the section after buf.
func (s *appendsSection) appendTo(buf []byte) []byte {
	for i := 0; i < len(s.list); {
		j := i + 1
		for j < len(s.list) && s.list[j].Producer == s.list[i].Producer {
			j++
		}
		buf = binary.AppendUvarint(buf, s.list[i].Producer)
		buf = binary.AppendUvarint(buf, uint64(j-i))
		prev := uint64(0)
		for _, a := range s.list[i:j] {
			buf = binary.AppendVarint(buf, int64(a.Seq-prev))
			buf = binary.AppendUvarint(buf, uint64(a.Count))
			prev = a.Seq
		}
		i = j
	}
	return buf
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}

// checkSection checks that p is exactly one canonical appends section for
// a batch of count entries.
func checkSection(p []byte, count uint32) error {
	var sum uint64
	named := false
	err := parseSection(p, func(a Append) {
		sum += uint64(a.Count)
		named = named || a.Producer != 0
	})
	switch {
	case err != nil:
		return err
	case sum != uint64(count):
		return fmt.Errorf("%w: the appends section counts %d entries, the batch has %d", ErrCorrupt, sum, count)
	case !named:
		return fmt.Errorf("%w: an appends section with no producer", ErrCorrupt)
	}
	return nil
}

// parseSection decodes the appends section p, calling visit for each
// append in order, and checks every rule of its encoding but the total
// count and that some producer is not 0.
func parseSection(p []byte, visit func(Append)) error {
	bad := func(what string) error {
		return fmt.Errorf("%w: appends section: bad %s", ErrCorrupt, what)
	}
	if len(p) == 0 {
		return bad("length (empty)")
	}
	first := true
	var last uint64
	for len(p) > 0 {
		producer, n := binary.Uvarint(p)
		if !minimal(p, n) {
			return bad("producer")
		}
		if !first && producer == last {
			return bad("run (a producer repeats the run before it)")
		}
		p = p[n:]
		runLen, n := binary.Uvarint(p)
		if !minimal(p, n) || runLen == 0 || runLen > uint64(len(p)) {
			return bad("run length")
		}
		p = p[n:]
		seq := uint64(0)
		for range runLen {
			delta, n := binary.Varint(p)
			if !minimal(p, n) {
				return bad("sequence")
			}
			p = p[n:]
			seq += uint64(delta)
			if (producer == 0) != (seq == 0) {
				return bad("sequence (0 if and only if the producer is 0)")
			}
			c, n := binary.Uvarint(p)
			if !minimal(p, n) || c == 0 || c > 1<<32-1 {
				return bad("entry count")
			}
			p = p[n:]
			visit(Append{Producer: producer, Seq: seq, Count: uint32(c)})
		}
		first, last = false, producer
	}
	return nil
}
