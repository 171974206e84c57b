package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ternwal/tern/bench/loadgen"
)

// group is where a row stands in a workload's table, in table order.
type group int

const (
	groupLimit   group = iota // a physical limit: "disk", "s3"
	groupTern                 // Tern with its default durability
	groupDurable              // a peer acknowledging only what is fsynced
	groupOther                // everything else: not durable at acknowledgement
)

var groupTitles = map[group]string{
	groupLimit:   "physical limit",
	groupDurable: "durable at acknowledgement",
	groupOther:   "not durable at acknowledgement",
}

// row is one result in a workload's table, with its ratios (NaN when there
// is nothing to compare with).
type row struct {
	*loadgen.Result
	group   group
	limit   *row // the limit row vsLimit is against, if any
	vsLimit float64
	vsTern  float64
}

func (r *row) label() string { return r.System + " " + r.Variant }

// measure is one figure of a result and which way is better.
type measure struct {
	name        string
	lowerBetter bool
	value       func(*loadgen.Result) float64
}

var (
	p50 = measure{"p50 latency", true, func(r *loadgen.Result) float64 { return r.Latency.P50 }}
	p99 = measure{"p99 latency", true, func(r *loadgen.Result) float64 { return r.Latency.P99 }}
	mbs = measure{"MB/s", false, func(r *loadgen.Result) float64 { return r.MBPerSec }}
	eps = measure{"entries/s", false, func(r *loadgen.Result) float64 { return r.EntriesPerSec }}
	// produceMBs is a pubsub round's publishing rate; a limit row has no
	// round, so its own MB/s stands in.
	produceMBs = measure{"produce MB/s", false, func(r *loadgen.Result) float64 {
		if s := r.Extra["produce_s"]; s > 0 {
			return float64(r.Bytes) / 1e6 / s
		}
		return r.MBPerSec
	}}
	roundTime = measure{"round time", true, func(r *loadgen.Result) float64 {
		if r.Extra["produce_s"] > 0 {
			return r.Seconds
		}
		return 0
	}}
)

// ratio says how x does against ref: above 1 is better, whichever way the
// measure goes; NaN when either is missing.
func (m measure) ratio(x, ref *loadgen.Result) float64 {
	if x == nil || ref == nil {
		return math.NaN()
	}
	a, b := m.value(x), m.value(ref)
	if a <= 0 || b <= 0 {
		return math.NaN()
	}
	if m.lowerBetter {
		return b / a
	}
	return a / b
}

// workload is one section of the report.
type workload struct {
	name     string
	spec     loadgen.Spec // the spec Tern (or else the first system) ran
	rows     []*row       // in table order
	limit    *row         // the limit row the ratios use, if any
	s3Limit  *row         // the limit row of Tern's object-storage rows, if any
	s3Rated  *row         // the object store's PUTs at a rated workload's rate, in order, if any
	tern     *row         // Tern's durable row (else its object-storage row), if any
	limitVar string       // the disk variant that is this workload's limit
	vsLimit  measure      // what "vs limit" compares
	headline measure      // what "vs Tern" and "Where Tern is behind" compare
	problems []string     // superseded results, specs that differ
}

// measures returns which disk variant limits a workload, what "vs limit"
// compares and the workload's headline figure.
func measures(s loadgen.Spec) (limit string, vsLimit, headline measure) {
	switch {
	case s.Kind == loadgen.KindFailover:
		return "", p50, p50 // no physical limit: the nodes' lease bounds it
	case s.Kind == loadgen.KindCatchUp:
		return "o_direct read", mbs, mbs
	case s.Kind == loadgen.KindPubSub:
		return "write+fdatasync", produceMBs, roundTime
	case s.Kind == loadgen.KindEndToEnd, s.Rate > 0:
		return "write+fdatasync", p50, p99
	case s.InFlight > 0:
		return "write+fdatasync", mbs, eps
	case s.Producers > 1:
		return "write+fdatasync", mbs, mbs
	default:
		return "write+fdatasync", p50, p50
	}
}

// workloadOrder is the order of the sections; other workloads follow, by name.
var workloadOrder = []string{"sync-1k", "conc-1k", "conc-4k", "conc-64k", "async-100b", "catchup-1g", "e2e-1k", "e2e-10k",
	"pubsub-5m", "pubsub-1m", "pubsub-64k", "pubsub-1k", "quorum-1k", "quorum-put", "failover"}

func orderKey(name string) (int, string) {
	if i := slices.Index(workloadOrder, name); i >= 0 {
		return i, ""
	}
	if strings.HasPrefix(name, "pubsub-") {
		return len(workloadOrder), name
	}
	return len(workloadOrder) + 1, name
}

// classify puts a result in its group. A variant "durable" or "durable, ..."
// (durable with a setting or a load of its own: "durable, zstd") acknowledges
// only fsynced entries; durableAtAck lists, per system, the other variants
// that do.
func classify(r *loadgen.Result, durableAtAck map[string][]string) group {
	switch {
	case r.System == "disk" || r.System == "s3":
		return groupLimit
	case r.System == "tern" && r.Variant == "durable":
		return groupTern
	case inObjectStorage(r):
		return groupDurable // acknowledged once the store has the object
	case inQuorum(r):
		return groupDurable // acknowledged once the ack quorum has it on disk
	case strings.Contains(r.Variant, "(unsafe)"):
		return groupOther
	case r.Variant == "durable" || strings.HasPrefix(r.Variant, "durable, ") ||
		slices.Contains(durableAtAck[r.System], r.Variant):
		return groupDurable
	}
	return groupOther
}

// inObjectStorage reports whether r is of Tern's logs in object storage
// (tern bench --storage), which are held against the object store's limit,
// not the disk's.
func inObjectStorage(r *loadgen.Result) bool {
	return r.System == "tern" && strings.HasPrefix(r.Variant, "object ")
}

// inQuorum reports whether r is of Tern's logs in quorum mode, on a
// cluster (tern bench --cluster, tern bench failover).
func inQuorum(r *loadgen.Result) bool {
	return r.System == "tern" && strings.HasPrefix(r.Variant, "quorum ")
}

// replicasPerDisk is how many replicas of r's log write to the one disk
// (1 unless r says otherwise): a rate is held against the disk's
// bandwidth shared among them.
func replicasPerDisk(r *loadgen.Result) float64 {
	return max(r.Extra["replicas_per_disk"], 1)
}

// share is the rates of limit divided among n replicas.
func share(limit *loadgen.Result, n float64) *loadgen.Result {
	return &loadgen.Result{MBPerSec: limit.MBPerSec / n, EntriesPerSec: limit.EntriesPerSec / n}
}

// buildWorkloads groups results by workload, in report order. A later
// result of the same system, variant and workload replaces an earlier one.
func buildWorkloads(results []*loadgen.Result, setup *Setup) []*workload {
	byName := map[string]*workload{}
	index := map[[3]string]int{}
	for _, r := range results {
		w := byName[r.Workload]
		if w == nil {
			w = &workload{name: r.Workload}
			byName[r.Workload] = w
		}
		row := &row{Result: r, group: classify(r, setup.DurableAtAck)}
		if p, ok := loadgen.Presets[r.Workload]; ok && r.Spec.Logs > max(p.Logs, 1) {
			// The same system spread over more logs (walrus on 64 topics)
			// is a row of its own.
			r.Variant = fmt.Sprintf("%s, %d logs", r.Variant, r.Spec.Logs)
		}
		key := [3]string{r.Workload, r.System, r.Variant}
		if i, ok := index[key]; ok {
			w.rows[i] = row
			if p := fmt.Sprintf("%s %s: a later result in the file replaced an earlier one", r.System, r.Variant); !slices.Contains(w.problems, p) {
				w.problems = append(w.problems, p)
			}
			continue
		}
		index[key] = len(w.rows)
		w.rows = append(w.rows, row)
	}
	var ws []*workload
	for _, w := range byName {
		w.finish()
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b *workload) int {
		ai, an := orderKey(a.name)
		bi, bn := orderKey(b.name)
		return cmp.Or(cmp.Compare(ai, bi), cmp.Compare(an, bn))
	})
	return ws
}

// finish sorts a workload's rows, picks its limit and Tern rows, computes
// the ratios and notes specs that differ from the reference one.
func (w *workload) finish() {
	w.spec = w.rows[0].Spec
	for _, r := range w.rows {
		if r.group == groupTern {
			w.tern = r
			w.spec = r.Spec
		}
	}
	if w.tern == nil {
		for _, r := range w.rows {
			if inObjectStorage(r.Result) || inQuorum(r.Result) {
				w.tern = r
				break
			}
		}
	}
	if w.tern != nil {
		w.spec = w.tern.Spec
	} else {
		for _, r := range w.rows {
			if r.group != groupLimit {
				w.spec = r.Spec
				break
			}
		}
	}
	w.limitVar, w.vsLimit, w.headline = measures(w.spec)
	s3Var := "put"
	if w.spec.Kind == loadgen.KindCatchUp {
		s3Var = "get, cold" // distinct objects read once, as a catch-up does
	}
	objects := slices.ContainsFunc(w.rows, func(r *row) bool { return inObjectStorage(r.Result) })
	for _, r := range w.rows {
		switch {
		case r.System == "disk" && r.Variant == w.limitVar:
			w.limit = r
		case r.System == "s3" && r.Variant == s3Var && objects:
			w.s3Limit = r
		case r.System == "s3" && strings.HasSuffix(r.Variant, ", in order") && objects:
			w.s3Rated = r
		}
	}
	slices.SortFunc(w.rows, func(a, b *row) int {
		return cmp.Or(cmp.Compare(a.group, b.group),
			-cmp.Compare(bool2int(a == w.limit), bool2int(b == w.limit)),
			-cmp.Compare(bool2int(a.System == "tern"), bool2int(b.System == "tern")),
			cmp.Compare(a.System, b.System),
			-cmp.Compare(bool2int(a.Variant == "durable"), bool2int(b.Variant == "durable")),
			cmp.Compare(a.Variant, b.Variant))
	})
	var ternRes *loadgen.Result
	if w.tern != nil {
		ternRes = w.tern.Result
	}
	for _, r := range w.rows {
		r.limit = w.limit
		if inObjectStorage(r.Result) || (r.System == "s3" && objects) {
			r.limit = w.s3Limit
		}
		r.vsLimit = math.NaN()
		if r.limit != nil {
			r.vsLimit = w.vsLimit.ratio(r.Result, r.limit.Result)
			if !w.vsLimit.lowerBetter {
				r.vsLimit *= replicasPerDisk(r.Result)
			}
		}
		r.vsTern = math.NaN()
		if r.group != groupLimit {
			r.vsTern = w.headline.ratio(r.Result, ternRes)
		}
		if r.group != groupLimit && !sameLoad(r.Spec, w.spec) {
			w.problems = append(w.problems, fmt.Sprintf("%s %s ran a different load: %s", r.System, r.Variant, describeSpec(r.Spec)))
		}
	}
}

// sameLoad reports whether two specs put the same load on a system
// (durations aside).
func sameLoad(a, b loadgen.Spec) bool {
	return a.Kind == b.Kind && a.EntryBytes == b.EntryBytes && a.Batch == b.Batch && a.Producers == b.Producers &&
		a.InFlight == b.InFlight && a.Rate == b.Rate && a.Logs == b.Logs && a.TotalBytes == b.TotalBytes && a.Count == b.Count
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// behind lists, for "Where Tern is behind", each durable peer that beats
// Tern's durable row on a workload's headline figure, and each workload
// where Tern is under 0.8 of the physical limit.
func behind(ws []*workload) []string {
	var out []string
	for _, w := range ws {
		if w.tern == nil {
			if slices.ContainsFunc(w.rows, func(r *row) bool { return r.group == groupDurable }) {
				out = append(out, fmt.Sprintf("**%s**: no result for Tern, so the peers could not be compared with it.", w.name))
			}
			continue
		}
		for _, r := range w.rows {
			if r.group != groupDurable || r.System == "tern" || !(r.vsTern > 1) {
				continue
			}
			if !sameLoad(r.Spec, w.tern.Spec) {
				out = append(out, fmt.Sprintf("**%s**: %s %s ran a different load from Tern's, so is not compared.", w.name, r.System, r.Variant))
				continue
			}
			s := fmt.Sprintf("**%s**: %s %s beats Tern on %s: %s against Tern's %s (vs Tern %s)",
				w.name, r.System, r.Variant, w.headline.name, formatMeasure(w.headline, r.Result),
				formatMeasure(w.headline, w.tern.Result), ratio(r.vsTern))
			if r.Errors > 0 {
				s += fmt.Sprintf(", with %d errors", r.Errors)
			}
			out = append(out, s+".")
		}
		for _, r := range w.rows {
			if (r != w.tern && !inObjectStorage(r.Result)) || !(r.vsLimit < 0.8) {
				continue
			}
			who := "Tern"
			if inObjectStorage(r.Result) {
				who = "Tern " + r.Variant
			}
			limit := fmt.Sprintf("%s for the %s's `%s`", formatMeasure(w.vsLimit, r.limit.Result), limitName[r.limit.System], r.limit.Variant)
			if n := replicasPerDisk(r.Result); n > 1 && !w.vsLimit.lowerBetter {
				limit = fmt.Sprintf("%s, the %s's `%s` (%s) divided by the %.0f replicas that write to it",
					formatMeasure(w.vsLimit, share(r.limit.Result, n)), limitName[r.limit.System], r.limit.Variant, formatMeasure(w.vsLimit, r.limit.Result), n)
			}
			out = append(out, fmt.Sprintf("**%s**: %s is at %s of the physical limit by %s: %s against %s.",
				w.name, who, ratio(r.vsLimit), w.vsLimit.name, formatMeasure(w.vsLimit, r.Result), limit))
		}
	}
	return out
}

// limitName names the system of a limit row in a sentence.
var limitName = map[string]string{"disk": "disk", "s3": "object store"}

// formatMeasure writes one figure of a result for people.
func formatMeasure(m measure, r *loadgen.Result) string {
	v := m.value(r)
	switch m.name {
	case p50.name, p99.name:
		return loadgen.Micros(v)
	case roundTime.name:
		return fmt.Sprintf("%.2f s", v)
	case eps.name:
		return thousands(v) + " entries/s"
	}
	return number(v) + " MB/s"
}
