package milvus

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/milvus-io/milvus/pkg/v2/log"
	"github.com/milvus-io/milvus/pkg/v2/streaming/util/types"
	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls"
	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls/helper"

	"github.com/ternwal/tern/client"
)

// opener opens the WALs of one backend. Safe for concurrent use.
type opener struct {
	b      backend
	prefix string
	mode   client.Mode
}

var _ walimpls.OpenerImpls = (*opener)(nil)

func newOpener(b backend, prefix string, mode client.Mode) *opener {
	return &opener{b: b, prefix: prefix, mode: mode}
}

// LogName is the name of the Tern log that keeps the Milvus pchannel
// channel, under prefix (Config.Prefix, DefaultPrefix when empty).
func LogName(prefix, channel string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return prefix + channel
}

// Open opens the channel's log, creating it (in the opener's mode) if it
// does not exist. In read-write mode it opens the writer session of the
// channel's term (WithEpoch(term)): a term older than the log's newest
// session fails with an error that matches walimpls.ErrFenced and
// client.ErrFenced, an equal one reopens that session, a newer one fences
// the older sessions. Read-only mode opens no writer.
func (o *opener) Open(ctx context.Context, opt *walimpls.OpenOption) (walimpls.WALImpls, error) {
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("tern wal: %w", err)
	}
	ch := opt.Channel
	name := LogName(o.prefix, ch.Name)
	if err := client.ValidateName(name); err != nil {
		return nil, fmt.Errorf("tern wal: channel %q: %w (the log's name is the prefix %q and the channel's name)", ch.Name, err, o.prefix)
	}
	rw := ch.AccessMode == types.AccessModeRW
	if rw && ch.Term < 1 {
		return nil, fmt.Errorf("tern wal: %w: channel %s has term %d: a writer's epoch, its term, starts at 1 (as Milvus's terms do)", client.ErrInvalid, ch.Name, ch.Term)
	}
	l, err := o.b.openLog(ctx, name, client.LogOptions{Mode: o.mode})
	if err != nil {
		return nil, fmt.Errorf("tern wal: open log %s of channel %s: %w", name, ch.Name, err)
	}
	w := &wal{WALHelper: helper.NewWALHelper(opt), name: name, log: l}
	if rw {
		wr, err := l.OpenWriter(ctx, client.WithEpoch(uint64(ch.Term)))
		if err != nil {
			return nil, wrapFenced(fmt.Errorf("tern wal: open the writer of channel %s at term %d (log %s): %w", ch.Name, ch.Term, name, err))
		}
		w.w = wr
	}
	return w, nil
}

// Close closes the connection to the server, or the embedded client if the
// builder opened it (ConfigFromEnv with $TERN_DATA). The WALs and scanners
// of the opener fail afterwards.
func (o *opener) Close() {
	if err := o.b.close(); err != nil {
		log.Warn("tern wal: close the opener", zap.Error(err))
	}
}
