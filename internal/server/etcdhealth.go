package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ternwal/tern/internal/meta"
)

// etcdAlarms are the alarms tern_etcd_alarm always has a series for.
var etcdAlarms = []string{"NOSPACE", "CORRUPT"}

// etcdHealth is what the server tells of its etcd: the check of /readyz
// (etcd answers a read, and no alarm is raised) and, as a Prometheus
// collector that asks etcd at each scrape, its metrics.
type etcdHealth struct {
	cli   *clientv3.Client
	probe func(ctx context.Context) error // a read of Tern's keys

	up, alarm, dbBytes, inUseBytes, quotaBytes *prometheus.Desc
}

func newEtcdHealth(cli *clientv3.Client, probe func(context.Context) error) *etcdHealth {
	return &etcdHealth{
		cli:        cli,
		probe:      probe,
		up:         prometheus.NewDesc("tern_etcd_up", "1 if etcd answered the last scrape, 0 if not", nil, nil),
		alarm:      prometheus.NewDesc("tern_etcd_alarm", "1 while etcd has the alarm raised (NOSPACE: over its quota, takes no writes; CORRUPT)", []string{"type"}, nil),
		dbBytes:    prometheus.NewDesc("tern_etcd_db_size_bytes", "the size of etcd's database file (of its largest member), which its quota is held against", nil, nil),
		inUseBytes: prometheus.NewDesc("tern_etcd_db_size_in_use_bytes", "the part of etcd's database file in use; the rest is freed by defragmentation", nil, nil),
		quotaBytes: prometheus.NewDesc("tern_etcd_quota_bytes", "etcd's backend quota (0 if etcd does not say)", nil, nil),
	}
}

// check is /readyz's question to etcd.
func (h *etcdHealth) check(ctx context.Context) (string, []string) {
	if err := h.probe(ctx); err != nil {
		return "metadata store does not answer: " + err.Error(), nil
	}
	st, err := meta.ReadEtcdHealth(ctx, h.cli)
	if err != nil {
		return "metadata store: " + err.Error(), nil
	}
	return st.Problem(), nil
}

func (h *etcdHealth) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{h.up, h.alarm, h.dbBytes, h.inUseBytes, h.quotaBytes} {
		ch <- d
	}
}

func (h *etcdHealth) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	st, err := meta.ReadEtcdHealth(ctx, h.cli)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(h.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(h.up, prometheus.GaugeValue, 1)
	names := slices.Clone(etcdAlarms)
	for _, a := range st.Alarms {
		if !slices.Contains(names, a) {
			names = append(names, a)
		}
	}
	for _, a := range names {
		v := 0.0
		if slices.Contains(st.Alarms, a) {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(h.alarm, prometheus.GaugeValue, v, a)
	}
	ch <- prometheus.MustNewConstMetric(h.dbBytes, prometheus.GaugeValue, float64(st.DBBytes))
	ch <- prometheus.MustNewConstMetric(h.inUseBytes, prometheus.GaugeValue, float64(st.DBInUseBytes))
	ch <- prometheus.MustNewConstMetric(h.quotaBytes, prometheus.GaugeValue, float64(st.QuotaBytes))
}

// historyCheckTimeout bounds the start's look at an external etcd's history.
const historyCheckTimeout = 5 * time.Second

// warnUncompacted logs a warning when an external etcd's auto-compaction
// looks off (meta.CompactionLooksOff): its database then grows with every
// cursor commit until its quota stops Tern's writes.
func warnUncompacted(ctx context.Context, cli *clientv3.Client, endpoints []string, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, historyCheckTimeout)
	defer cancel()
	rev, oldest, err := meta.EtcdHistory(ctx, cli)
	if err != nil {
		logger.Debug("etcd history not checked", "err", err)
		return
	}
	if meta.CompactionLooksOff(rev, oldest) {
		logger.Warn(fmt.Sprintf("etcd's auto-compaction looks off: revision 1 can still be read at revision %d; its database will grow until its quota stops Tern's writes: start etcd with --auto-compaction-mode=periodic --auto-compaction-retention=5m, and defragment it now and then (docs/server.md, \"Keeping etcd healthy\"; tern doctor etcd://HOST:PORT)", rev),
			"endpoints", strings.Join(endpoints, ","))
	}
}
