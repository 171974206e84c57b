package meta

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

var hourSeconds = flag.Int("etcd-hour-seconds", 3600, "BenchmarkEtcdCursorHour: the seconds of cursor commits simulated")

// The shape of the figure: subscribers acknowledging, each committing its
// cursor every CommitInterval (100ms).
const (
	hourSubs     = 100
	hourCommitHz = 10
	// hourRetention is the embedded etcd's retention in ticks of 1/10 s:
	// 5 minutes.
	hourRetention = int64(DefaultEtcdRetention / (time.Second / hourCommitHz))
)

// BenchmarkEtcdCursorHour is the figure of issue 28: the size of an etcd
// database after an hour of 100 subscribers acknowledging, with and
// without compaction. It writes what CommitCursor writes, the subscription
// records of one log under their keys, but each tenth of a second of the
// hour as one transaction of 100 puts, one per subscriber: the same key
// versions go to the database (one bbolt entry each), in a fraction of the
// time. With compaction, every 5 simulated minutes the history older than
// 5 minutes is compacted away, as the embedded etcd's periodic
// auto-compaction does, and the file is defragmented by the maintenance
// loop's rule (embed_maintain.go).
//
//	go test -run '^$' -bench EtcdCursorHour -benchtime 1x ./internal/meta/
func BenchmarkEtcdCursorHour(b *testing.B) {
	for _, compact := range []bool{false, true} {
		b.Run(fmt.Sprintf("compaction=%v", compact), func(b *testing.B) {
			for range b.N {
				cursorHour(b, compact)
			}
		})
	}
}

func cursorHour(b *testing.B, compact bool) {
	ctx := context.Background()
	srv, err := StartEtcdWith(ctx, b.TempDir(), EmbedOptions{Retention: 1000 * time.Hour, MaintainInterval: 1000 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	s, err := OpenEtcd(ctx, EtcdOptions{Endpoints: srv.Endpoints()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l, err := s.CreateLog(ctx, Log{Name: "orders"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range hourSubs {
		if _, err := s.CreateSub(ctx, "orders", Sub{Name: fmt.Sprintf("consumer-%03d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	// One round of CommitCursor through the store: one revision each.
	before := s.requests.Load()
	rev0 := revision(b, s.cli)
	for i := range hourSubs {
		if _, err := s.CommitCursor(ctx, "orders", fmt.Sprintf("consumer-%03d", i), 1); err != nil {
			b.Fatal(err)
		}
	}
	if got := revision(b, s.cli) - rev0; got != hourSubs {
		b.Fatalf("%d CommitCursors wrote %d revisions", hourSubs, got)
	}
	b.Logf("CommitCursor: 1 revision and %.0f KV requests each", float64(s.requests.Load()-before)/hourSubs)

	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	ticks := int64(*hourSeconds) * hourCommitHz
	var peak int64
	t0 := time.Now()
	b.ResetTimer()
	for tick := int64(1); tick <= ticks; tick++ {
		ops := make([]clientv3.Op, 0, hourSubs)
		for i := range hourSubs {
			name := fmt.Sprintf("consumer-%03d", i)
			// Each commit moves the cursor by about 1,000 entries.
			v, err := encodeSub(Sub{Name: name, Created: time.Now().UTC(), Cursor: uint64(tick * 1000)})
			if err != nil {
				b.Fatal(err)
			}
			ops = append(ops, clientv3.OpPut(s.subKey(l.ID, name), string(v)))
		}
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			b.Fatal(err)
		}
		if compact && tick%hourRetention == 0 {
			if _, err := cli.Compact(ctx, resp.Header.Revision-hourRetention); err != nil {
				b.Fatal(err)
			}
			st := memberStatus(b, cli, srv)
			peak = max(peak, st.DbSize)
			if free := st.DbSize - st.DbSizeInUse; free >= DefaultEtcdDefragFreeBytes && free*4 >= st.DbSize {
				if _, err := cli.Defragment(ctx, srv.Endpoints()[0]); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.StopTimer()
	st := memberStatus(b, cli, srv)
	peak = max(peak, st.DbSize)
	b.ReportMetric(float64(st.DbSize)/(1<<20), "db-MiB")
	b.ReportMetric(float64(st.DbSizeInUse)/(1<<20), "in-use-MiB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-db-MiB")
	b.Logf("compaction=%v: %d s of %d subscribers committing %d/s (%d cursor commits) in %s: db %d bytes, %d in use, peak %d",
		compact, *hourSeconds, hourSubs, hourCommitHz, ticks*hourSubs, time.Since(t0).Round(time.Second), st.DbSize, st.DbSizeInUse, peak)
}

func revision(b *testing.B, cli *clientv3.Client) int64 {
	resp, err := cli.Get(context.Background(), "\x00", clientv3.WithCountOnly())
	if err != nil {
		b.Fatal(err)
	}
	return resp.Header.Revision
}

func memberStatus(b *testing.B, cli *clientv3.Client, srv *EmbeddedEtcd) *clientv3.StatusResponse {
	st, err := cli.Status(context.Background(), srv.Endpoints()[0])
	if err != nil {
		b.Fatal(err)
	}
	return st
}
