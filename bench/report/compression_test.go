package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ternwal/tern/bench/loadgen"
)

// The compression runs get a section of their own, each against the run
// without compression of the same log and payload, and stay out of their
// workload's table, whose Tern row is the run without --payload.
func TestCompressionSection(t *testing.T) {
	spec := func(payload string) loadgen.Spec {
		s, err := loadgen.Preset("conc-4k")
		if err != nil {
			t.Fatal(err)
		}
		s.Payload = payload
		return s
	}
	stored := func(v float64) map[string]float64 { return map[string]float64{"stored_per_logical": v} }
	const obj = "object 4MiB/20ms x4"
	results := []*loadgen.Result{
		{System: "tern", Variant: "durable", Workload: "conc-4k", Spec: spec(""), MBPerSec: 150, Extra: stored(1)},
		{System: "tern", Variant: "durable", Workload: "conc-4k", Spec: spec("json"), MBPerSec: 200, Extra: stored(1)},
		{System: "tern", Variant: "durable, zstd", Workload: "conc-4k", Spec: spec("json"), MBPerSec: 100, Extra: stored(0.209)},
		{System: "tern", Variant: "durable, lz4", Workload: "conc-4k", Spec: spec("json"), MBPerSec: 120, Extra: stored(0.315)},
		{System: "tern", Variant: "durable", Workload: "conc-4k", Spec: spec("random"), MBPerSec: 160, Extra: stored(1)},
		{System: "tern", Variant: "durable, lz4", Workload: "conc-4k", Spec: spec("random"), MBPerSec: 80, Extra: stored(1)},
		{System: "tern", Variant: obj + ", lz4", Workload: "obj-put", Spec: spec("json"), MBPerSec: 160, Extra: stored(0.296)},
		{System: "tern", Variant: obj, Workload: "obj-put", Spec: spec("json"), MBPerSec: 100, Extra: stored(1)},
	}
	var runs []*loadgen.Result
	for _, r := range results {
		if !compressionRun(r) {
			runs = append(runs, r)
		}
	}
	ws := buildWorkloads(runs, &Setup{})
	if len(ws) != 1 || len(ws[0].rows) != 1 || ws[0].rows[0].MBPerSec != 150 || len(ws[0].problems) != 0 {
		t.Fatalf("conc-4k's table is not the run without --payload: %+v", ws)
	}
	rep := &report{setup: &Setup{}, compression: buildCompression(results)}
	var b bytes.Buffer
	rep.writeCompression(&b)
	out := b.String()
	for _, c := range []struct {
		log, payload, compression string
		want                      []string // logical MB/s, stored/logical, vs none
	}{
		{"local (durable)", "json", "none", []string{"200", "1.000", "1.00"}},
		{"local (durable)", "json", "lz4", []string{"120", "0.315", "0.60"}},
		{"local (durable)", "json", "zstd", []string{"100", "0.209", "0.50"}},
		{"local (durable)", "random", "lz4", []string{"80.0", "1.000", "0.50"}},
		{obj, "json", "lz4", []string{"160", "0.296", "1.60"}},
	} {
		row := compressionCells(t, out, c.log, c.payload, c.compression)
		if got := row[4:7]; strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s %s %s: MB/s, stored/logical, vs none %q; want %q", c.log, c.payload, c.compression, got, c.want)
		}
	}
	// Local rows first, and none before lz4 before zstd.
	if i, j, k := strings.Index(out, "| local (durable) | conc-4k | json | none"), strings.Index(out, "| local (durable) | conc-4k | json | zstd"),
		strings.Index(out, "| object"); i < 0 || i > j || j > k {
		t.Errorf("rows out of order:\n%s", out)
	}
	if strings.Contains(out, "| random | zstd") {
		t.Errorf("a row that did not run:\n%s", out)
	}

	// No compression runs, no section.
	b.Reset()
	(&report{setup: &Setup{}}).writeCompression(&b)
	if b.Len() != 0 {
		t.Errorf("a section without runs:\n%s", b.String())
	}
}

// compressionCells returns the cells of the compression table's row.
func compressionCells(t *testing.T, text, log, payload, compression string) []string {
	t.Helper()
	for line := range strings.SplitSeq(text, "\n") {
		fields := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		if len(fields) > 6 && fields[0] == log && fields[2] == payload && fields[3] == compression {
			return fields
		}
	}
	t.Fatalf("no row %s %s %s in:\n%s", log, payload, compression, text)
	return nil
}

// Tern's obj-1k rows give their p50 and p99 as multiples of the PUT row's,
// which is how the targets are put.
func TestObjectLatencyRatios(t *testing.T) {
	s, err := loadgen.Preset("obj-1k")
	if err != nil {
		t.Fatal(err)
	}
	const obj = "object 4MiB/20ms x4"
	results := []*loadgen.Result{
		{System: "s3", Variant: "put", Workload: "obj-1k", Spec: loadgen.Spec{EntryBytes: 1 << 10, Producers: 1}, Latency: loadgen.Latency{P50: 900, P99: 5000}},
		{System: "tern", Variant: obj, Workload: "obj-1k", Spec: s, Latency: loadgen.Latency{P50: 1350, P99: 12000}},
	}
	ws := buildWorkloads(results, &Setup{})
	var b bytes.Buffer
	(&report{setup: &Setup{}}).writeWorkload(&b, ws[0])
	want := "- Tern `" + obj + "`: p50 1.35ms, 1.50x the `put` row's 900µs; p99 12.0ms, 2.40x its 5.00ms\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("the obj-1k section lacks %q:\n%s", want, b.String())
	}
	// With the store's PUTs at the workload's rate beside it, the line
	// adds the ratios to that bare path.
	results = append(results, &loadgen.Result{System: "s3", Variant: "put 1000/s x4, in order", Workload: "obj-1k",
		Spec: loadgen.Spec{EntryBytes: 1 << 10, Producers: 1, Rate: 1000, InFlight: 4}, Latency: loadgen.Latency{P50: 1000, P99: 8000}})
	ws = buildWorkloads(results, &Setup{})
	b.Reset()
	(&report{setup: &Setup{}}).writeWorkload(&b, ws[0])
	want = "- Tern `" + obj + "`: p50 1.35ms, 1.50x the `put` row's 900µs; p99 12.0ms, 2.40x its 5.00ms; " +
		"against the `put 1000/s x4, in order` row (the same PUTs due at the workload's rate, acknowledged in order): " +
		"p50 1.35x its 1.00ms, p99 1.50x its 8.00ms\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("the obj-1k section lacks %q:\n%s", want, b.String())
	}
	// A throughput workload has no such lines.
	if lines := objectLatency(&workload{s3Limit: ws[0].s3Limit, vsLimit: mbs}); lines != nil {
		t.Errorf("lines for a throughput workload: %q", lines)
	}
}
