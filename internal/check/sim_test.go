package check

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var errTruncated = errors.New("truncated")

// memLog is an in-memory log that keeps Tern's promises, with one
// subscription, for goroutines to run against.
type memLog struct {
	mu      sync.Mutex
	entries []string
	start   uint64
	epoch   uint64
	cursor  uint64 // the subscription's committed cursor
}

func (m *memLog) append(epoch uint64, values []string) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch < m.epoch {
		return 0, errFenced
	}
	off := uint64(len(m.entries))
	m.entries = append(m.entries, values...)
	return off, nil
}

// read returns the entry at pos, or false if the log ends before it.
func (m *memLog) read(pos uint64) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case pos < m.start:
		return "", false, errTruncated
	case pos >= uint64(len(m.entries)):
		return "", false, nil
	}
	return m.entries[pos], true, nil
}

// bounds returns the log's start and end.
func (m *memLog) bounds() (uint64, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.start, uint64(len(m.entries))
}

func (m *memLog) currentEpoch() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch
}

func (m *memLog) fence(epoch uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch = max(m.epoch, epoch)
}

func (m *memLog) truncate(before uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.start = max(m.start, before)
}

// commit moves the cursor to pos, forwards only, and returns it.
func (m *memLog) commit(pos uint64) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cursor = max(m.cursor, pos)
	return m.cursor
}

func (m *memLog) seek(pos uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cursor = pos
}

func (m *memLog) committed() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cursor
}

// runMemLog runs writers, a fencer, a truncater, readers and a subscriber
// against a memLog, recording what they do in h as a harness would.
func runMemLog(t *testing.T, h *History, log string) {
	m := &memLog{epoch: 1}
	const writers, perWriter = 8, 250
	var writing, others sync.WaitGroup
	var done atomic.Bool
	for w := range writers {
		writing.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(len(log))))
			for i := range perWriter {
				values := make([]string, 1+rng.IntN(3))
				for j := range values {
					values[j] = fmt.Sprintf("%s/w%d/%d/%d", log, w, i, j)
				}
				epoch := m.currentEpoch()
				if epoch > 1 && rng.IntN(20) == 0 {
					epoch-- // a writer that was fenced and does not know yet
				}
				a := h.Invoke(log, epoch, values...)
				switch r := rng.IntN(100); {
				case r < 4:
					a.Fail(errors.New("rejected before sending"))
					continue
				case r < 8:
					a.Unknown(errTimeout) // lost on the way
					continue
				}
				off, err := m.append(epoch, values)
				switch r := rng.IntN(100); {
				case err != nil:
					a.Fail(err)
				case r < 10:
					a.Unknown(errTimeout) // the acknowledgement was lost
				case r < 13:
					// Never completes.
				default:
					a.OK(off)
				}
			}
		})
	}
	// Fence twice and truncate once, as the log grows.
	writing.Go(func() {
		const total = writers * perWriter * 2 // values, about
		epoch := uint64(1)
		for {
			_, end := m.bounds()
			switch {
			case epoch < 3 && end > total*epoch/5:
				epoch++
				f := h.Fence(log, epoch)
				m.fence(epoch)
				f.Done()
			case end > total/2:
				m.truncate(end / 2)
				h.Truncated(log, end/2)
				return
			default:
				time.Sleep(50 * time.Microsecond)
			}
		}
	})
	for i := range 3 {
		others.Go(func() { tail(h, m, log, fmt.Sprintf("tail-%d", i), &done) })
	}
	others.Go(func() { subscribe(h, m, log, &done) })

	writing.Wait()
	done.Store(true)
	others.Wait()
	start, end := m.bounds()
	h.Final(log, start, m.entries[start:end])
	if start == 0 {
		t.Errorf("log %s: no truncation", log)
	}
}

// caughtUp reports whether a reader at pos has read everything.
func caughtUp(m *memLog, pos uint64, done *atomic.Bool) bool {
	_, end := m.bounds()
	if done.Load() && pos >= end {
		return true
	}
	time.Sleep(20 * time.Microsecond)
	return false
}

// tail follows the log, reconnecting now and then at a random position.
func tail(h *History, m *memLog, log, name string, done *atomic.Bool) {
	rng := rand.New(rand.NewPCG(uint64(len(name)), uint64(name[len(name)-1])))
	r := h.Reader(log, name)
	r.Restart(0)
	pos := uint64(0)
	for {
		v, ok, err := m.read(pos)
		switch {
		case err != nil:
			pos, _ = m.bounds()
			r.Restart(pos)
			continue
		case !ok:
			if caughtUp(m, pos, done) {
				return
			}
			continue
		}
		r.Saw(pos, v)
		pos++
		if rng.IntN(100) == 0 {
			start, end := m.bounds()
			pos = start + rng.Uint64N(end-start+1)
			r.Restart(pos)
		}
	}
}

// subscribe consumes the subscription: it commits, observes the cursor,
// reconnects from it, and seeks.
func subscribe(h *History, m *memLog, log string, done *atomic.Bool) {
	const sub = "sub"
	rng := rand.New(rand.NewPCG(uint64(len(log)), 7))
	r := h.Subscriber(log, sub)
	pos := m.committed()
	r.Restart(pos)
	seek := func(to uint64) {
		m.seek(to)
		h.Seek(log, sub, to)
		pos = to
		r.Restart(pos)
	}
	for {
		v, ok, err := m.read(pos)
		switch {
		case err != nil:
			start, _ := m.bounds()
			seek(start)
			continue
		case !ok:
			if caughtUp(m, pos, done) {
				return
			}
			continue
		}
		r.Saw(pos, v)
		pos++
		switch rng.IntN(40) {
		case 0, 1, 2:
			c := m.committed()
			h.Cursor(log, sub, m.commit(c+rng.Uint64N(pos-c+1)))
		case 3:
			h.Cursor(log, sub, m.committed())
		case 4:
			pos = m.committed()
			r.Restart(pos)
		case 5:
			start, end := m.bounds()
			seek(start + rng.Uint64N(end-start+1))
		}
	}
}

// sim records a random valid history of one log, "l", simulated step by
// step on one goroutine: appends invoked, applied and completed in any
// order, some applied after their outcome was recorded unknown; fences;
// truncations; tail readers; a subscriber.
type sim struct {
	rng     *rand.Rand
	h       *History
	entries []string
	start   uint64 // truncated before
	epoch   uint64
	n       int          // values invoked
	flight  []*simAppend // invoked, not completed
	limbo   []*simAppend // of unknown outcome, not applied yet
	acked   map[string]bool
	readers []*simReader
	sub     *simReader
	cursor  uint64 // the subscription's committed cursor
}

type simAppend struct {
	a       *Append
	epoch   uint64
	values  []string
	applied bool
	offset  uint64
}

type simReader struct {
	r   *Reader
	pos uint64
}

// simulate runs a simulation of about n values and returns it before its
// final read.
func simulate(seed uint64, n int) *sim {
	s := &sim{
		rng:   rand.New(rand.NewPCG(seed, 1)),
		h:     New(),
		epoch: 1,
		acked: map[string]bool{},
	}
	for i := range 2 {
		s.readers = append(s.readers, &simReader{r: s.h.Reader("l", fmt.Sprint("tail-", i))})
	}
	s.sub = &simReader{r: s.h.Subscriber("l", "sub")}
	s.sub.r.Restart(0)
	for s.n < n {
		switch x := s.rng.IntN(1000); {
		case x < 180:
			s.invoke()
		case x < 420:
			s.apply()
		case x < 640:
			s.complete()
		case x < 840:
			s.read(s.readers[s.rng.IntN(len(s.readers))])
		case x < 860:
			rd := s.readers[s.rng.IntN(len(s.readers))]
			rd.pos = s.somewhere()
			rd.r.Restart(rd.pos)
		case x < 996:
			s.subscriber()
		case x < 997:
			s.epoch++
			s.h.Fence("l", s.epoch).Done()
		default:
			// Truncate at most half of the log.
			if half := uint64(len(s.entries)) / 2; half > s.start {
				s.start += s.rng.Uint64N(half-s.start) + 1
				s.h.Truncated("l", s.start)
			}
		}
	}
	for len(s.flight) > 0 && s.rng.IntN(10) > 0 {
		s.complete()
	}
	return s
}

// somewhere returns an offset between the log's start and end.
func (s *sim) somewhere() uint64 {
	return s.start + s.rng.Uint64N(uint64(len(s.entries))-s.start+1)
}

func (s *sim) invoke() {
	values := make([]string, 1+s.rng.IntN(3))
	for i := range values {
		values[i] = "v" + strconv.Itoa(s.n)
		s.n++
	}
	epoch := s.epoch
	if epoch > 1 && s.rng.IntN(20) == 0 {
		epoch-- // a fenced writer
	}
	s.flight = append(s.flight, &simAppend{a: s.h.Invoke("l", epoch, values...), epoch: epoch, values: values})
}

// pick removes and returns a random element of *list.
func (s *sim) pick(list *[]*simAppend) *simAppend {
	l := *list
	i := s.rng.IntN(len(l))
	p := l[i]
	l[i] = l[len(l)-1]
	*list = l[:len(l)-1]
	return p
}

func (s *sim) apply() {
	var p *simAppend
	switch {
	case len(s.limbo) > 0 && s.rng.IntN(4) == 0:
		p = s.pick(&s.limbo)
	case len(s.flight) > 0:
		p = s.flight[s.rng.IntN(len(s.flight))]
	default:
		return
	}
	if p.applied || p.epoch < s.epoch {
		return // a fenced append from limbo is dropped: it never lands
	}
	p.applied, p.offset = true, uint64(len(s.entries))
	s.entries = append(s.entries, p.values...)
}

func (s *sim) complete() {
	if len(s.flight) == 0 {
		return
	}
	p := s.pick(&s.flight)
	switch {
	case p.applied && s.rng.IntN(5) > 0:
		p.a.OK(p.offset)
		for _, v := range p.values {
			s.acked[v] = true
		}
	case p.applied:
		p.a.Unknown(errTimeout)
	case s.rng.IntN(2) == 0:
		p.a.Fail(errFenced)
	default:
		p.a.Unknown(errTimeout)
		if s.rng.IntN(2) == 0 {
			s.limbo = append(s.limbo, p) // still on its way
		}
	}
}

func (s *sim) read(r *simReader) {
	switch {
	case r.pos < s.start:
		r.pos = s.start
		r.r.Restart(r.pos)
	case r.pos < uint64(len(s.entries)):
		r.r.Saw(r.pos, s.entries[r.pos])
		r.pos++
	}
}

func (s *sim) subscriber() {
	sub := s.sub
	seek := func(to uint64) {
		s.cursor, sub.pos = to, to
		s.h.Seek("l", "sub", to)
		sub.r.Restart(to)
	}
	switch x := s.rng.IntN(10); {
	case sub.pos < s.start:
		seek(s.start)
	case x < 6:
		s.read(sub)
	case x < 8:
		s.cursor += s.rng.Uint64N(sub.pos - s.cursor + 1)
		s.h.Cursor("l", "sub", s.cursor)
	case x < 9:
		sub.pos = s.cursor
		sub.r.Restart(sub.pos)
	default:
		seek(s.somewhere())
	}
}

// final returns the final read: from a little below the truncation point,
// since truncation may leave entries below it.
func (s *sim) final() (uint64, []string) {
	start := s.start - s.rng.Uint64N(min(s.start, 3)+1)
	return start, slices.Clone(s.entries[start:])
}

// TestSim checks that simulated valid histories are valid.
func TestSim(t *testing.T) {
	for seed := range uint64(100) {
		s := simulate(seed, 300)
		start, final := s.final()
		s.h.Final("l", start, final)
		rep := s.h.Check()
		if rep.Anomalies() != 0 {
			t.Fatalf("seed %d: a valid history has anomalies:\n%s", seed, rep)
		}
		if rep.OK == 0 || rep.Reads == 0 {
			t.Fatalf("seed %d: an empty history:\n%s", seed, rep)
		}
	}
}

// TestMutations checks that one change to the final read of a valid
// history is flagged: an acknowledged value dropped, two values swapped,
// one duplicated, one changed.
func TestMutations(t *testing.T) {
	mutations := []struct {
		name   string
		mutate func(s *sim, start uint64, final []string) ([]string, bool)
	}{
		{"drop", func(s *sim, start uint64, final []string) ([]string, bool) {
			i, ok := s.ackedIndex(start, final, s.start)
			if !ok {
				return nil, false
			}
			return slices.Delete(final, i, i+1), true
		}},
		{"swap", func(s *sim, start uint64, final []string) ([]string, bool) {
			i, ok := s.ackedIndex(start, final, 0)
			if !ok || len(final) < 2 {
				return nil, false
			}
			j := s.rng.IntN(len(final) - 1)
			if j >= i {
				j++
			}
			final[i], final[j] = final[j], final[i]
			return final, true
		}},
		{"duplicate", func(s *sim, start uint64, final []string) ([]string, bool) {
			if len(final) == 0 {
				return nil, false
			}
			v := final[s.rng.IntN(len(final))]
			return slices.Insert(final, s.rng.IntN(len(final)+1), v), true
		}},
		{"change", func(s *sim, start uint64, final []string) ([]string, bool) {
			if len(final) == 0 {
				return nil, false
			}
			final[s.rng.IntN(len(final))] = "ghost"
			return final, true
		}},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			tried := 0
			for seed := range uint64(200) {
				s := simulate(seed, 200)
				start, final := s.final()
				final, ok := m.mutate(s, start, final)
				if !ok {
					continue
				}
				tried++
				s.h.Final("l", start, final)
				if rep := s.h.Check(); rep.Anomalies() == 0 {
					t.Fatalf("seed %d: the mutation is not flagged:\n%s", seed, rep)
				}
			}
			if tried < 150 {
				t.Errorf("the mutation applied to %d histories of 200", tried)
			}
		})
	}
}

// ackedIndex returns the index in final of a random acknowledged value at
// an offset of at least from.
func (s *sim) ackedIndex(start uint64, final []string, from uint64) (int, bool) {
	var idx []int
	for i, v := range final {
		if s.acked[v] && start+uint64(i) >= from {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return 0, false
	}
	return idx[s.rng.IntN(len(idx))], true
}

// TestLarge checks a long simulated history.
func TestLarge(t *testing.T) {
	n := 300_000
	if testing.Short() {
		n = 50_000
	}
	s := simulate(1, n)
	start, final := s.final()
	s.h.Final("l", start, final)
	began := time.Now()
	rep := s.h.Check()
	t.Logf("checked in %v:\n%s", time.Since(began), rep)
	if rep.Anomalies() != 0 {
		t.Fatalf("a valid history has anomalies:\n%s", rep)
	}
}
