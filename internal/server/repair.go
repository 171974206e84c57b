package server

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/ternpb"
)

// RepairLog reports where a degraded log is damaged and, with accept_loss,
// cuts the damage off (tern.Log.Repair).
func (s *Server) RepairLog(ctx context.Context, req *ternpb.RepairLogRequest) (*ternpb.RepairLogResponse, error) {
	l, err := s.open(ctx, req.GetName())
	if err != nil {
		return nil, wire(err)
	}
	rep, err := l.Repair(ctx, req.GetAcceptLoss())
	if err != nil {
		return nil, wire(err)
	}
	return rep.Proto(), nil
}

// registerDamage exports how many of c's logs are degraded, as the gauge
// tern_logs_degraded.
func registerDamage(reg prometheus.Registerer, c *tern.Client) {
	register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tern_logs_degraded",
		Help: "Logs that opened damaged: they can be read up to the damage and take no appends until repaired (tern log repair); /readyz names them.",
	}, func() float64 {
		h, err := c.Health()
		if err != nil {
			return 0
		}
		return float64(len(h.Degraded))
	}))
}
