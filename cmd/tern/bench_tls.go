package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ternwal/tern/bench/driver"
	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/internal/units"
)

// describeSecured says how tern bench --grpc reaches its server, with
// --tls or --auth the TLS version and key exchange, and with --pairs what
// against. Its certificate is made in dir.
func describeSecured(dir string, sec driver.Security, pairs int) (string, error) {
	what, err := driver.Describe(dir, sec)
	if err != nil {
		return "", err
	}
	switch {
	case pairs > 0 && sec != (driver.Security{}):
		what += fmt.Sprintf(", against the same server in plaintext without an auth file, in %d alternating pairs", pairs)
	case pairs > 0:
		what += fmt.Sprintf(", against Tern embedded in this process, in %d alternating pairs", pairs)
	}
	return what, nil
}

// describeBench prints, as the first line of tern bench, what is measured:
// the workload, and where (what), so that a run through $TERN_SERVER, say,
// does not pass for one of the embedded library.
func describeBench(cmd *cobra.Command, spec loadgen.Spec, what string) error {
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "Measuring %s (%s) %s.\n", spec.Name, specSummary(spec), what)
	return err
}

// specSummary is the figures of a workload, for a person.
func specSummary(s loadgen.Spec) string {
	plural := func(n int, what string) string {
		if n == 1 {
			return "1 " + what
		}
		return fmt.Sprintf("%d %ss", n, what)
	}
	parts := []string{units.FormatBytes(int64(s.EntryBytes)) + " entries"}
	if s.Kind == loadgen.KindCatchUp {
		return fmt.Sprintf("%s, %s written then read back", parts[0], units.FormatBytes(s.TotalBytes))
	}
	if s.Batch > 1 {
		parts = append(parts, fmt.Sprintf("in batches of %d", s.Batch))
	}
	parts = append(parts, plural(s.Producers, "producer"))
	if s.InFlight > 0 {
		parts = append(parts, fmt.Sprintf("%d in flight each", s.InFlight))
	}
	if s.Logs > 1 {
		parts = append(parts, fmt.Sprintf("over %d logs", s.Logs))
	}
	if s.Rate > 0 {
		parts = append(parts, fmt.Sprintf("open loop at %g appends/s", s.Rate))
	} else {
		parts = append(parts, "closed loop")
	}
	if s.Kind == loadgen.KindPubSub {
		parts = append(parts, fmt.Sprintf("rounds of %d", s.Count))
	} else {
		parts = append(parts, "for "+units.FormatDuration(s.Duration))
	}
	if s.Warmup > 0 {
		parts = append(parts, "after "+units.FormatDuration(s.Warmup)+" of warm-up")
	}
	return strings.Join(parts, ", ")
}

func (a *app) benchConnectCmd() *cobra.Command {
	var (
		f     benchFlags
		n     int
		token bool
	)
	cmd := &cobra.Command{
		Use:   "connect",
		Short: "Measure the cost of a new connection: over TLS (a full handshake) against plaintext",
		Long: `Start a server in this process, as tern bench --grpc does (an embedded etcd
and a fresh data directory inside --data, gRPC on loopback), serving both in
plaintext and over TLS (a certificate made for the run, ECDSA P-256, which
the client trusts) on two ports. Then time --connections new connections of
each kind, alternating, one at a time: from tern.Open, which dials, makes
the TLS handshake if any, and makes one call, until it returns; each
connection is closed after it. The client keeps no TLS session, so every
handshake is a full one. With --auth, the server has an auth file and both
kinds of connection send a bearer token.

The table has a row for each kind: its latencies are the connections'
times; its entries/s, connections per second one at a time.`,
		Example: `  tern bench connect
  tern bench connect --auth --connections 500 --json results.jsonl`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runBench(cmd, f, func(ctx context.Context, env driver.Env) ([]*loadgen.Result, error) {
				what, err := driver.Describe(env.Dir, driver.Security{TLS: true, Token: token})
				if err != nil {
					return nil, err
				}
				if _, err := fmt.Fprintf(cmd.OutOrStdout(), "Timing %d new connections (full handshakes) %s, against as many in plaintext, alternating.\n", n, what); err != nil {
					return nil, err
				}
				return driver.Connect(ctx, env, n, token)
			})
		},
	}
	numberVar(cmd.Flags(), &n, "connections", 300, 1, "how many connections of each kind to time")
	cmd.Flags().BoolVar(&token, "auth", false, "the server has an auth file, and the client sends a bearer token")
	cmd.Flags().StringVar(&f.json, "json", "", "append the results as JSON lines to this `file` (- for standard output)")
	return cmd
}
