package driver

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/bench/loadgen"
)

// connectWarmup is how many connections of each kind Connect makes before
// it times any: the first ones pay for what is set up once (the server's
// first stream, the certificate's parsing, the code paging in).
const connectWarmup = 10

// Connect times n new connections over TLS (full handshakes: the client
// keeps no session to resume) and n in plaintext to one server in this
// process, which serves both on two loopback ports, alternating one of
// each, so that the host's share of the CPU moves both alike. A
// connection is timed from tern.Open, which dials and makes one call,
// until it returns; then it is closed. With token, the server has an auth
// file and both kinds of connection send a token.
//
// It returns two results, plaintext first, of the workload "connect":
// their latencies are the connections' times, their entries the
// connections; the TLS one's notes compare the two.
func Connect(ctx context.Context, env Env, n int, token bool) ([]*loadgen.Result, error) {
	s, err := startLoopbackServer(ctx, env.Dir, Security{TLS: true, Token: token})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	plainAddr, err := s.serve(false)
	if err != nil {
		return nil, err
	}
	tlsOpts := s.clientOptions()
	plainOpts := tlsOpts
	plainOpts.Server, plainOpts.TLS = plainAddr, nil
	sec := Security{Token: token}
	arms := []*connectArm{
		{opts: plainOpts, hist: loadgen.NewHistogram(), variant: "gRPC, " + sec.String()},
		{opts: tlsOpts, hist: loadgen.NewHistogram(), variant: "gRPC, " + Security{TLS: true, Token: token}.String()},
	}
	for range connectWarmup {
		for _, a := range arms {
			if _, err := a.connect(ctx); err != nil {
				return nil, err
			}
		}
	}
	for _, a := range arms {
		a.total, a.cpu = 0, 0
	}
	started := time.Now()
	for i := range n {
		for j := range arms {
			a := arms[(i+j)%2] // alternating which goes first
			d, err := a.connect(ctx)
			if err != nil {
				return nil, err
			}
			a.hist.Record(d)
		}
		if (i+1)%100 == 0 || i+1 == n {
			fmt.Fprintf(env.Progress, "%d of %d connections of each kind\n", i+1, n)
		}
	}
	spec, err := loadgen.Spec{Name: "connect", Producers: 1, Duration: time.Since(started)}.Normalize()
	if err != nil {
		return nil, err
	}
	rs := make([]*loadgen.Result, len(arms))
	for i, a := range arms {
		r := &loadgen.Result{System: "tern", Version: env.Version, Variant: a.variant, Workload: "connect", Spec: spec,
			Started: started.UTC(), Seconds: a.total.Seconds(), Entries: int64(n)}
		r.EntriesPerSec = float64(n) / a.total.Seconds()
		r.Latency, r.Percentiles = a.hist.Summary()
		r.CPUSeconds = a.cpu.Seconds()
		r.SetExtra("cpu_us_per_connection", float64(a.cpu.Microseconds())/float64(n))
		rs[i] = r
	}
	plain, tlsr := rs[0].Latency, rs[1].Latency
	note := fmt.Sprintf("a new connection (tern.Open: dial, handshake, one call), %d of each kind, alternating: "+
		"over TLS p50 %s, p99 %s; in plaintext p50 %s, p99 %s; the TLS handshake adds %s at p50 (x%.2f) and %s at p99 (x%.2f); "+
		"CPU per connection, client and server together (this process): %s over TLS, %s in plaintext; "+
		"entries are connections, one at a time",
		n, loadgen.Micros(tlsr.P50), loadgen.Micros(tlsr.P99), loadgen.Micros(plain.P50), loadgen.Micros(plain.P99),
		loadgen.Micros(tlsr.P50-plain.P50), tlsr.P50/plain.P50, loadgen.Micros(tlsr.P99-plain.P99), tlsr.P99/plain.P99,
		loadgen.Micros(rs[1].Extra["cpu_us_per_connection"]), loadgen.Micros(rs[0].Extra["cpu_us_per_connection"]))
	rs[1].Notes = append(rs[1].Notes, note)
	rs[1].SetExtra("p50_ratio", tlsr.P50/plain.P50)
	rs[1].SetExtra("p99_ratio", tlsr.P99/plain.P99)
	return rs, nil
}

// connectArm is one kind of connection Connect times.
type connectArm struct {
	opts    tern.Options
	variant string
	hist    *loadgen.Histogram
	total   time.Duration // of the connections timed
	cpu     time.Duration // this process's, over them and their closing
}

// connect opens a client and closes it, and returns how long Open took.
// It counts the time and the process's CPU time in a's totals; the caller
// resets them after the warm-up.
func (a *connectArm) connect(ctx context.Context) (time.Duration, error) {
	cpu0 := cpuTime()
	start := time.Now()
	c, err := tern.Open(ctx, a.opts)
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("connect to %s (%s): %w", a.opts.Server, a.variant, err)
	}
	err = c.Close()
	a.total += d
	a.cpu += cpuTime() - cpu0
	return d, err
}

// cpuTime is the CPU time (user and system) this process has used, or 0
// if the system does not say.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
