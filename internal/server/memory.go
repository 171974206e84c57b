package server

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// MinMemoryLimit is the smallest Config.MemoryLimitBytes: below it the
// budgets would not hold one request of the largest entry a log takes by
// default.
const MinMemoryLimit = 64 << 20

// fallbackMachineBytes stands for the machine's memory where it cannot be
// read (no /proc/meminfo).
const fallbackMachineBytes = 4 << 30

// DefaultMemoryLimit is Config.MemoryLimitBytes when it is zero: a quarter
// of the memory the process may use, which is the machine's physical
// memory or, when it is smaller, the limit of the process's cgroup (a
// container's). A quarter leaves the rest to the page cache the logs are
// read through, to an embedded etcd, and to other processes; at least
// MinMemoryLimit.
func DefaultMemoryLimit() int64 {
	avail := machineBytes()
	if c, ok := cgroupLimit(); ok && c < avail {
		avail = c
	}
	return max(avail/4, MinMemoryLimit)
}

// memoryBudgets is how a memory limit is shared out (docs/server.md
// states the arithmetic):
//   - appendBytes: appends received and not yet durable, all streams and
//     unary calls together (Options.AppendBytes), a quarter;
//   - cacheBytes: the acknowledged fragments the object and quorum logs
//     keep for their tail readers (tern.Options.ObjectCacheBytes), an
//     eighth;
//   - replicaBytes: on a node of a cluster, the fragments of open segments
//     its replica store holds (replica.Options.MemBytes), a quarter, plus
//     up to half of that in recycled buffers;
//   - streams: the streams open at once (Options.MaxStreams, unless
//     Limits.MaxStreams says otherwise), a quarter at streamBytes each, and
//     at least minStreams.
//
// The rest is for what is bounded per stream or per log rather than
// server-wide (a read stream holds about two responses of ~1 MiB),
// gRPC's buffers, and the garbage collector's headroom: Go's soft memory
// limit is the whole limit.
type memoryBudgets struct {
	appendBytes  int64
	cacheBytes   int64
	replicaBytes int64
	streams      int
}

// streamBytes is what a stream is reckoned to hold when its client does
// not read: two responses of about 1 MiB (docs/server.md, Memory).
const streamBytes = 2 << 20

// minStreams is the fewest streams a memory limit allows by default.
const minStreams = 64

func budgetsOf(limit int64) memoryBudgets {
	return memoryBudgets{appendBytes: limit / 4, cacheBytes: limit / 8, replicaBytes: limit / 4,
		streams: int(max(limit/4/streamBytes, minStreams))}
}

// machineBytes is MemTotal of /proc/meminfo.
func machineBytes() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return fallbackMachineBytes
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// MemTotal:       16318144 kB
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "MemTotal:" && fields[2] == "kB" {
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil && kb > 0 {
				return kb << 10
			}
		}
	}
	return fallbackMachineBytes
}

// cgroupLimit is the memory limit of the cgroup (v2, or v1) the process
// runs in, if it has one.
func cgroupLimit() (int64, bool) {
	for _, path := range []string{
		"/sys/fs/cgroup/memory.max",                   // v2, in the cgroup namespace of a container
		"/sys/fs/cgroup/memory/memory.limit_in_bytes", // v1
	} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := string(bytes.TrimSpace(b))
		if s == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		// v1 says "no limit" with a huge number, a page-rounded MaxInt64.
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}
