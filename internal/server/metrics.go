package server

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's Prometheus collectors.
type metrics struct {
	requests      *prometheus.CounterVec // method, code
	appendEntries prometheus.Counter
	appendBytes   prometheus.Counter
	appendLatency prometheus.Histogram
	readEntries   prometheus.Counter
	streams       *prometheus.GaugeVec // kind
	lags          *lagSet              // the open Read and Subscribe streams' positions
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tern_server_requests_total",
			Help: "Requests handled by the gRPC service, by method and status code.",
		}, []string{"method", "code"})),
		appendEntries: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tern_append_entries_total",
			Help: "Entries acknowledged to Append and AppendStream.",
		})),
		appendBytes: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tern_append_bytes_total",
			Help: "Payload and property bytes of the entries acknowledged to Append and AppendStream.",
		})),
		appendLatency: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tern_append_duration_seconds",
			Help:    "Time from receiving a batch (Append, or one request of AppendStream) to its acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18), // 50µs to ~6.5s
		})),
		readEntries: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tern_read_entries_total",
			Help: "Entries sent to Read and Subscribe streams.",
		})),
		streams: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tern_server_streams",
			Help: "Open streams, by kind (read, subscribe, append).",
		}, []string{"kind"})),
		lags: register(reg, newLagSet()),
	}
}

// register registers c, or returns the equal collector registered before
// (by another Server on the same registerer).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	if err != nil {
		// Only a programming error (a name clash with another metric) gets
		// here: the names above are fixed.
		panic(err)
	}
	return c
}
