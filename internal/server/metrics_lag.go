package server

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ternwal/tern"
)

// lagScrapeTimeout bounds the describes of the logs with open streams at a
// scrape; they are open, so their ends are in memory.
const lagScrapeTimeout = time.Second

// lagBuckets are the bounds, in entries, of the lag histograms.
var lagBuckets = []float64{0, 1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7}

// lagSet is the position of every open Read and Subscribe stream, so that a
// scrape can export how far behind the log's end they are. Lag per log (or
// per subscription) would make a series of every log name, which can be
// millions: the lags are exported server-wide, as a histogram over the open
// streams and their maximum. A subscription whose consumer is not connected
// has no stream and is not counted: tern sub list shows its lag.
type lagSet struct {
	read, sub       *prometheus.Desc
	readMax, subMax *prometheus.Desc

	mu      sync.Mutex
	streams map[*lagPos]struct{}
}

// lagPos is one stream's position: for a Read stream, the next offset it
// sends; for a Subscribe stream, its cursor (the next offset not
// acknowledged). known is false until the stream has a position (a
// subscriber before its first delivery, which waits at the tail).
type lagPos struct {
	log *tern.Log
	sub bool

	mu    sync.Mutex
	known bool
	next  tern.Offset
}

// at records that the stream's position is off, if that is further on;
// first only if it has none yet.
func (p *lagPos) at(off tern.Offset, first bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.known || (!first && off > p.next) {
		p.known, p.next = true, off
	}
}

// behind is how far the position is behind end.
func (p *lagPos) behind(end tern.Offset) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.known || end <= p.next {
		return 0
	}
	return uint64(end - p.next)
}

func newLagSet() *lagSet {
	return &lagSet{
		read: prometheus.NewDesc("tern_read_lag_entries",
			"How far behind its log's end each open Read stream is, in entries (end minus the next offset it sends), as a histogram over the open streams: server-wide, since a series per log would be one per log name.", nil, nil),
		sub: prometheus.NewDesc("tern_subscription_lag_entries",
			"How far behind its log's end each open Subscribe stream is, in entries (end minus the subscription's cursor, acknowledgements not yet committed included), as a histogram over the open streams: server-wide, since a series per subscription would be one per log name; tern sub list shows each subscription's lag, disconnected ones too.", nil, nil),
		readMax: prometheus.NewDesc("tern_read_lag_max_entries",
			"The largest lag of the open Read streams, in entries (0 with none).", nil, nil),
		subMax: prometheus.NewDesc("tern_subscription_lag_max_entries",
			"The largest lag of the open Subscribe streams, in entries (0 with none).", nil, nil),
		streams: map[*lagPos]struct{}{},
	}
}

// track adds a stream of l to the set; the caller calls untrack when it
// ends.
func (s *lagSet) track(l *tern.Log, sub bool) *lagPos {
	p := &lagPos{log: l, sub: sub}
	s.mu.Lock()
	s.streams[p] = struct{}{}
	s.mu.Unlock()
	return p
}

func (s *lagSet) untrack(p *lagPos) {
	s.mu.Lock()
	delete(s.streams, p)
	s.mu.Unlock()
}

func (s *lagSet) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.read
	ch <- s.sub
	ch <- s.readMax
	ch <- s.subMax
}

func (s *lagSet) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	ps := make([]*lagPos, 0, len(s.streams))
	for p := range s.streams {
		ps = append(ps, p)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), lagScrapeTimeout)
	defer cancel()
	ends := map[*tern.Log]tern.Offset{}
	var read, sub lagHistogram
	for _, p := range ps {
		end, ok := ends[p.log]
		if !ok {
			info, err := p.log.Info(ctx)
			if err != nil {
				continue // deleted, or closing: the stream ends
			}
			end, ends[p.log] = info.End, info.End
		}
		lag := p.behind(end)
		if p.sub {
			sub.add(lag)
		} else {
			read.add(lag)
		}
	}
	ch <- read.metric(s.read)
	ch <- sub.metric(s.sub)
	ch <- prometheus.MustNewConstMetric(s.readMax, prometheus.GaugeValue, float64(read.max))
	ch <- prometheus.MustNewConstMetric(s.subMax, prometheus.GaugeValue, float64(sub.max))
}

// lagHistogram counts lags into lagBuckets.
type lagHistogram struct {
	count, max uint64
	sum        float64
	buckets    [9]uint64 // cumulative, as lagBuckets
}

func (h *lagHistogram) add(lag uint64) {
	h.count++
	h.sum += float64(lag)
	h.max = max(h.max, lag)
	for i, b := range lagBuckets {
		if float64(lag) <= b {
			h.buckets[i]++
		}
	}
}

func (h *lagHistogram) metric(d *prometheus.Desc) prometheus.Metric {
	bs := make(map[float64]uint64, len(lagBuckets))
	for i, b := range lagBuckets {
		bs[b] = h.buckets[i]
	}
	return prometheus.MustNewConstHistogram(d, h.count, h.sum, bs)
}
