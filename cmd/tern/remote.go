package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client"
	"github.com/ternwal/tern/internal/server"
)

// remoteFlags are how the commands reach a secured server (--server): its
// TLS and the client's credentials. Each flag, when not given, takes its
// environment variable.
type remoteFlags struct {
	ca, cert, key string // PEM files
	token         string
	serverName    string
	// https is set when the server's address was given as https://host:port.
	https bool
}

// remoteFlagNames are the flags of remoteFlags, in the order usage errors
// name them.
var remoteFlagNames = []string{"tls-ca", "tls-cert", "tls-key", "token", "tls-server-name"}

// register adds the flags to fs, the root's persistent flags. Their
// defaults are not the environment's, unlike --server's: help would print
// $TERN_TOKEN.
func (r *remoteFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&r.ca, "tls-ca", "", "with --server: reach the server over TLS, trusting the CA certificates of this PEM `file` for its certificate; $TERN_TLS_CA sets the default (without it, a client certificate or an https:// address trusts the system's CAs)")
	fs.StringVar(&r.cert, "tls-cert", "", "with --server: the client's certificate (PEM `file`), for a server that requires one (mutual TLS); needs --tls-key; $TERN_TLS_CERT sets the default")
	fs.StringVar(&r.key, "tls-key", "", "with --server: the private key (PEM `file`) of --tls-cert; $TERN_TLS_KEY sets the default")
	fs.StringVar(&r.token, "token", "", "with --server: the bearer `token` to send to a server started with --auth; prefer $TERN_TOKEN, which sets the default: other users see a flag in ps")
	fs.StringVar(&r.serverName, "tls-server-name", "", "with --server: check the server's certificate for this `name` instead of the address's host (implies TLS); $TERN_TLS_SERVER_NAME sets the default")
}

// resolve checks the flags against the command line and fills the ones
// not given from the environment. It runs before every command: a.server
// is final (--data has cleared it). Given without a server, the flags are a
// usage error; their variables are then ignored, as the commands on a data
// directory ignore $TERN_SERVER's.
func (r *remoteFlags) resolve(cmd *cobra.Command, a *app) error {
	pf := cmd.Root().PersistentFlags() // not the flags of serve, which has its own --tls-cert and --tls-key
	if a.server == "" {
		for _, name := range remoteFlagNames {
			if pf.Changed(name) {
				return usagef(cmd, "--%s applies to a server: give --server ADDR (or $TERN_SERVER), or leave it out", name)
			}
		}
		return nil
	}
	for _, v := range []struct {
		name string
		dst  *string
		env  string
	}{
		{"tls-ca", &r.ca, "TERN_TLS_CA"},
		{"tls-cert", &r.cert, "TERN_TLS_CERT"},
		{"tls-key", &r.key, "TERN_TLS_KEY"},
		{"token", &r.token, "TERN_TOKEN"},
		{"tls-server-name", &r.serverName, "TERN_TLS_SERVER_NAME"},
	} {
		if !pf.Changed(v.name) {
			*v.dst = a.getenv(v.env)
		}
	}
	if (r.cert == "") != (r.key == "") {
		return usagef(cmd, "--tls-cert and --tls-key go together (or $TERN_TLS_CERT and $TERN_TLS_KEY): give the client's certificate and its key, or neither")
	}
	if addr, ok := strings.CutPrefix(a.server, "https://"); ok {
		a.server, r.https = strings.TrimSuffix(addr, "/"), true
	}
	return nil
}

// refuseOnServe refuses the client's flags on tern serve: --tls-ca is
// likely a slip for --tls-client-ca there.
func (r *remoteFlags) refuseOnServe(cmd *cobra.Command) error {
	pf := cmd.Root().PersistentFlags() // serve's own --tls-cert and --tls-key shadow these
	for _, name := range remoteFlagNames {
		if pf.Changed(name) {
			return usagef(cmd, "--%s is for the commands that reach a server (--server); tern serve takes --tls-cert, --tls-key, --tls-client-ca and --auth", name)
		}
	}
	return nil
}

// options are the tern.Options of a client of the server at addr: TLS when
// a CA, a client certificate, a server name or an https:// address asks for
// it, and the token. The files are read here; an error names the file and
// the flag.
//
// addr may name several nodes of a cluster, separated by commas: the client
// connects to the first that answers, and turns to the others when the
// nodes it knows cannot be reached.
func (r *remoteFlags) options(addr string) (tern.Options, error) {
	nodes := strings.Split(addr, ",")
	for i, n := range nodes {
		a, https, err := serverAddr(n)
		if err != nil {
			return tern.Options{}, err
		}
		nodes[i], r.https = a, r.https || https
	}
	opts := tern.Options{Server: nodes[0], Nodes: nodes[1:], Token: r.token}
	if r.ca == "" && r.cert == "" && r.serverName == "" && !r.https {
		return opts, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r.serverName}
	if r.ca != "" {
		pool, err := loadCA(r.ca)
		if err != nil {
			return tern.Options{}, err
		}
		cfg.RootCAs = pool
	}
	if r.cert != "" {
		cert, err := tls.LoadX509KeyPair(r.cert, r.key)
		if err != nil {
			return tern.Options{}, configErrorf("client certificate %s with key %s (--tls-cert and --tls-key, or $TERN_TLS_CERT and $TERN_TLS_KEY): %v", r.cert, r.key, pemErr(err))
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	opts.TLS = cfg
	return opts, nil
}

// serverAddr is the host:port of one node named in --server (or
// $TERN_SERVER), and whether it asks for TLS (https://), by the rules of
// client.ParseServer; what it refuses is a configuration error that names
// the flag.
func serverAddr(s string) (addr string, https bool, err error) {
	addr, https, err = client.ParseServer(s)
	if err != nil {
		return "", false, configErrorf("--server (or $TERN_SERVER): %s; several nodes are separated by commas", strings.TrimPrefix(err.Error(), client.ErrInvalid.Error()+": "))
	}
	return addr, https, nil
}

// loadCA reads the CA certificates of a PEM file.
func loadCA(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, configErrorf("CA file %s does not exist: check --tls-ca (or $TERN_TLS_CA)", path)
	}
	if err != nil {
		return nil, configErrorf("read CA file (--tls-ca or $TERN_TLS_CA): %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, configErrorf("CA file %s holds no PEM certificate (a \"-----BEGIN CERTIFICATE-----\" block): check --tls-ca (or $TERN_TLS_CA)", path)
	}
	return pool, nil
}

// pemErr is an error of tls.LoadX509KeyPair without its "tls: " prefix.
func pemErr(err error) string { return strings.TrimPrefix(err.Error(), "tls: ") }

// plaintextTokenWarning is the warning to print before a token goes to
// addr without TLS, or "" when it stays on this machine or is encrypted.
func plaintextTokenWarning(opts tern.Options) string {
	if opts.Token == "" || opts.TLS != nil {
		return ""
	}
	if server.Loopback(opts.Server) {
		return ""
	}
	return fmt.Sprintf("tern: warning: the token goes to %s in the clear, readable by anyone on the way: reach the server over TLS (--tls-ca, or an https:// address)\n", opts.Server)
}

// authMessage is the line that says what to do about a call the server
// refused for who the client is, or "" for another error.
func authMessage(err error) string {
	switch {
	case errors.Is(err, tern.ErrUnauthenticated):
		said := strings.TrimPrefix(message(cause(err, tern.ErrUnauthenticated)), "not authenticated: ")
		return fmt.Sprintf("not authenticated: %s (the CLI takes $TERN_TOKEN or --token, or a client certificate with --tls-cert and --tls-key)", said)
	case errors.Is(err, tern.ErrPermissionDenied):
		return "permission denied: " + strings.TrimPrefix(message(cause(err, tern.ErrPermissionDenied)), "permission denied: ")
	}
	return ""
}

// cause is the error of err's chain that wraps sentinel itself: the
// server's own message, without what the client added around it.
func cause(err, sentinel error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if errors.Unwrap(e) == sentinel {
			return e
		}
	}
	return err
}
