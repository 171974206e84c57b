package loadgen

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram records latencies with three significant digits from 1 µs to
// an hour. It is safe for concurrent use.
type Histogram struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{h: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)}
}

// Record adds one latency.
func (h *Histogram) Record(d time.Duration) {
	us := max(d.Microseconds(), 1)
	h.mu.Lock()
	_ = h.h.RecordValue(min(us, h.h.HighestTrackableValue())) // in range by construction
	h.mu.Unlock()
}

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	o.mu.Lock()
	c := hdrhistogram.Import(o.h.Export())
	o.mu.Unlock()
	h.mu.Lock()
	h.h.Merge(c)
	h.mu.Unlock()
}

// Count is the number of latencies recorded.
func (h *Histogram) Count() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.h.TotalCount()
}

// Summary returns the percentiles of Result.Latency and the distribution of
// Result.Percentiles.
func (h *Histogram) Summary() (Latency, [][2]float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.h.TotalCount() == 0 {
		return Latency{}, nil
	}
	q := func(p float64) float64 { return float64(h.h.ValueAtPercentile(p)) }
	l := Latency{
		Count: h.h.TotalCount(),
		Mean:  math.Round(h.h.Mean()*10) / 10,
		P50:   q(50), P90: q(90), P99: q(99), P999: q(99.9),
		Max: float64(h.h.Max()),
	}
	// Percentiles evenly spaced in "nines": 0, 68.4, 90, 96.8, 99, ...
	var dist [][2]float64
	for x := 0.0; x <= 5.0001; x += 0.1 {
		p := 100 * (1 - math.Pow(10, -x))
		if p > 100*(1-1/float64(h.h.TotalCount())) && x > 0 {
			break // beyond what the samples can tell
		}
		dist = append(dist, [2]float64{math.Round(p*10000) / 10000, q(p)})
	}
	return l, append(dist, [2]float64{100, l.Max})
}

// ProcMeter measures the CPU time and peak memory of one process, or the
// sum over several, from StartProc to Stop.
type ProcMeter struct {
	pid  int
	cpu0 float64
	// host0 is the machine's CPU time at the start; nil where
	// /proc/stat cannot be read.
	host0 *hostTimes
	// more are the other processes of a group, measured alike.
	more []*ProcMeter
	// note says what could not be measured as asked.
	note string
}

// StartProc starts measuring process pid, or this process when pid is 0;
// with more PIDs, the processes of a cluster, whose figures add up. It
// resets each process's peak RSS so that Stop reports the peak of the
// measured part only (Linux clear_refs); where that is not allowed the
// peak since the process started is reported, with a note.
func StartProc(pid int, more ...int) *ProcMeter {
	m := &ProcMeter{pid: pid}
	if err := os.WriteFile(m.procFile("clear_refs"), []byte("5"), 0); err != nil {
		m.note = fmt.Sprintf("peak memory is since the process started: resetting it failed: %v", err)
	}
	m.cpu0, _ = m.cpu()
	if h, err := readHostTimes(); err == nil {
		m.host0 = &h
	}
	for _, p := range more {
		m.more = append(m.more, StartProc(p))
	}
	return m
}

// Stop returns the CPU seconds (user and system) used since StartProc, the
// peak resident memory in bytes (for a group, the sum of each process's
// peak), and a note when either is not what it says.
func (m *ProcMeter) Stop() (cpuSeconds float64, peakRSS int64, note string) {
	cpuSeconds, peakRSS, note = m.stop()
	for _, o := range m.more {
		c, p, n := o.stop()
		cpuSeconds, peakRSS = cpuSeconds+c, peakRSS+p
		if note == "" {
			note = n
		}
	}
	return cpuSeconds, peakRSS, note
}

func (m *ProcMeter) stop() (cpuSeconds float64, peakRSS int64, note string) {
	cpu, err := m.cpu()
	if err != nil {
		return 0, 0, fmt.Sprintf("process %d not measured: %v", m.pid, err)
	}
	peakRSS, err = m.peak()
	if err != nil {
		m.note = fmt.Sprintf("peak memory not measured: %v", err)
	}
	return cpu - m.cpu0, peakRSS, m.note
}

func (m *ProcMeter) procFile(name string) string {
	if m.pid == 0 {
		return "/proc/self/" + name
	}
	return fmt.Sprintf("/proc/%d/%s", m.pid, name)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

func (m *ProcMeter) cpu() (float64, error) {
	if m.pid == 0 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0, err
		}
		tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
		return tv(ru.Utime) + tv(ru.Stime), nil
	}
	b, err := os.ReadFile(m.procFile("stat"))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from the last ')'. utime and stime are fields 14 and 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short %s", m.procFile("stat"))
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad %s", m.procFile("stat"))
	}
	return (ut + st) / clockTicks, nil
}

func (m *ProcMeter) peak() (int64, error) {
	f, err := os.Open(m.procFile("status"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in %s", m.procFile("status"))
}

// DirBytes is the space the files under dir take on disk (as du counts
// it), or 0 if dir cannot be read.
func DirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed under us, or unreadable: skip it
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// hostTimes are the machine's CPU time counters (/proc/stat, in ticks):
// every kind summed, and steal, the time a hypervisor ran something else
// while this machine's CPUs had work.
type hostTimes struct{ total, steal uint64 }

func readHostTimes() (hostTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return hostTimes{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return hostTimes{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var h hostTimes
	// user nice system idle iowait irq softirq steal [guest guest_nice,
	// which user and nice already count]
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return hostTimes{}, fmt.Errorf("/proc/stat: %w", err)
		}
		h.total += n
		if i == 7 {
			h.steal = n
		}
	}
	return h, nil
}

// StealShare returns the share of the machine's CPU time that the
// hypervisor took (steal) since StartProc, and false where /proc/stat
// cannot be read or no time passed.
func (m *ProcMeter) StealShare() (float64, bool) {
	if m.host0 == nil {
		return 0, false
	}
	h, err := readHostTimes()
	if err != nil || h.total <= m.host0.total {
		return 0, false
	}
	return float64(h.steal-m.host0.steal) / float64(h.total-m.host0.total), true
}
