package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/internal/vfs"
)

// engineMetrics are what the engines of the data directory report through
// a tern.Observer: the local logs' fsyncs, the requests to the object
// store, and the replicas a node's quorum logs lose.
type engineMetrics struct {
	fsync          prometheus.Histogram
	objectRequests *prometheus.CounterVec   // op, result
	objectLatency  *prometheus.HistogramVec // op
	replicaLost    *prometheus.CounterVec   // node
}

func newEngineMetrics(reg prometheus.Registerer) *engineMetrics {
	return &engineMetrics{
		fsync: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tern_fsync_duration_seconds",
			Help:    "Time each fdatasync of a local log's segment took (one per group commit with fsync=always, one per interval with fsync=interval). tern doctor calls a disk healthy at a p99 under 10ms.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16), // 50µs to ~1.6s
		})),
		objectRequests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tern_object_requests_total",
			Help: "Requests to the object store (object logs, and a node's offload of quorum segments), by operation (put, get, getrange, stat, list, delete) and result (ok; not_found and exists, which are answers; error).",
		}, []string{"op", "result"})),
		objectLatency: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tern_object_request_duration_seconds",
			Help:    "Time requests to the object store took, by operation, whatever their result.",
			Buckets: prometheus.ExponentialBuckets(1e-3, 2, 15), // 1ms to ~16s
		}, []string{"op"})),
		replicaLost: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tern_quorum_replica_lost_total",
			Help: "Replicas this node dropped from the ensemble of a quorum log's open segment (the replica failed, or fell behind), by replica node ID; each makes the segment roll to a new ensemble.",
		}, []string{"node"})),
	}
}

// observer is the tern.Observer that feeds m.
func (m *engineMetrics) observer() tern.Observer {
	return tern.Observer{
		Sync:        func(d time.Duration) { m.fsync.Observe(d.Seconds()) },
		Object:      m.object,
		ReplicaLost: func(node string) { m.replicaLost.WithLabelValues(node).Inc() },
	}
}

func (m *engineMetrics) object(op, result string, d time.Duration) {
	m.objectRequests.WithLabelValues(op, result).Inc()
	m.objectLatency.WithLabelValues(op).Observe(d.Seconds())
}

// registerDisk exports the state of the data directory's disk: whether
// appends are refused for want of space (tern_disk_full, as /readyz says),
// and the free space an unprivileged writer has there.
func registerDisk(reg prometheus.Registerer, dir string, c *tern.Client) {
	labels := prometheus.Labels{"dir": dir}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "tern_disk_full",
		Help:        "1 while appends to the local logs are refused because the disk of the data directory is full (or below --disk-reserve), else 0.",
		ConstLabels: labels,
	}, func() float64 {
		if h, err := c.Health(); err == nil && h.NoSpace != "" {
			return 1
		}
		return 0
	}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "tern_disk_free_bytes",
		Help:        "Free bytes on the filesystem of the data directory, as statfs(2) reports them to an unprivileged process.",
		ConstLabels: labels,
	}, func() float64 {
		s, ok, err := vfs.SpaceOf(vfs.OS, dir)
		if err != nil || !ok {
			return -1
		}
		return float64(s.Free)
	}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "tern_disk_size_bytes",
		Help:        "Size of the filesystem of the data directory, as statfs(2) reports it.",
		ConstLabels: labels,
	}, func() float64 {
		s, ok, err := vfs.SpaceOf(vfs.OS, dir)
		if err != nil || !ok {
			return -1
		}
		return float64(s.Total)
	}))
}

// registerMemory exports the memory limit (--memory-limit) and the append
// budget carved from it, next to which the use is plotted:
// tern_append_memory_bytes, and the Go runtime's and process's metrics.
func registerMemory(reg prometheus.Registerer, limit int64, b memoryBudgets) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tern_memory_limit_bytes",
		Help: "The server's memory limit (--memory-limit): Go's soft memory limit, compare process_resident_memory_bytes and go_memstats_sys_bytes.",
	}, func() float64 { return float64(limit) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tern_append_memory_limit_bytes",
		Help: "The budget of appends held in memory (a quarter of --memory-limit); tern_append_memory_bytes is its use, and appends wait while it is spent.",
	}, func() float64 { return float64(b.appendBytes) }))
}

// registerCluster exports how many nodes of the cluster this node sees
// live (holding their lease in etcd): the replicas it can place quorum
// segments on.
func registerCluster(reg prometheus.Registerer, n *clusterNode) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tern_cluster_nodes_live",
		Help: "Nodes of the cluster this node sees live (itself included): the nodes quorum segments' ensembles are chosen from.",
	}, func() float64 { return float64(len(n.set.Live())) }))
}
