package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/internal/meta"
	"github.com/ternwal/tern/internal/units"
)

// The thresholds of an etcd's state; docs/doctor.md says why.
const (
	// The database file against the quota: NOSPACE stops Tern's writes at
	// 100%.
	etcdQuotaWarnPct, etcdQuotaFailPct = 80, 95
	// A file with this much free, and a quarter of it, is worth
	// defragmenting, as the embedded etcd does by itself.
	etcdDefragFreeBytes = meta.DefaultEtcdDefragFreeBytes
)

// etcdSteps connects to the etcd cluster of the etcd://HOST:PORT[,...]
// (or etcd://unix:///PATH) URL raw and returns the checks of its state: alarms, auto-compaction,
// size against the quota and the part of the file defragmentation would
// free. They read; they write nothing.
func (a *app) etcdSteps(cmd *cobra.Command, raw string) ([]step, error) {
	endpoints := splitEndpoints(strings.TrimPrefix(raw, "etcd://"))
	if len(endpoints) == 0 {
		return nil, usagef(cmd, "%q: give the endpoints of an etcd cluster as etcd://HOST:PORT[,HOST:PORT...] (or etcd://unix:///PATH of a socket)", raw)
	}
	for _, e := range endpoints {
		if err := checkEtcdEndpoint(e); err != nil {
			return nil, usagef(cmd, "%q: endpoint %q: %v: give etcd://HOST:PORT[,HOST:PORT...] (or etcd://unix:///PATH of a socket)", raw, e, err)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: probeTimeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd at %s: %w", strings.Join(endpoints, ","), err)
	}
	var (
		h           meta.EtcdHealth
		rev, oldest int64
	)
	ctx, cancel := context.WithTimeout(cmd.Context(), probeTimeout)
	defer cancel()
	if h, err = meta.ReadEtcdHealth(ctx, cli); err != nil {
		cli.Close()
		if cerr := cmd.Context().Err(); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("cannot reach etcd at %s: %v: check that it runs and that the endpoints are its client URLs (port 2379 by default)", strings.Join(endpoints, ","), errors.Unwrap(err))
	}
	// The one step; it closes the client.
	measure := func(ctx context.Context) (*loadgen.Result, error) {
		defer cli.Close()
		t0 := time.Now()
		var err error
		if h, err = meta.ReadEtcdHealth(ctx, cli); err != nil {
			return nil, err
		}
		if rev, oldest, err = meta.EtcdHistory(ctx, cli); err != nil {
			return nil, fmt.Errorf("read etcd's history: %w", err)
		}
		return &loadgen.Result{System: "etcd", Variant: "status", Started: t0, Seconds: time.Since(t0).Seconds()}, nil
	}
	return []step{{"etcd status", measure, []judgement{
		{"etcd alarms", func(*loadgen.Result) (string, string, string) {
			if len(h.Alarms) == 0 {
				return "none", "ok", "no alarm raised (etcd)"
			}
			return strings.Join(h.Alarms, ","), "FAIL", "no alarm raised (etcd)"
		}},
		{"etcd auto-compaction", func(*loadgen.Result) (string, string, string) {
			figure := fmt.Sprintf("revision %d, oldest %d", rev, oldest)
			threshold := fmt.Sprintf("compacted before revision %d (Tern)", meta.UncompactedRevisions)
			if meta.CompactionLooksOff(rev, oldest) {
				return figure, "warn", threshold
			}
			return figure, "ok", threshold
		}},
		{"etcd size against quota", func(*loadgen.Result) (string, string, string) {
			threshold := fmt.Sprintf("< %d%% ok, < %d%% warn (NOSPACE at 100%%)", etcdQuotaWarnPct, etcdQuotaFailPct)
			if h.QuotaBytes <= 0 {
				return units.FormatBytes(h.DBBytes) + " of an unknown quota", "ok", threshold
			}
			pct := 100 * float64(h.DBBytes) / float64(h.QuotaBytes)
			figure := fmt.Sprintf("%s of %s (%.0f%%)", units.FormatBytes(h.DBBytes), units.FormatBytes(h.QuotaBytes), pct)
			switch {
			case pct >= etcdQuotaFailPct:
				return figure, "FAIL", threshold
			case pct >= etcdQuotaWarnPct:
				return figure, "warn", threshold
			}
			return figure, "ok", threshold
		}},
		{"etcd free in file", func(*loadgen.Result) (string, string, string) {
			free := h.DBBytes - h.DBInUseBytes
			figure := fmt.Sprintf("%s of %s", units.FormatBytes(free), units.FormatBytes(h.DBBytes))
			threshold := fmt.Sprintf("< %s or < 1/4 of the file (defragment above)", units.FormatBytes(etcdDefragFreeBytes))
			if free >= etcdDefragFreeBytes && free*4 >= h.DBBytes {
				return figure, "warn", threshold
			}
			return figure, "ok", threshold
		}},
	}}}, nil
}
