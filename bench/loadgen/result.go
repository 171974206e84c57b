package loadgen

import (
	"encoding/json"
	"io"
	"time"
)

// Result is what one run measured. It is also the JSON line (one object per
// line) that `tern bench --json` and every peer driver write, so its field
// names are a contract with bench/report and with the non-Go drivers.
type Result struct {
	// System is who was measured: "tern", "kafka", "nats", "woodpecker",
	// "walrus", "rocksdb", "pulsar", or a baseline: "disk", "s3".
	System string `json:"system"`
	// Variant says how: "durable" (acknowledged means fsynced, Tern's
	// default), "default" (the system's own default), or for a baseline
	// what it did ("write+fdatasync", "o_direct+fdatasync", ...).
	Variant  string `json:"variant"`
	Workload string `json:"workload"`
	Spec     Spec   `json:"spec"`
	// Version of the system measured.
	Version string    `json:"version,omitempty"`
	Started time.Time `json:"started"`
	// Seconds is the measured wall time.
	Seconds float64 `json:"seconds"`
	// Entries and Bytes acknowledged (or read, for catchup) in it.
	Entries       int64   `json:"entries"`
	Bytes         int64   `json:"bytes"`
	MBPerSec      float64 `json:"mb_per_s"` // 1 MB = 10^6 bytes
	EntriesPerSec float64 `json:"entries_per_s"`
	// Latency of the measured operations, in microseconds.
	Latency Latency `json:"latency_us"`
	// Percentiles is the latency distribution for plots: percentile (0-100)
	// and latency in microseconds, logarithmically spaced toward the tail.
	Percentiles [][2]float64 `json:"percentiles,omitempty"`
	// CPUSeconds (user + system) and PeakRSSBytes are those of the process
	// under test during the measured part: the server for a client/server
	// system, else the driver itself (which then includes the generator).
	CPUSeconds   float64 `json:"cpu_s"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	// StorageBytes is the space the system's data directory took at the end.
	StorageBytes int64 `json:"storage_bytes,omitempty"`
	// Errors counts failed operations; FirstError is the first one's text.
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// Extra holds figures particular to a workload, such as "produce_s" and
	// "consume_s" of a pubsub round or "bytes_per_sync" of a baseline.
	Extra map[string]float64 `json:"extra,omitempty"`
	// Notes say what a reader of the figures should know (stalls seen, a
	// cache that could not be dropped, a setting that differs).
	Notes []string `json:"notes,omitempty"`
}

// SetExtra sets one of r.Extra's figures, keeping the others.
func (r *Result) SetExtra(name string, v float64) {
	if r.Extra == nil {
		r.Extra = map[string]float64{}
	}
	r.Extra[name] = v
}

// Latency summarises a latency histogram, in microseconds.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

// WriteJSON writes r as one line of JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	return json.NewEncoder(w).Encode(r)
}
