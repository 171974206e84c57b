package check

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// A Kind is a kind of anomaly: a way the history contradicts Tern's
// promises.
type Kind int

const (
	// LostPrefix, LostMiddle and LostSuffix count acknowledged values missing
	// from the final read, values a reader saw that it does not have, and
	// values of a batch it has in part, unless an acknowledged truncation
	// covers their offset. They
	// are split by where the offset sits among the acknowledged values that
	// are present: below the lowest (or below the final read's start),
	// between, or above the highest (or anywhere, if none is present).
	LostPrefix Kind = iota
	LostMiddle
	LostSuffix
	// Duplicated counts values read at two different offsets, in the final
	// read or by readers.
	Duplicated
	// Reordered counts appends acknowledged (or found in the final read) at
	// an offset below that of an append acknowledged before they were
	// invoked, and streams that skip or step back.
	Reordered
	// Inconsistent counts offsets at which two different values were read or
	// acknowledged: by two readers, a reader and the final read, an
	// acknowledgement and a read, or two acknowledgements.
	Inconsistent
	// Unexpected counts values read that were never invoked, and values read
	// at an offset other than the one their acknowledgement (or, for an
	// append with no acknowledgement, the rest of their batch) puts them at.
	Unexpected
	// FailedSurfaced counts values of appends recorded as failed that were
	// read: a definite failure took effect.
	FailedSurfaced
	// CursorBackwards counts committed cursors observed below an earlier
	// observation, and subscribers that resumed below the committed cursor.
	CursorBackwards
	// FencedAcked counts appends acknowledged although a newer epoch had
	// fenced their writer.
	FencedAcked

	numKinds = iota
)

var kindNames = [numKinds]string{
	LostPrefix:      "lost-prefix",
	LostMiddle:      "lost-middle",
	LostSuffix:      "lost-suffix",
	Duplicated:      "duplicated",
	Reordered:       "reordered",
	Inconsistent:    "inconsistent",
	Unexpected:      "unexpected",
	FailedSurfaced:  "failed-surfaced",
	CursorBackwards: "cursor-backwards",
	FencedAcked:     "fenced-acked",
}

func (k Kind) String() string {
	if k < 0 || k >= numKinds {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// MaxExamples is how many examples a Report keeps of each kind: the first in
// the order of log, offset, value and description.
const MaxExamples = 10

// An Example is one anomaly.
type Example struct {
	Log    string
	Offset uint64
	Value  string // empty when the anomaly is not about one value
	Op     string // what was recorded, and what contradicts it
}

func (e Example) String() string {
	if e.Value == "" {
		return fmt.Sprintf("log %q offset %d: %s", e.Log, e.Offset, e.Op)
	}
	return fmt.Sprintf("log %q offset %d value %q: %s", e.Log, e.Offset, e.Value, e.Op)
}

func (e Example) compare(f Example) int {
	return cmp.Or(
		strings.Compare(e.Log, f.Log),
		cmp.Compare(e.Offset, f.Offset),
		strings.Compare(e.Value, f.Value),
		strings.Compare(e.Op, f.Op),
	)
}

// A Report is the result of a check: the anomalies, by kind, and counts that
// describe the history. The same history, recorded in the same logical
// order, always gives the same report.
type Report struct {
	Invoked  int // appends invoked
	OK       int // appends acknowledged
	Failed   int // appends that failed definitely
	Unknown  int // appends whose outcome is unknown, or that never completed
	Surfaced int // appends of unknown outcome found in the final read

	Reads        int      // entries delivered to readers, all checked
	FinalEntries int      // entries in the final reads
	Truncated    int      // acknowledged values missing from the final read because a truncation covered them
	NoFinal      []string // logs with no final read: nothing was checked against one

	counts   [numKinds]int
	examples [numKinds][]Example
}

// Count returns how many anomalies of kind k the check found.
func (r *Report) Count(k Kind) int { return r.counts[k] }

// Examples returns up to MaxExamples anomalies of kind k.
func (r *Report) Examples(k Kind) []Example { return r.examples[k] }

// Anomalies returns how many anomalies the check found in all: zero means
// the history is valid.
func (r *Report) Anomalies() int {
	n := 0
	for _, c := range r.counts {
		n += c
	}
	return n
}

// add counts an anomaly of kind k, and keeps it as an example if it is among
// the first MaxExamples. op describes it, and is called only for an example
// that may be kept: a check that finds millions of anomalies formats few.
func (r *Report) add(k Kind, log string, offset uint64, v string, op func() string) {
	r.counts[k]++
	ex := r.examples[k]
	e := Example{Log: log, Offset: offset, Value: v}
	if len(ex) == MaxExamples && e.compare(ex[MaxExamples-1]) > 0 {
		return
	}
	e.Op = op()
	i, _ := slices.BinarySearchFunc(ex, e, Example.compare)
	if i == MaxExamples {
		return
	}
	ex = slices.Insert(ex, i, e)
	if len(ex) > MaxExamples {
		ex = ex[:MaxExamples]
	}
	r.examples[k] = ex
}

// String summarises the report: the count of each kind of anomaly, the
// counts that describe the history, then the examples.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d anomalies\n", r.Anomalies())
	for k := range Kind(numKinds) {
		fmt.Fprintf(&b, "  %-17s %d\n", k.String()+":", r.counts[k])
	}
	fmt.Fprintf(&b, "appends: %d invoked, %d ok, %d failed, %d unknown (%d surfaced in the final read)\n",
		r.Invoked, r.OK, r.Failed, r.Unknown, r.Surfaced)
	fmt.Fprintf(&b, "reads checked: %d; final entries: %d; truncated: %d\n", r.Reads, r.FinalEntries, r.Truncated)
	if len(r.NoFinal) > 0 {
		fmt.Fprintf(&b, "logs with no final read: %s\n", strings.Join(r.NoFinal, ", "))
	}
	for k := range Kind(numKinds) {
		if r.counts[k] == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s:\n", k)
		for _, e := range r.examples[k] {
			fmt.Fprintf(&b, "  %s\n", e)
		}
		if more := r.counts[k] - len(r.examples[k]); more > 0 {
			fmt.Fprintf(&b, "  ... and %d more\n", more)
		}
	}
	return b.String()
}
