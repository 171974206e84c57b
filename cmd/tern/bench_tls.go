package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ternwal/tern/bench/driver"
	"github.com/ternwal/tern/bench/loadgen"
)

// describeBench prints, as the first line of tern bench --grpc --tls or
// --auth, what is measured: how the server is reached, and with --pairs
// what against. Its certificate is made in dir.
func describeBench(cmd *cobra.Command, dir string, spec loadgen.Spec, sec driver.Security, pairs int) error {
	if sec == (driver.Security{}) {
		return nil
	}
	what, err := driver.Describe(dir, sec)
	if err != nil {
		return err
	}
	line := fmt.Sprintf("Measuring %s %s", spec.Name, what)
	if pairs > 0 {
		line += fmt.Sprintf(", against the same server in plaintext without an auth file, in %d alternating pairs", pairs)
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), line+".")
	return err
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
and a fresh data directory inside --dir, gRPC on loopback), serving both in
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
			if n < 1 {
				return usagef(cmd, "--connections %d: make at least one", n)
			}
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
