package main

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ternwal/tern/bench/loadgen"
)

// generate runs the report on the fixture into dir and returns the markdown.
func generate(t *testing.T, dir string) string {
	t.Helper()
	c := config{
		results: "testdata/results.jsonl",
		setup:   "testdata/setup.json",
		notes:   "testdata/notes.md",
		out:     filepath.Join(dir, "benchmarks.md"),
		img:     filepath.Join(dir, "img"),
	}
	if err := run(c); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(c.out)
	if err != nil {
		t.Fatal(err)
	}
	return string(md)
}

// section returns the text of the "## name" section.
func section(t *testing.T, md, name string) string {
	t.Helper()
	_, s, ok := strings.Cut(md, "\n## "+name+"\n")
	if !ok {
		t.Fatalf("no section %q in:\n%s", name, md)
	}
	s, _, _ = strings.Cut(s, "\n## ")
	return s
}

// cells returns the cells of the table row of system and variant in text.
func cells(t *testing.T, text, system, variant string) []string {
	t.Helper()
	for line := range strings.SplitSeq(text, "\n") {
		fields := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		if len(fields) > 2 && fields[0] == system && fields[1] == variant {
			return fields
		}
	}
	t.Fatalf("no row %s %s in:\n%s", system, variant, text)
	return nil
}

func TestRatios(t *testing.T) {
	md := generate(t, t.TempDir())
	for _, c := range []struct {
		workload, system, variant string
		errors, vsLimit, vsTern   string
	}{
		// p50: limit 200µs, Tern 250µs.
		{"sync-1k", "disk", "write+fdatasync", "0", "1.00", "-"},
		{"sync-1k", "disk", "pwrite+fdatasync (preallocated)", "0", "1.33", "-"},
		{"sync-1k", "tern", "durable", "0", "0.80", "1.00"},
		{"sync-1k", "kafka", "durable", "0", "0.40", "0.50"},
		{"sync-1k", "nats", "durable", "0", "1.60", "2.00"},
		{"sync-1k", "kafka", "default", "0", "4.00", "5.00"},
		// MB/s: limit 200, Tern 150.
		{"conc-4k", "tern", "durable", "0", "0.75", "1.00"},
		{"conc-4k", "rocksdb", "durable", "0", "0.90", "1.20"},
		{"conc-4k", "walrus", "durable", "3", "0.10", "0.13"},
		// produce MB/s against the limit (50 of 100), round time against Tern (1.25 s).
		{"pubsub-1k", "tern", "durable", "0", "0.50", "1.00"},
		{"pubsub-1k", "nats", "durable", "0", "0.25", "0.50"},
		{"pubsub-5m", "nats", "durable", "0", "-", "1.50"},
	} {
		row := cells(t, section(t, md, c.workload), c.system, c.variant)
		n := len(row)
		if got := []string{row[n-3], row[n-2], row[n-1]}; !slices.Equal(got, []string{c.errors, c.vsLimit, c.vsTern}) {
			t.Errorf("%s %s %s: errors, vs limit, vs Tern = %q, want %q %q %q", c.workload, c.system, c.variant, got, c.errors, c.vsLimit, c.vsTern)
		}
	}
	// A throughput workload also gives Tern's ratio to each disk row.
	want := "Tern `durable` against each of the disk's rows (MB/s): 0.75x the `write+fdatasync` row, " +
		"0.94x the `write+fdatasync (new files)` row."
	if conc := section(t, md, "conc-4k"); !strings.Contains(conc, want) {
		t.Errorf("conc-4k lacks %q:\n%s", want, conc)
	}
	if sync := section(t, md, "sync-1k"); strings.Contains(sync, "against each of the disk's rows") {
		t.Errorf("a latency workload has the disk rows' ratios:\n%s", sync)
	}
	if row := cells(t, section(t, md, "pubsub-1k"), "tern", "durable"); row[2] != "50.0" {
		t.Errorf("pubsub-1k tern produce MB/s = %q, want 50.0 (bytes over produce_s)", row[2])
	}
}

func TestLayout(t *testing.T) {
	md := generate(t, t.TempDir())
	if !strings.HasPrefix(md, "# Benchmarks\n") || !strings.Contains(md, "`bench/run.sh quick` (minutes) or `bench/run.sh full`") {
		t.Errorf("the header does not say how to regenerate the file:\n%s", md[:min(len(md), 400)])
	}
	var order []int
	for _, name := range []string{"Setup", "sync-1k", "conc-4k", "pubsub-5m", "pubsub-1k", "Pub/sub rounds", "Where Tern is behind", "Why"} {
		order = append(order, strings.Index(md, "\n## "+name+"\n"))
	}
	if slices.Contains(order, -1) || !slices.IsSorted(order) {
		t.Errorf("sections missing or out of order: %v", order)
	}
	setup := section(t, md, "Setup")
	for _, want := range []string{"2026-11-22, profile quick", "Test CPU", "24 GiB", "| kafka | 4.3.1 | durable; default | default: no flush (page cache); durable: flush.messages=1, acks=all |"} {
		if !strings.Contains(setup, want) {
			t.Errorf("setup lacks %q:\n%s", want, setup)
		}
	}

	sync := section(t, md, "sync-1k")
	var at []int
	for _, l := range []string{"| disk | write+fdatasync |", "| disk | pwrite+fdatasync (preallocated) |", "| tern | durable |",
		"| kafka | durable |", "| nats | durable |", "| woodpecker | default |", "*not durable at acknowledgement*",
		"| tern | fsync=never (unsafe) |", "| kafka | default |"} {
		at = append(at, strings.Index(sync, l))
	}
	if slices.Contains(at, -1) || !slices.IsSorted(at) {
		t.Errorf("sync-1k rows missing or out of order (%v):\n%s", at, sync)
	}
	if !strings.HasPrefix(sync, "\n1 KiB entries appended by 1 producer, each with one synchronous append in flight") {
		t.Errorf("sync-1k does not start by saying what the workload is:\n%s", sync)
	}

	conc := section(t, md, "conc-4k")
	for _, want := range []string{"- walrus durable: 3 errors; the first: boom: write failed", "- walrus durable: stalled 5s",
		"`write+fdatasync` row", "![conc-4k: MB/s](img/conc-4k-throughput.png)"} {
		if !strings.Contains(conc, want) {
			t.Errorf("conc-4k lacks %q:\n%s", want, conc)
		}
	}
	if rounds := section(t, md, "Pub/sub rounds"); !strings.Contains(rounds, "| 5 MB × 100 | tern | durable | 3.00 (2.50 + 0.50) | 350 | 1.90 | 500 | 0 |") {
		t.Errorf("pub/sub rounds lack Tern's 5 MB round:\n%s", rounds)
	}
	if why := section(t, md, "Why"); !strings.Contains(why, "written for the run of 2026-11-20; the figures above are from the run of 2026-11-22") ||
		!strings.Contains(why, "Tern's group commit waits") {
		t.Errorf("the notes are not included as they should be:\n%s", why)
	}
}

func TestBehind(t *testing.T) {
	behind := section(t, generate(t, t.TempDir()), "Where Tern is behind")
	for _, want := range []string{
		"**sync-1k**: nats durable beats Tern on p50 latency: 125µs against Tern's 250µs",
		"**conc-4k**: rocksdb durable beats Tern on MB/s: 180 MB/s against Tern's 150 MB/s",
		"**conc-4k**: Tern is at 0.75 of the physical limit",
		"**pubsub-5m**: nats durable beats Tern on round time: 2.00 s against Tern's 3.00 s",
		"**pubsub-1k**: Tern is at 0.50 of the physical limit",
	} {
		if !strings.Contains(behind, want) {
			t.Errorf("behind lacks %q:\n%s", want, behind)
		}
	}
	// Not durable, slower than Tern, or Tern at 0.8 of the limit: not listed.
	for _, not := range []string{"kafka", "walrus", "woodpecker", "**sync-1k**: Tern is at"} {
		if strings.Contains(behind, not) {
			t.Errorf("behind lists %q:\n%s", not, behind)
		}
	}
}

func TestPlotsAndDeterminism(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "img")
	if err := os.MkdirAll(img, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"old-latency.png", "keep.txt"} {
		if err := os.WriteFile(filepath.Join(img, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	md := generate(t, dir)
	want := []string{"conc-4k-latency.png", "conc-4k-throughput.png", "keep.txt", "pubsub-1k-latency.png",
		"pubsub-5m-latency.png", "pubsub-rounds.png", "sync-1k-latency.png"}
	entries, err := os.ReadDir(img)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	first := map[string][]byte{}
	for _, e := range entries {
		got = append(got, e.Name())
		b, err := os.ReadFile(filepath.Join(img, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		first[e.Name()] = b
		if !strings.HasSuffix(e.Name(), ".png") {
			continue
		}
		if !strings.Contains(md, "(img/"+e.Name()+")") {
			t.Errorf("the markdown does not show %s", e.Name())
		}
		m, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
		} else if s := m.Bounds().Size(); s.X != 800 || s.Y != 500 {
			t.Errorf("%s is %v, want 800x500", e.Name(), s)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("img holds %q, want %q (the stale plot removed, other files kept)", got, want)
	}

	if again := generate(t, dir); again != md {
		t.Error("a second run wrote a different markdown file")
	}
	for name, b := range first {
		if again, err := os.ReadFile(filepath.Join(img, name)); err != nil || !bytes.Equal(again, b) {
			t.Errorf("a second run wrote a different %s (%v)", name, err)
		}
	}
}

func TestReadResultsErrors(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"bad.jsonl":   "{\"system\":\"tern\",\"workload\":\"sync-1k\"}\n{not json\n",
		"empty.jsonl": "\n",
		"anon.jsonl":  "{\"variant\":\"durable\"}\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readResults(p); err == nil {
			t.Errorf("%s: no error", name)
		} else if name == "bad.jsonl" && !strings.Contains(err.Error(), "bad.jsonl:2:") {
			t.Errorf("%s: error %q does not name the line", name, err)
		}
	}
}

func TestDescribePresets(t *testing.T) {
	for name, want := range map[string]string{
		"sync-1k":    "1 KiB entries appended by 1 producer, each with one synchronous append in flight, closed loop; measured for 10s",
		"conc-64k":   "64 KiB entries appended by 64 producers",
		"async-100b": "100 B entries appended by 1 producer, each keeping up to 10,000 entries in flight asynchronously",
		"catchup-1g": "1 GiB written in 64 KiB entries, untimed, then read from the start",
		"e2e-1k":     "at a steady 1,000 appends/s",
		"pubsub-64k": "10,000 entries of 64 KB published with up to 64 in flight",
	} {
		s, err := loadgen.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := describeSpec(s); !strings.HasPrefix(got, want) && !strings.Contains(got, want) {
			t.Errorf("%s: %q does not say %q", name, got, want)
		}
	}
}

func TestNinesAndTicks(t *testing.T) {
	for p, want := range map[float64]float64{0: 0, 90: 1, 99: 2, 99.9: 3, 99.99: 4} {
		if got := nines(p); math.Abs(got-want) > 1e-9 {
			t.Errorf("nines(%v) = %v, want %v", p, got, want)
		}
	}
	var labels []string
	for _, tk := range (linearTicks{}).Ticks(0, 250) {
		labels = append(labels, tk.Label)
	}
	if want := []string{"0", "50", "100", "150", "200", "250"}; !slices.Equal(labels, want) {
		t.Errorf("ticks over 0-250 = %q, want %q", labels, want)
	}
}

func TestLaterResultReplacesEarlier(t *testing.T) {
	spec, err := loadgen.Preset("sync-1k")
	if err != nil {
		t.Fatal(err)
	}
	older := &loadgen.Result{System: "tern", Variant: "durable", Workload: "sync-1k", Spec: spec, Latency: loadgen.Latency{P50: 900}}
	middle := &loadgen.Result{System: "tern", Variant: "durable", Workload: "sync-1k", Spec: spec, Latency: loadgen.Latency{P50: 600}}
	newer := &loadgen.Result{System: "tern", Variant: "durable", Workload: "sync-1k", Spec: spec, Latency: loadgen.Latency{P50: 300}}
	ws := buildWorkloads([]*loadgen.Result{older, middle, newer}, &Setup{})
	if len(ws) != 1 || len(ws[0].rows) != 1 || ws[0].tern.Result != newer {
		t.Fatalf("want one workload with the newer row, got %+v", ws)
	}
	if len(ws[0].problems) != 1 || !strings.Contains(ws[0].problems[0], "replaced an earlier one") {
		t.Errorf("the replacements are not reported once: %q", ws[0].problems)
	}
}

// Tern's logs in object storage are held against the object store's row,
// and its logs on disk against the disk's, in the same table.
func TestObjectStorageRows(t *testing.T) {
	preset := func(name string) loadgen.Spec {
		s, err := loadgen.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const obj = "object 4MiB/20ms x4"
	s3 := loadgen.Spec{Kind: loadgen.KindAppend, EntryBytes: 4 << 20, Producers: 4}
	results := []*loadgen.Result{
		{System: "s3", Variant: "put", Workload: "obj-put", Spec: s3, MBPerSec: 200},
		{System: "tern", Variant: obj, Workload: "obj-put", Spec: preset("obj-put"), MBPerSec: 180, EntriesPerSec: 2747},
		{System: "s3", Variant: "put", Workload: "obj-1k", Spec: loadgen.Spec{EntryBytes: 20 << 10, Producers: 1}, Latency: loadgen.Latency{P50: 3000, P99: 9000}},
		{System: "tern", Variant: obj, Workload: "obj-1k", Spec: preset("obj-1k"), Latency: loadgen.Latency{P50: 15000, P99: 25000}},
		{System: "disk", Variant: "o_direct read", Workload: "catchup-1g", Spec: preset("catchup-1g"), MBPerSec: 1000},
		{System: "s3", Variant: "get, cold", Workload: "catchup-1g", Spec: s3, MBPerSec: 1200},
		{System: "tern", Variant: "durable", Workload: "catchup-1g", Spec: preset("catchup-1g"), MBPerSec: 900},
		{System: "tern", Variant: obj, Workload: "catchup-1g", Spec: preset("catchup-1g"), MBPerSec: 600},
	}
	ws := buildWorkloads(results, &Setup{})
	byName := map[string]*workload{}
	for _, w := range ws {
		byName[w.name] = w
	}
	for _, c := range []struct {
		workload, variant string
		group             group
		vsLimit, vsTern   string
	}{
		{"obj-put", obj, groupDurable, "0.90", "1.00"},       // MB/s against the PUTs
		{"obj-1k", obj, groupDurable, "0.20", "1.00"},        // p50 against a PUT's
		{"catchup-1g", "durable", groupTern, "0.90", "1.00"}, // against the disk
		{"catchup-1g", obj, groupDurable, "0.50", "0.67"},    // against the GETs
	} {
		w := byName[c.workload]
		i := slices.IndexFunc(w.rows, func(r *row) bool { return r.System == "tern" && r.Variant == c.variant })
		if i < 0 {
			t.Fatalf("%s: no tern %s row", c.workload, c.variant)
		}
		r := w.rows[i]
		if r.group != c.group || ratio(r.vsLimit) != c.vsLimit || ratio(r.vsTern) != c.vsTern {
			t.Errorf("%s tern %s: group %d, vs limit %s, vs Tern %s; want %d, %s, %s", c.workload, c.variant, r.group,
				ratio(r.vsLimit), ratio(r.vsTern), c.group, c.vsLimit, c.vsTern)
		}
	}
	lines := strings.Join(behind(ws), "\n")
	for _, want := range []string{
		"**obj-1k**: Tern " + obj + " is at 0.20 of the physical limit by p50 latency: 15.0ms against 3.00ms for the object store's `put`.",
		"**catchup-1g**: Tern " + obj + " is at 0.50 of the physical limit by MB/s: 600 MB/s against 1,200 MB/s for the object store's `get, cold`.",
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("where Tern is behind lacks %q:\n%s", want, lines)
		}
	}
	if strings.Contains(lines, "no result for Tern") || strings.Contains(lines, "beats Tern") || strings.Contains(lines, "obj-put") {
		t.Errorf("where Tern is behind says too much:\n%s", lines)
	}
}

// Quorum logs are durable rows held against the disk, their rates against
// the disk's bandwidth shared by the replicas that write to it; a
// fail-over has no limit, and is described as what it is.
func TestQuorumRows(t *testing.T) {
	preset := func(name string) loadgen.Spec {
		s, err := loadgen.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const q = "quorum 3/2, 3 nodes"
	share := map[string]float64{"replicas_per_disk": 3}
	failover, err := loadgen.Spec{Name: "failover", Kind: loadgen.KindFailover, EntryBytes: 1 << 10, Count: 5}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	results := []*loadgen.Result{
		{System: "disk", Variant: "write+fdatasync", Workload: "quorum-put", Spec: preset("quorum-put"), MBPerSec: 900},
		{System: "tern", Variant: q, Workload: "quorum-put", Spec: preset("quorum-put"), MBPerSec: 150, Extra: share},
		{System: "disk", Variant: "write+fdatasync", Workload: "quorum-1k", Spec: preset("quorum-1k"), Latency: loadgen.Latency{P50: 100}},
		{System: "tern", Variant: q, Workload: "quorum-1k", Spec: preset("quorum-1k"), Latency: loadgen.Latency{P50: 400}, Extra: share},
		{System: "tern", Variant: q + ", ttl 2s", Workload: "failover", Spec: failover, Latency: loadgen.Latency{P50: 2.2e6, Max: 2.5e6}},
	}
	ws := buildWorkloads(results, &Setup{})
	byName := map[string]*workload{}
	for _, w := range ws {
		byName[w.name] = w
	}
	for _, c := range []struct{ workload, vsLimit string }{
		{"quorum-put", "0.50"}, // 150 MB/s against 900 / 3
		{"quorum-1k", "0.25"},  // the latency is not shared: against 100µs
		{"failover", "-"},
	} {
		w := byName[c.workload]
		if w == nil || w.tern == nil || !inQuorum(w.tern.Result) {
			t.Fatalf("%s: the quorum row is not Tern's: %+v", c.workload, w)
		}
		if w.tern.group != groupDurable || ratio(w.tern.vsLimit) != c.vsLimit {
			t.Errorf("%s: group %d, vs limit %s; want %d, %s", c.workload, w.tern.group, ratio(w.tern.vsLimit), groupDurable, c.vsLimit)
		}
	}
	if lines := strings.Join(behind(ws), "\n"); !strings.Contains(lines, "**quorum-put**: Tern is at 0.50 of the physical limit by MB/s: 150 MB/s against 300 MB/s, the disk's `write+fdatasync` (900 MB/s) divided by the 3 replicas that write to it.") {
		t.Errorf("where Tern is behind:\n%s", lines)
	}
	var b bytes.Buffer
	rep := &report{setup: &Setup{}}
	rep.writeWorkload(&b, byName["quorum-put"])
	rep.writeWorkload(&b, byName["failover"])
	out := b.String()
	for _, want := range []string{
		"whose 3 replicas all write to that disk, against its bandwidth divided by 3 (300 MB/s)",
		"The node serving a quorum log killed -9 5 times",
		"vs limit: no physical limit applies.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

// TestClassify: a variant of a durable setting ("durable, zstd") stands
// with the durable rows; one marked unsafe, or a peer's default, does not.
func TestClassify(t *testing.T) {
	atAck := map[string][]string{"woodpecker": {"tuned-1ms"}}
	for _, c := range []struct {
		system, variant string
		want            group
	}{
		{"disk", "write+fdatasync", groupLimit},
		{"tern", "durable", groupTern},
		{"tern", "durable, zstd", groupDurable},
		{"tern", "durable, segments of 64MiB, truncated to keep 128MiB, no segment reuse", groupDurable},
		{"walrus", "durable, 64 logs", groupDurable},
		{"woodpecker", "tuned-1ms", groupDurable},
		{"woodpecker", "default", groupOther},
		{"tern", "fsync=never (unsafe)", groupOther},
		{"tern", "durable, fsync=never (unsafe)", groupOther},
		{"kafka", "durableish", groupOther},
	} {
		r := &loadgen.Result{System: c.system, Variant: c.variant, Workload: "conc-4k"}
		if got := classify(r, atAck); got != c.want {
			t.Errorf("%s %q: group %d, want %d", c.system, c.variant, got, c.want)
		}
	}
}
