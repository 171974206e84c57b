package meta

// The embedded etcd's upkeep
//
// etcd itself compacts the history (EmbedOptions.Retention, etcd's periodic
// auto-compaction), but compaction only frees pages inside the database
// file; the file, which the backend quota is held against, shrinks only
// when it is defragmented. At start and every MaintainInterval the
// maintenance loop asks
// the member for its file size and the part of it in use, and
//
//   - defragments it when at least DefragFreeBytes and a quarter of the
//     file are free, or when the NOSPACE alarm is raised and anything is
//     free: the member takes no request while it rewrites the file (about
//     a second per few hundred MiB in use), so calls wait that long;
//   - disarms the NOSPACE alarm once the file is back under nine tenths of
//     the quota, so that etcd takes writes again by itself.
//
// A quota filled with live data (metadata of many logs, not history) stays
// full: it needs a larger quota (tern serve --etcd-quota).

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

const (
	// maintainTimeout bounds one look at the member, and defragTimeout a
	// defragmentation.
	maintainTimeout = 5 * time.Second
	defragTimeout   = 5 * time.Minute
)

// maintainer keeps one embedded member's database in shape.
type maintainer struct {
	cli       *clientv3.Client
	endpoint  string
	opts      EmbedOptions
	noSpace   bool    // the alarm was raised at the last look
	seen      []revAt // the revisions of the looks within Retention, oldest first
	compacted int64   // the revision of the last compaction
}

// revAt is the member's revision at a look.
type revAt struct {
	at  time.Time
	rev int64
}

// compactTarget records the revision rev seen now, and returns the one to
// compact to: the newest seen at least Retention ago, or rev itself when
// the database is near its quota; 0 for none.
func (m *maintainer) compactTarget(now time.Time, rev int64, nearQuota bool) int64 {
	m.seen = append(m.seen, revAt{now, rev})
	var target int64
	i := 0
	for ; i < len(m.seen) && now.Sub(m.seen[i].at) >= m.opts.Retention; i++ {
		target = m.seen[i].rev
	}
	m.seen = m.seen[i:]
	if nearQuota {
		target = rev
	}
	if target <= m.compacted {
		return 0
	}
	return target
}

// startMaintenance looks at the member at endpoints once and starts the
// maintenance loop; the function it returns stops it and waits for it.
func startMaintenance(endpoints []string, opts EmbedOptions) (func(), error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: maintainTimeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	m := &maintainer{cli: cli, endpoint: endpoints[0], opts: opts}
	ctx, cancel := context.WithCancel(context.Background())
	// A first look at once: a NOSPACE alarm raised before a restart with a
	// larger quota is disarmed before the first call needs it.
	m.maintain(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(opts.MaintainInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				m.maintain(ctx)
			}
		}
	}()
	return func() {
		cancel()
		<-done
		cli.Close()
	}, nil
}

// maintain looks at the member once and does what the comment at the top
// of this file says.
func (m *maintainer) maintain(ctx context.Context) {
	logger := m.opts.Logger
	st, alarms, err := m.look(ctx)
	if err != nil {
		if ctx.Err() == nil {
			logger.Debug("meta: etcd maintenance: no answer", "err", err)
		}
		return
	}
	noSpace := hasAlarm(alarms, etcdserverpb.AlarmType_NOSPACE)
	if noSpace && !m.noSpace {
		logger.Error("meta: etcd's database is over its quota (alarm NOSPACE): creating logs, opening writers and committing cursors fail until space is freed",
			"size", st.DbSize, "in_use", st.DbSizeInUse, "quota", m.opts.QuotaBytes)
	}
	m.noSpace = noSpace
	if rev := m.compactTarget(time.Now(), st.Header.Revision, noSpace || st.DbSizeInUse >= m.opts.QuotaBytes/4*3); rev > 0 {
		cctx, cancel := context.WithTimeout(ctx, maintainTimeout)
		_, err := m.cli.Compact(cctx, rev, clientv3.WithCompactPhysical())
		cancel()
		if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			if ctx.Err() == nil {
				logger.Warn("meta: etcd compaction failed", "revision", rev, "err", err)
			}
			return
		}
		m.compacted = rev
		logger.Debug("meta: etcd compacted", "revision", rev)
		if st, alarms, err = m.look(ctx); err != nil {
			return
		}
	}
	free := st.DbSize - st.DbSizeInUse
	if (free >= m.opts.DefragFreeBytes && free*4 >= st.DbSize) || (noSpace && free > 0) {
		t0 := time.Now()
		dctx, cancel := context.WithTimeout(ctx, defragTimeout)
		_, err := m.cli.Defragment(dctx, m.endpoint)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				logger.Warn("meta: etcd defragmentation failed", "err", err)
			}
			return
		}
		before := st.DbSize
		if st, alarms, err = m.look(ctx); err != nil {
			return
		}
		logger.Info("meta: etcd defragmented", "before", before, "after", st.DbSize, "in_use", st.DbSizeInUse, "took", time.Since(t0).Round(time.Millisecond))
	}
	if !noSpace || st.DbSize >= m.opts.QuotaBytes/10*9 {
		return
	}
	for _, a := range alarms {
		if a.Alarm != etcdserverpb.AlarmType_NOSPACE {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, maintainTimeout)
		_, err := m.cli.AlarmDisarm(actx, (*clientv3.AlarmMember)(a))
		cancel()
		if err != nil {
			logger.Warn("meta: disarming etcd's NOSPACE alarm failed", "err", err)
			return
		}
	}
	m.noSpace = false
	logger.Info("meta: etcd's database is back under its quota; alarm NOSPACE disarmed", "size", st.DbSize, "quota", m.opts.QuotaBytes)
}

// look asks the member for its status and the cluster for its alarms.
func (m *maintainer) look(ctx context.Context) (*clientv3.StatusResponse, []*etcdserverpb.AlarmMember, error) {
	ctx, cancel := context.WithTimeout(ctx, maintainTimeout)
	defer cancel()
	st, err := m.cli.Status(ctx, m.endpoint)
	if err != nil {
		return nil, nil, err
	}
	al, err := m.cli.AlarmList(ctx)
	if err != nil {
		return nil, nil, err
	}
	return st, al.Alarms, nil
}

func hasAlarm(alarms []*etcdserverpb.AlarmMember, t etcdserverpb.AlarmType) bool {
	for _, a := range alarms {
		if a.Alarm == t {
			return true
		}
	}
	return false
}
