// Package loadgen is the load generator behind `tern bench` and behind every
// peer driver in bench/peers: the same workloads, the same clock and the same
// histograms for every system, so that their figures can stand side by side.
//
// A system under test implements Target (and, for pipelined appends and
// reads, AsyncAppender and Reader). Run drives it through a Spec and returns
// a Result, which is also the JSON line every driver prints; bench/report
// turns a file of them into docs/benchmarks.md.
//
// Latency is measured open-loop when Spec.Rate is set: each append has an
// intended start time on a fixed schedule, and when the target has held
// the producer back past it, latency runs from that time, not from when the
// producer got round to it, so a stall shows up in every append it held
// back (no coordinated omission). A producer ahead of schedule sleeps, and
// its append starts when it wakes. Without a rate
// the load is closed-loop: each producer keeps Batch entries (or InFlight
// entries, asynchronously) in flight and latency runs from the call.
package loadgen

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Kind names what a workload measures.
type Kind string

const (
	// KindAppend measures appends until they are acknowledged.
	KindAppend Kind = "append"
	// KindEndToEnd measures from an append's intended start to its delivery
	// to a reader that follows the tail. It needs Spec.Rate.
	KindEndToEnd Kind = "e2e"
	// KindCatchUp appends Spec.TotalBytes first, untimed, then measures a
	// reader that reads all of it from the start.
	KindCatchUp Kind = "catchup"
	// KindPubSub publishes Spec.Count entries, then consumes them all from
	// the start, timing each half: the table Milvus used to compare NATS
	// with RocksMQ.
	KindPubSub Kind = "pubsub"
	// KindFailover is not run by Run: tern bench failover kills the node
	// that serves a log, Count times, under a steady append, and times
	// each kill to the next append acknowledged.
	KindFailover Kind = "failover"
)

// Spec is a workload. The zero values of the optional fields take the
// defaults that Normalize fills in.
type Spec struct {
	// Name is the preset's name, or "custom".
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	// EntryBytes is the payload size of every entry.
	EntryBytes int `json:"entry_bytes"`
	// Payload is what the payloads hold: PayloadRandom ("" too), bytes
	// no compression shrinks, or PayloadJSON, JSON-like text.
	Payload string `json:"payload,omitempty"`
	// Batch is the number of entries per Append call (default 1).
	Batch int `json:"batch"`
	// Producers is the number of goroutines appending (default 1). Closed-loop
	// synchronous producers each have one Append in flight.
	Producers int `json:"producers"`
	// InFlight, when positive, makes each producer append asynchronously
	// with up to InFlight entries unacknowledged (the target must be an
	// AsyncAppender). Zero means synchronous Append calls.
	InFlight int `json:"in_flight"`
	// Rate, when positive, is the open-loop arrival rate in Append calls
	// (or asynchronous entries) per second over all producers.
	Rate float64 `json:"rate"`
	// Logs spreads producers over this many logs (topics, streams), producer
	// i appending to log i mod Logs (default 1).
	Logs int `json:"logs"`
	// Duration is the measured time of append and e2e workloads; Warmup runs
	// the same load before it, unmeasured.
	Duration time.Duration `json:"duration"`
	Warmup   time.Duration `json:"warmup"`
	// TotalBytes is what a catch-up workload writes and then reads.
	TotalBytes int64 `json:"total_bytes,omitempty"`
	// Count is the number of entries of a pubsub round.
	Count int `json:"count,omitempty"`
}

// DefaultDuration is the measured time of a Spec that names none.
const DefaultDuration = 10 * time.Second

// Normalize fills in defaults and reports a spec that cannot run.
func (s Spec) Normalize() (Spec, error) {
	if s.Name == "" {
		s.Name = "custom"
	}
	if s.Kind == "" {
		s.Kind = KindAppend
	}
	s.Batch = max(s.Batch, 1)
	s.Producers = max(s.Producers, 1)
	s.Logs = max(s.Logs, 1)
	if s.Duration == 0 {
		s.Duration = DefaultDuration
	}
	switch {
	case !slices.Contains([]Kind{KindAppend, KindEndToEnd, KindCatchUp, KindPubSub, KindFailover}, s.Kind):
		return s, fmt.Errorf("loadgen: unknown workload kind %q (want append, e2e, catchup, pubsub or failover)", s.Kind)
	case s.Payload != "" && s.Payload != PayloadRandom && s.Payload != PayloadJSON:
		return s, fmt.Errorf("loadgen: payload %q: use random or json", s.Payload)
	case s.EntryBytes < 0 || s.InFlight < 0 || s.Rate < 0 || s.Duration < 0 || s.Warmup < 0:
		return s, fmt.Errorf("loadgen: negative figures in workload %q", s.Name)
	case s.Kind == KindEndToEnd && s.Rate == 0:
		return s, fmt.Errorf("loadgen: workload %q: an end-to-end workload needs a rate", s.Name)
	case s.Kind == KindEndToEnd && s.EntryBytes < stampBytes:
		return s, fmt.Errorf("loadgen: workload %q: end-to-end entries carry a %d-byte timestamp, so need at least %d bytes", s.Name, stampBytes, stampBytes)
	case s.Kind == KindCatchUp && (s.TotalBytes <= 0 || s.EntryBytes == 0):
		return s, fmt.Errorf("loadgen: workload %q: a catch-up workload needs total bytes and an entry size", s.Name)
	case s.InFlight > 0 && s.Batch > 1:
		return s, fmt.Errorf("loadgen: workload %q: asynchronous appends are of one entry each, so batch must be 1", s.Name)
	case (s.Kind == KindCatchUp || s.Kind == KindPubSub) && s.Logs > 1:
		return s, fmt.Errorf("loadgen: workload %q: a %s workload uses one log", s.Name, s.Kind)
	case s.Kind == KindPubSub && s.Count <= 0:
		return s, fmt.Errorf("loadgen: workload %q: a pubsub round needs a count", s.Name)
	}
	return s, nil
}

// Presets are the workloads of the side-by-side comparison (bench/run.sh).
// Every driver runs them by name, so every system gets the same load.
var Presets = map[string]Spec{
	// One producer, one 1 KiB append in flight: latency of a durable append.
	"sync-1k": {Kind: KindAppend, EntryBytes: 1 << 10, Producers: 1},
	// 64 producers with one append each in flight: group commit.
	"conc-1k":  {Kind: KindAppend, EntryBytes: 1 << 10, Producers: 64},
	"conc-4k":  {Kind: KindAppend, EntryBytes: 4 << 10, Producers: 64},
	"conc-64k": {Kind: KindAppend, EntryBytes: 64 << 10, Producers: 64},
	// Small entries, pipelined: entries per second.
	"async-100b": {Kind: KindAppend, EntryBytes: 100, Producers: 1, InFlight: 10_000},
	// Read 1 GiB from the start of a log. With tern bench --storage, from the
	// object store (but for the last 16 MiB, which the writer keeps in
	// memory): against raw GETs of 4 MiB, 4 at a time.
	"catchup-1g": {Kind: KindCatchUp, EntryBytes: 64 << 10, TotalBytes: 1 << 30},
	// 1 KiB at a steady 1,000 entries/s, delivered to a tail reader. The
	// producer pipelines, so that the rate holds whatever one append takes.
	"e2e-1k": {Kind: KindEndToEnd, EntryBytes: 1 << 10, Rate: 1000, InFlight: 64},
	// The same at 10,000 entries/s: the server's tail latency under load.
	"e2e-10k": {Kind: KindEndToEnd, EntryBytes: 1 << 10, Rate: 10_000, InFlight: 64},
	// Logs in object storage (tern bench --storage). 64 KiB entries pipelined
	// deep enough (32 MiB) to keep 4 uploads of 4 MiB busy, so that every
	// fragment fills to the flush size: throughput against raw PUTs of 4 MiB,
	// 4 at a time.
	"obj-put": {Kind: KindAppend, EntryBytes: 64 << 10, Producers: 1, InFlight: 512},
	// 1 KiB at a steady 1,000 entries/s: a log below its uploads in flight
	// uploads each append as it comes; latency against a raw PUT of one
	// append, one at a time.
	"obj-1k": {Kind: KindAppend, EntryBytes: 1 << 10, Rate: 1000, InFlight: 64},
	// Logs in quorum mode, on a cluster of tern serve nodes on this machine
	// (tern bench --cluster): one 1 KiB append in flight, the latency of
	// an append held by 2 of 3 replicas; and 64 KiB entries pipelined
	// 32 MiB deep, the throughput against the disk's bandwidth shared by
	// the replicas that write to it.
	"quorum-1k":  {Kind: KindAppend, EntryBytes: 1 << 10, Producers: 1},
	"quorum-put": {Kind: KindAppend, EntryBytes: 64 << 10, Producers: 1, InFlight: 512},
	// Milvus's NATS-versus-RocksMQ rounds.
	"pubsub-5m":  {Kind: KindPubSub, EntryBytes: 5_000_000, Count: 100, InFlight: 64},
	"pubsub-1m":  {Kind: KindPubSub, EntryBytes: 1_000_000, Count: 500, InFlight: 64},
	"pubsub-64k": {Kind: KindPubSub, EntryBytes: 64_000, Count: 10_000, InFlight: 64},
	"pubsub-1k":  {Kind: KindPubSub, EntryBytes: 1_000, Count: 50_000, InFlight: 64},
}

// Preset returns the named preset, normalized.
func Preset(name string) (Spec, error) {
	s, ok := Presets[name]
	if !ok {
		return Spec{}, fmt.Errorf("loadgen: no workload %q (want one of %v)", name, PresetNames())
	}
	s.Name = name
	return s.Normalize()
}

// PresetNames lists the presets in a stable order.
func PresetNames() []string {
	var names []string
	for n := range Presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// The payloads a workload may append (Spec.Payload).
const (
	PayloadRandom = "random"
	PayloadJSON   = "json"
)

// fillJSON fills p with JSON-like records, one after the other: the kind
// of text many logs carry (field names repeat, values vary), which
// general-purpose compressors shrink about 3 to 6 times.
func fillJSON(p []byte, r *rand.Rand) {
	ops := []string{"insert", "upsert", "delete", "flush"}
	var buf []byte
	for i := 0; len(buf) < len(p); i++ {
		buf = fmt.Appendf(buf, `{"id":%d,"collection":"c%d","op":%q,"ts":%d,"user":"user-%04d","vector":[%.4f,%.4f,%.4f,%.4f],"tags":["t%d","t%d"]}`+"\n",
			i, r.IntN(8), ops[r.IntN(len(ops))], 1_700_000_000_000+i*37, r.IntN(5000),
			r.Float64(), r.Float64(), r.Float64(), r.Float64(), r.IntN(20), r.IntN(20))
	}
	copy(p, buf)
}
