package tern

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"

	"github.com/ternwal/tern/client"
	"github.com/ternwal/tern/internal/engine"
	"github.com/ternwal/tern/internal/wal"
)

// RepairReport says where a degraded log is damaged and what its repair
// cuts.
type RepairReport = client.RepairReport

// Repair reports where the log is damaged (a log whose open segment a crash
// or the disk damaged opens degraded: its entries up to the damage can be
// read, and appends fail with ErrDamaged) and what repairing it would cut.
// With acceptLoss it makes the cut, at the end of the open segment's valid
// batches, records what was lost (in the file "repairs" of the log's
// directory, and in the log), and the log takes appends again. A log that
// is not damaged reports Damaged false and is left alone. Only local logs
// are repaired; others fail with ErrUnsupported.
func (l *Log) Repair(ctx context.Context, acceptLoss bool) (RepairReport, error) {
	return l.impl.Repair(ctx, acceptLoss)
}

// repairer is an engine that can open degraded and be repaired: the local
// one.
type repairer interface {
	Damage() *wal.Damage
	Repair(accept bool) (*wal.Damage, error)
}

// damageSet holds the logs of a client that opened degraded, until they
// are repaired or deleted; it outlives the closing of the log, so a log
// closed while idle is still reported. It has its own lock, so that Health
// never waits for a log being opened.
type damageSet struct {
	mu   sync.Mutex
	logs map[string]error
}

// note records the damage eng, the engine of log name just opened, opened
// with, if any.
func (s *damageSet) note(name string, eng engine.Engine) {
	r, ok := eng.(repairer)
	if !ok {
		return
	}
	d := r.Damage()
	s.mu.Lock()
	defer s.mu.Unlock()
	if d == nil {
		delete(s.logs, name)
		return
	}
	if s.logs == nil {
		s.logs = map[string]error{}
	}
	s.logs[name] = d.Error()
}

func (s *damageSet) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.logs, name)
}

// list returns the degraded logs, by name.
func (s *damageSet) list() []DegradedLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]DegradedLog, 0, len(s.logs))
	for name, err := range s.logs {
		out = append(out, DegradedLog{Name: name, Err: err})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (l *embeddedLog) Repair(ctx context.Context, accept bool) (RepairReport, error) {
	if err := ctx.Err(); err != nil {
		return RepairReport{}, err
	}
	r, ok := l.eng.(repairer)
	if !ok {
		return RepairReport{}, fmt.Errorf("%w: log %q is in %s mode: only local logs are repaired", ErrUnsupported, l.name, l.opts.Mode)
	}
	d, err := r.Repair(accept)
	if err != nil {
		return RepairReport{}, fmt.Errorf("tern: repair %q: %w", l.name, err)
	}
	if d == nil {
		return RepairReport{Log: l.name}, nil
	}
	rep := RepairReport{
		Log: l.name, Damaged: true, Repaired: accept, Path: d.Path, Pos: d.Pos, Size: d.Size,
		End: Offset(d.Prefix.Next), CutBytes: d.CutBytes(), BatchesAfter: int64(d.Batches), EntriesAfter: d.Entries,
		Acked: Offset(d.Acked), Damage: fmt.Sprint(d.Err),
	}
	if accept {
		rep.Record = filepath.Join(l.c.logDir(l.id), wal.RepairsName)
		l.c.damaged.forget(l.name) // the engine logged the repair
	}
	return rep, nil
}
