package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/units"
)

// UncompactedRevisions is how far an etcd's revision may run ahead of a
// history that was never compacted before EtcdHistory calls its
// auto-compaction off: Tern writes a revision per segment boundary, writer
// change and cursor commit, so a cluster that compacts at all has done so
// long before.
const UncompactedRevisions = 10_000

// EtcdHealth is what an etcd cluster reports of its state.
type EtcdHealth struct {
	// Alarms are the alarms raised on any member, by name ("NOSPACE",
	// "CORRUPT"), sorted and without repeats.
	Alarms []string
	// DBBytes and DBInUseBytes are the database file's size and the part
	// of it in use, QuotaBytes its backend quota (0 from an etcd older
	// than 3.6), of the member with the largest file.
	DBBytes, DBInUseBytes, QuotaBytes int64
	// Revision is the cluster's current revision.
	Revision int64
}

// ReadEtcdHealth asks every endpoint of cli for its status and the cluster
// for its alarms. It fails, with rpcerr.ErrUnavailable, only if no member
// answers.
func ReadEtcdHealth(ctx context.Context, cli *clientv3.Client) (EtcdHealth, error) {
	var (
		h    EtcdHealth
		errs []error
		ok   bool
	)
	for _, ep := range cli.Endpoints() {
		st, err := cli.Status(ctx, ep)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", ep, err))
			continue
		}
		ok = true
		if st.DbSize >= h.DBBytes {
			h.DBBytes, h.DBInUseBytes, h.QuotaBytes = st.DbSize, st.DbSizeInUse, st.DbSizeQuota
		}
		h.Revision = max(h.Revision, st.Header.GetRevision())
	}
	if !ok {
		return h, fmt.Errorf("%w: etcd does not answer: %v", rpcerr.ErrUnavailable, errors.Join(errs...))
	}
	al, err := cli.AlarmList(ctx)
	if err != nil {
		return h, fmt.Errorf("%w: etcd's alarms: %v", rpcerr.ErrUnavailable, err)
	}
	for _, a := range al.Alarms {
		if name := a.Alarm.String(); !slices.Contains(h.Alarms, name) {
			h.Alarms = append(h.Alarms, name)
		}
	}
	slices.Sort(h.Alarms)
	return h, nil
}

// Problem is what the alarms mean for Tern and what to do, in one line; ""
// when none is raised.
func (h EtcdHealth) Problem() string {
	var parts []string
	for _, a := range h.Alarms {
		switch a {
		case "NOSPACE":
			parts = append(parts, fmt.Sprintf("etcd alarm NOSPACE: its database (%s, %s in use, quota %s) is over its quota: creating logs, opening writers and committing cursors fail until it is compacted, defragmented and the alarm disarmed, or its quota raised (tern serve --etcd-quota); docs/server.md, \"Keeping etcd healthy\"",
				units.FormatBytes(h.DBBytes), units.FormatBytes(h.DBInUseBytes), units.FormatBytes(h.QuotaBytes)))
		case "CORRUPT":
			parts = append(parts, "etcd alarm CORRUPT: a member's data differs from the others': etcd takes no writes; restore that member from a snapshot (docs/server.md, \"Keeping etcd healthy\")")
		default:
			parts = append(parts, "etcd alarm "+a)
		}
	}
	return strings.Join(parts, "; ")
}

// EtcdHistory finds how much history etcd keeps: the revision now, and
// the oldest revision that can still be read (1 if nothing was ever
// compacted). A binary search of reads at old revisions finds it, in about
// log2(revision) reads of nothing.
func EtcdHistory(ctx context.Context, cli *clientv3.Client) (revision, oldest int64, err error) {
	readable := func(rev int64) (bool, error) {
		_, err := cli.Get(ctx, "\x00", clientv3.WithRev(rev), clientv3.WithCountOnly())
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, rpctypes.ErrCompacted):
			return false, nil
		}
		return false, err
	}
	resp, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, 0, err
	}
	revision = resp.Header.Revision
	// The oldest readable revision is in (lo, hi]: hi is readable.
	lo, hi := int64(0), revision
	if ok, err := readable(1); err != nil || ok {
		return revision, 1, err
	}
	lo = 1
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := readable(mid)
		if err != nil {
			return revision, 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return revision, hi, nil
}

// CompactionLooksOff says, from EtcdHistory's figures, whether etcd's
// auto-compaction looks off: nothing was ever compacted though the
// revision is more than UncompactedRevisions ahead.
func CompactionLooksOff(revision, oldest int64) bool {
	return oldest <= 1 && revision > UncompactedRevisions
}
