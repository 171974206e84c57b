package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ternwal/tern/internal/auth"
	"github.com/ternwal/tern/internal/units"
)

func (a *app) authCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Make tokens and check the auth file of tern serve --auth",
		Long: `Make bearer tokens and their hashes, and check the auth file that
tern serve --auth reads (docs/auth-file.md): who may call the server, how
each principal authenticates (a token, or a client certificate's subject
or SAN), its grants on log-name prefixes and its quotas.

These commands work offline, on no data directory and no server.`,
		Args: noSubcommand,
		RunE: help,
	}
	cmd.AddCommand(a.authNewTokenCmd(), a.authHashTokenCmd(), a.authCheckCmd())
	return cmd
}

// authFileExample is the snippet of an auth file the help of the token
// commands shows.
const authFileExample = `  principals:
    - name: ops
      token_hash: "sha256:..."   # the second line of new-token, or hash-token's
      grants:
        - {prefix: "", allow: [read, append, subscribe, admin]}
    - name: indexer
      token_hash: "sha256:..."
      grants:
        - {prefix: "tenant-a/", allow: [read, subscribe]}`

func (a *app) authNewTokenCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "new-token",
		Short: "Print a new random token and its hash",
		Long: `Print a new random bearer token on the first line (32 random bytes,
base64url: 43 characters) and its hash on the second. The hash goes into
the auth file as a principal's token_hash; the token goes to the client
(tern --token, $TERN_TOKEN, or the client's Token option), and nowhere
else: the server keeps only the hash, and the token cannot be recovered
from it.

For example:

  $ tern auth new-token
  3jFE3ZDgb0tyXrZuK6IqS5jXsmcX-JgQD2QBlTKi7EE
  sha256:d9eb484310389b003b4b0d195f6de2e4efd99de5314de60e50c8cae91b8af796

and in the auth file:

` + authFileExample,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, err := auth.NewToken()
			if err != nil {
				return err
			}
			hash, err := auth.HashToken(token)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%s\n%s\n", token, hash)
			return err
		},
	}
}

// maxTokenLine bounds what hash-token reads of stdin: a token is a line.
const maxTokenLine = 64 << 10

func (a *app) authHashTokenCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "hash-token",
		Short: "Print the hash of the token read on stdin, for the auth file",
		Long: `Read a bearer token on stdin, one line (its newline is not part of it),
and print its hash: the token_hash of a principal in the auth file. Use it
for a token made elsewhere; tern auth new-token makes one and prints both.

A token must be at least 16 bytes, with no spaces or control characters:
tokens are random secrets, not passwords, which is why a fast hash
(SHA-256) protects them.

For example, from a file, or without the token appearing in a command line:

  $ tern auth hash-token < indexer.token
  sha256:d9eb484310389b003b4b0d195f6de2e4efd99de5314de60e50c8cae91b8af796
  $ printf '%s\n' "$TOKEN" | tern auth hash-token

and in the auth file:

` + authFileExample,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, err := readTokenLine(a.stdin)
			if err != nil {
				return err
			}
			hash, err := auth.HashToken(token)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.stdout, hash)
			return err
		},
	}
}

// readTokenLine is the one line of r, without its line ending.
func readTokenLine(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxTokenLine+1))
	if err != nil {
		return "", fmt.Errorf("read the token on stdin: %w", err)
	}
	if len(b) > maxTokenLine {
		return "", fmt.Errorf("stdin holds more than %s: give one token, on one line", units.FormatBytes(maxTokenLine))
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	switch {
	case s == "":
		return "", errors.New("no token on stdin: give the token on one line (e.g. tern auth hash-token < FILE), or make one with tern auth new-token")
	case strings.Contains(s, "\n"):
		return "", fmt.Errorf("stdin holds %d lines: give one token, on one line", strings.Count(s, "\n")+1)
	}
	return s, nil
}

func (a *app) authCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE",
		Short: "Check an auth file and print its principals, their identities and grants",
		Long: `Parse an auth file as tern serve --auth would, and print each principal:
its name, how it authenticates (a token, a certificate subject or SAN, and
whether it is a cluster node), its grants and its quotas. A file the server
would refuse exits with 1 and the line and reason.`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := auth.Load(args[0])
			if err != nil {
				return err
			}
			return printPolicy(a.stdout, p)
		},
	}
}

// printPolicy prints each principal of p in a few indented lines.
func printPolicy(w io.Writer, p *auth.Policy) error {
	var b strings.Builder
	for _, pr := range p.Principals {
		kind := ""
		if pr.Node {
			kind = " (cluster node)"
		}
		fmt.Fprintf(&b, "%s%s\n", pr.Name, kind)
		var ids []string
		if pr.TokenHash != "" {
			ids = append(ids, "token "+pr.TokenHash[:len("sha256:")+8]+"…")
		}
		if pr.Subject != "" {
			ids = append(ids, fmt.Sprintf("certificate subject %q", pr.Subject))
		}
		if pr.SAN != "" {
			ids = append(ids, fmt.Sprintf("certificate SAN %q", pr.SAN))
		}
		fmt.Fprintf(&b, "  authenticates by: %s\n", strings.Join(ids, " or "))
		if len(pr.Grants) == 0 {
			b.WriteString("  grants: none\n")
		}
		for _, g := range pr.Grants {
			where := fmt.Sprintf("logs under %q", g.Prefix)
			if g.Prefix == "" {
				where = "every log"
			}
			perms := make([]string, len(g.Allow))
			for i, p := range g.Allow {
				perms[i] = string(p)
			}
			fmt.Fprintf(&b, "  grant: %s on %s\n", strings.Join(perms, ", "), where)
		}
		if q := quotaText(pr.Quotas); q != "" {
			fmt.Fprintf(&b, "  quotas: %s\n", q)
		}
	}
	fmt.Fprintf(&b, "%d principal(s): the file is valid\n", len(p.Principals))
	_, err := io.WriteString(w, b.String())
	return err
}

// quotaText is q for a person, "" when q bounds nothing.
func quotaText(q auth.Quotas) string {
	var parts []string
	if q.AppendBytesPerSecond > 0 {
		burst := q.AppendBurstBytes
		if burst == 0 {
			burst = q.AppendBytesPerSecond
		}
		parts = append(parts, fmt.Sprintf("append %s/s (burst %s)", units.FormatBytes(q.AppendBytesPerSecond), units.FormatBytes(burst)))
	}
	if q.Logs > 0 {
		parts = append(parts, fmt.Sprintf("%d logs", q.Logs))
	}
	if q.Subscriptions > 0 {
		parts = append(parts, fmt.Sprintf("%d subscriptions", q.Subscriptions))
	}
	return strings.Join(parts, ", ")
}
