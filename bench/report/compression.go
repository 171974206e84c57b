package main

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ternwal/tern/bench/loadgen"
)

// compressionRun reports whether r belongs to the compression comparison:
// a run that named its payload (tern bench --payload random|json), which
// bench/run.sh gives only to those runs. They go in their own section, not
// in their workload's table, where a run of JSON-like text would replace
// the workload's own Tern row.
func compressionRun(r *loadgen.Result) bool { return r.Spec.Payload != "" }

// compressionRow is one run of the comparison, with its logical MB/s
// against the run without compression of the same log, workload and payload.
type compressionRow struct {
	*loadgen.Result
	log         string // "local" or "object"
	base        string // the variant without its compression
	compression string // "none", "zstd", "lz4"
	vsNone      float64
}

// compressionCodecs orders a group's rows.
var compressionCodecs = []string{"none", "lz4", "zstd"}

// buildCompression makes the comparison's rows out of results, in table
// order: local logs before object logs, then by workload, payload and
// compression. A later run of the same log, workload, payload and
// compression replaces an earlier one.
func buildCompression(results []*loadgen.Result) []*compressionRow {
	var rows []*compressionRow
	index := map[[4]string]int{}
	for _, r := range results {
		if !compressionRun(r) || r.System != "tern" {
			continue
		}
		c := &compressionRow{Result: r, log: "local", base: r.Variant, compression: "none"}
		if inObjectStorage(r) {
			c.log = "object"
		}
		for _, codec := range compressionCodecs[1:] {
			if b, ok := strings.CutSuffix(r.Variant, ", "+codec); ok {
				c.base, c.compression = b, codec
			}
		}
		key := [4]string{c.base, r.Workload, r.Spec.Payload, c.compression}
		if i, ok := index[key]; ok {
			rows[i] = c
			continue
		}
		index[key] = len(rows)
		rows = append(rows, c)
	}
	slices.SortStableFunc(rows, func(a, b *compressionRow) int {
		return cmp.Or(cmp.Compare(a.log, b.log), cmp.Compare(a.Workload, b.Workload), cmp.Compare(a.base, b.base),
			cmp.Compare(a.Spec.Payload, b.Spec.Payload),
			cmp.Compare(slices.Index(compressionCodecs, a.compression), slices.Index(compressionCodecs, b.compression)))
	})
	for _, c := range rows {
		c.vsNone = math.NaN()
		i := slices.IndexFunc(rows, func(n *compressionRow) bool {
			return n.compression == "none" && n.base == c.base && n.Workload == c.Workload && n.Spec.Payload == c.Spec.Payload
		})
		if i >= 0 {
			c.vsNone = mbs.ratio(c.Result, rows[i].Result)
		}
	}
	return rows
}

// writeCompression writes the compression section, if there were such runs.
func (rep *report) writeCompression(b *bytes.Buffer) {
	if len(rep.compression) == 0 {
		return
	}
	b.WriteString("## Compression\n\n")
	b.WriteString("Tern's logs with each compression (`tern bench --payload P --compression C`), on entries of JSON-like text " +
		"(json) and of random bytes (random). MB/s are logical: the bytes appended. Stored/logical is the log's stored bytes " +
		"(`bytes` of `tern log describe`) per byte appended, at the end of the run; vs none is the logical MB/s against the same " +
		"log's run without compression on the same payload (above 1: faster).\n\n")
	b.WriteString("| log | workload | payload | compression | logical MB/s | stored/logical | vs none | p50 | p99 | CPU s | errors |\n" +
		"|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range rep.compression {
		stored := "-"
		if v, ok := c.Extra["stored_per_logical"]; ok && v > 0 {
			stored = fmt.Sprintf("%.3f", v)
		}
		name := c.base // "object 4MiB/20ms x4"
		if c.log == "local" {
			name = "local (" + c.base + ")"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %d |\n",
			cell(name), cell(c.Workload), cell(c.Spec.Payload), c.compression, number(c.MBPerSec), stored,
			ratio(c.vsNone), loadgen.Micros(c.Latency.P50), loadgen.Micros(c.Latency.P99), c.CPUSeconds, c.Errors)
	}
	b.WriteString("\n")
	var specs []string
	for _, c := range rep.compression {
		s := fmt.Sprintf("%s: %s", c.Workload, describeSpec(c.Spec))
		specs = appendIf(specs, !slices.Contains(specs, s), s)
	}
	for _, s := range specs {
		fmt.Fprintf(b, "- %s.\n", s)
	}
	b.WriteString("\n")
}
