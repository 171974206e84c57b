// Command report turns benchmark results into docs/benchmarks.md and the
// PNG plots beside it:
//
//	go run . --results FILE.jsonl [--setup setup.json] [--notes notes.md] \
//	    --out ../../docs/benchmarks.md --img ../../docs/benchmarks/
//
// FILE.jsonl holds one loadgen.Result per line, as `tern bench --json`,
// `tern bench disk --json` and every driver in bench/peers write them
// (bench/run.sh collects them). A later line for the same workload, system
// and variant replaces an earlier one, and the report says so. A run spread
// over more logs than its preset (walrus on 64 topics) is a row of its own,
// its variant suffixed ", N logs".
//
// The report has, for each workload present (sync-1k, conc-4k, conc-64k,
// async-100b, catchup-1g, e2e-1k, pubsub-*, then any other), a table whose
// rows go: the physical limits ("disk", "s3"), Tern's durable row, peers
// that acknowledge only fsynced entries, then everything else, labelled as
// not durable at acknowledgement (a variant with "(unsafe)" in its name,
// such as Tern with fsync off, is always there). Two ratios stand beside
// each row, both above 1 when the row does better:
//
//   - vs limit: against the disk's "write+fdatasync" row (a growing file,
//     buffered writes, written again from its start past 1 GiB): p50
//     latency (limit's / row's) for sync-1k and e2e-1k, MB/s for conc-*,
//     async-100b and pubsub-* (a pubsub row's MB/s being its bytes over
//     extra.produce_s); for catchup-1g, MB/s against the disk's "o_direct
//     read" row.
//   - vs Tern: the workload's headline figure against Tern's durable row:
//     p50 latency for sync-1k, MB/s for conc-* and catchup-1g, entries/s
//     for async-100b, p99 latency for e2e-1k, round time (produce plus
//     consume) for pubsub-*.
//
// Then come the Milvus pub/sub table (one block of rows per pubsub round),
// "Where Tern is behind" (every durable peer that beats Tern on a
// workload's headline figure, and every workload where Tern is under 0.8
// of the limit), and, with --notes, that file verbatim under "## Why".
//
// Plots (800x500 PNG, into --img): WORKLOAD-latency.png (latency by
// percentile) for each workload with latency percentiles,
// WORKLOAD-throughput.png (headline bars) for each throughput workload, and
// pubsub-rounds.png. PNG files of those names that the run did not write are
// removed from --img, so the directory matches the markdown.
//
// The output depends only on the inputs: rows are sorted, and the only
// dates are those of setup.json and of the results.
//
// setup.json, written by bench/run.sh, describes the run; every field is
// optional:
//
//	{
//	  "date": "2026-11-22",                    // when the run was made
//	  "profile": "quick",                      // "quick" or "full"
//	  "command": "bench/run.sh quick",         // what made the results
//	  "host": {"cpu": "Intel Xeon ...", "cores": 2, "memory_bytes": 25769803776,
//	           "kernel": "6.1.0-...", "disk": "virtio /dev/vda", "filesystem": "ext4"},
//	  "go": "go1.26.8",
//	  "versions": {"kafka": "4.3.1", "nats": "2.15.2"},       // else Result.Version
//	  "settings": {"kafka": {"durable": "flush.messages=1, acks=all",
//	                         "default": "no flush (page cache)"}},
//	  "durable_at_ack": {"woodpecker": ["default", "tuned-1ms"]}
//	}
//
// "settings" says how each system's variants were configured (system, then
// variant, then text). "durable_at_ack" names the variants besides
// "durable" and "durable, ..." that also acknowledge only fsynced entries:
// they are grouped with the durable rows instead of under "not durable at
// acknowledgement".
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ternwal/tern/bench/loadgen"
)

// Setup describes the run the results come from (setup.json).
type Setup struct {
	Date    string `json:"date"`
	Profile string `json:"profile"`
	Command string `json:"command"`
	Host    struct {
		CPU         string `json:"cpu"`
		Cores       int    `json:"cores"`
		MemoryBytes int64  `json:"memory_bytes"`
		Kernel      string `json:"kernel"`
		Disk        string `json:"disk"`
		Filesystem  string `json:"filesystem"`
	} `json:"host"`
	Go           string                       `json:"go"`
	Versions     map[string]string            `json:"versions"`
	Settings     map[string]map[string]string `json:"settings"`
	DurableAtAck map[string][]string          `json:"durable_at_ack"`
}

// config is the command line.
type config struct {
	results, setup, notes, out, img string
}

func main() {
	var c config
	flag.StringVar(&c.results, "results", "", "JSON lines of loadgen results (required)")
	flag.StringVar(&c.setup, "setup", "", "setup.json written by bench/run.sh")
	flag.StringVar(&c.notes, "notes", "", "hand-written markdown to include under \"## Why\"")
	flag.StringVar(&c.out, "out", "../../docs/benchmarks.md", "the markdown file to write")
	flag.StringVar(&c.img, "img", "../../docs/benchmarks/", "the directory for the PNG plots")
	flag.Parse()
	if c.results == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: go run . --results FILE.jsonl [--setup setup.json] [--notes notes.md] --out benchmarks.md --img DIR")
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintf(os.Stderr, "report: %v\n", err)
		os.Exit(1)
	}
}

// run writes the report and its plots.
func run(c config) error {
	results, err := readResults(c.results)
	if err != nil {
		return err
	}
	setup := &Setup{}
	if c.setup != "" {
		b, err := os.ReadFile(c.setup)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, setup); err != nil {
			return fmt.Errorf("%s: %w", c.setup, err)
		}
	}
	var notes []byte
	if c.notes != "" {
		if notes, err = os.ReadFile(c.notes); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(c.img, 0o755); err != nil {
		return err
	}
	var runs []*loadgen.Result
	for _, r := range results {
		if !compressionRun(r) {
			runs = append(runs, r)
		}
	}
	ws := buildWorkloads(runs, setup)
	plots, err := writePlots(ws, c.img)
	if err != nil {
		return err
	}
	if err := removeStalePlots(c.img, plots); err != nil {
		return err
	}
	imgRel, err := relPath(c.out, c.img)
	if err != nil {
		return err
	}
	rep := &report{
		setup:       setup,
		resultsName: filepath.Base(c.results),
		workloads:   ws,
		compression: buildCompression(results),
		plots:       plots,
		imgDir:      imgRel,
		peersLink:   findPeersReadme(c.out),
		notes:       notes,
	}
	var buf bytes.Buffer
	rep.write(&buf)
	return os.WriteFile(c.out, buf.Bytes(), 0o644)
}

// readResults reads one loadgen.Result per non-empty line.
func readResults(path string) ([]*loadgen.Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rs []*loadgen.Result
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		r := &loadgen.Result{}
		if err := json.Unmarshal(line, r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if r.System == "" || r.Workload == "" {
			return nil, fmt.Errorf("%s:%d: a result needs a system and a workload", path, n)
		}
		rs = append(rs, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%s: no results: run bench/run.sh (or tern bench --json) first", path)
	}
	return rs, nil
}

// plotName matches the files writePlots makes.
var plotName = regexp.MustCompile(`^(.+-(latency|throughput)|pubsub-rounds)\.png$`)

// removeStalePlots removes plots of an earlier run that this run did not make.
func removeStalePlots(dir string, made map[string]bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if e.Type().IsRegular() && plotName.MatchString(name) && !made[name] {
			errs = append(errs, os.Remove(filepath.Join(dir, name)))
		}
	}
	return errors.Join(errs...)
}

// relPath is dir relative to the directory of file, with forward slashes,
// for links in the markdown.
func relPath(file, dir string) (string, error) {
	a, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return "", err
	}
	b, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(a, b)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}

// findPeersReadme looks for bench/peers/README.md in the directories above
// the output file and returns a link to it, or "" if there is none.
func findPeersReadme(out string) string {
	dir, err := filepath.Abs(filepath.Dir(out))
	if err != nil {
		return ""
	}
	for d := dir; ; d = filepath.Dir(d) {
		p := filepath.Join(d, "bench", "peers", "README.md")
		if _, err := os.Stat(p); err == nil {
			rel, err := relPath(out, filepath.Dir(p))
			if err != nil {
				return ""
			}
			return strings.TrimPrefix(rel+"/README.md", "./")
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}
