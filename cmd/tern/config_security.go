package main

import (
	"strconv"

	"github.com/spf13/pflag"
)

// serveSecurity are tern serve's security settings (docs/security.md),
// embedded in serveConfig: their keys sit at the top level of the config
// file.
type serveSecurity struct {
	// TLSCert and TLSKey are the files of the server's certificate (its
	// chain, PEM) and private key: every listener serves TLS with them.
	TLSCert string `json:"tls_cert"`
	TLSKey  string `json:"tls_key"`
	// TLSClientCA is a file of the CA certificates that issue the clients'
	// certificates: with it, clients may (with Auth) or must (without)
	// present one, and the nodes of a cluster authenticate each other.
	TLSClientCA string `json:"tls_client_ca"`
	// Auth is the auth file: principals, grants and quotas.
	Auth string `json:"auth"`
	// Insecure lets the server listen beyond loopback without TLS and an
	// auth file.
	Insecure bool `json:"insecure"`
	// Pprof serves /debug/pprof/ on the HTTP listener.
	Pprof bool `json:"pprof"`
}

// securityKeys are serveSecurity's keys in a config file.
var securityKeys = []string{"tls_cert", "tls_key", "tls_client_ca", "auth", "insecure", "pprof"}

// applySecurityEnv overlays the non-empty $TERN_ variables of the security
// settings.
func applySecurityEnv(s *serveSecurity, getenv func(string) string) error {
	for _, v := range []struct {
		dst  *string
		name string
	}{{&s.TLSCert, "TERN_TLS_CERT"}, {&s.TLSKey, "TERN_TLS_KEY"}, {&s.TLSClientCA, "TERN_TLS_CLIENT_CA"}, {&s.Auth, "TERN_AUTH"}} {
		if x := getenv(v.name); x != "" {
			*v.dst = x
		}
	}
	for _, v := range []struct {
		dst  *bool
		name string
	}{{&s.Insecure, "TERN_INSECURE"}, {&s.Pprof, "TERN_PPROF"}} {
		if x := getenv(v.name); x != "" {
			b, err := strconv.ParseBool(x)
			if err != nil {
				return configErrorf("$%s %q: use true or false", v.name, x)
			}
			*v.dst = b
		}
	}
	return nil
}

func (f *serveFlags) registerSecurity(fs *pflag.FlagSet) {
	fs.StringVar(&f.TLSCert, "tls-cert", "", "serve TLS on every listener with the certificate (chain) in this PEM `file`, reloaded when it changes or on SIGHUP; $TERN_TLS_CERT")
	fs.StringVar(&f.TLSKey, "tls-key", "", "the private key of --tls-cert, a PEM `file`; $TERN_TLS_KEY")
	fs.StringVar(&f.TLSClientCA, "tls-client-ca", "", "mutual TLS: accept client certificates of the CAs in this PEM `file` (required without --auth; the nodes of a cluster authenticate each other with it); $TERN_TLS_CLIENT_CA")
	fs.StringVar(&f.Auth, "auth", "", "the auth `file` (YAML): principals by token hash or certificate, their grants on log-name prefixes and quotas; every other call is refused; reloaded on SIGHUP; $TERN_AUTH (docs/auth-file.md)")
	fs.BoolVar(&f.Insecure, "insecure", false, "listen beyond loopback without TLS and --auth: anyone who reaches the server can read and delete every log; $TERN_INSECURE")
	fs.BoolVar(&f.Pprof, "pprof", false, "serve /debug/pprof/ on --http (with --auth, to principals with admin on every log); $TERN_PPROF")
}

// resolveSecurity sets the security settings changed on the command line.
func (f *serveFlags) resolveSecurity(fs *pflag.FlagSet, cfg *serveConfig) {
	for _, v := range []struct {
		dst  *string
		flag string
		v    string
	}{{&cfg.TLSCert, "tls-cert", f.TLSCert}, {&cfg.TLSKey, "tls-key", f.TLSKey}, {&cfg.TLSClientCA, "tls-client-ca", f.TLSClientCA}, {&cfg.Auth, "auth", f.Auth}} {
		if fs.Changed(v.flag) {
			*v.dst = v.v
		}
	}
	if fs.Changed("insecure") {
		cfg.Insecure = f.Insecure
	}
	if fs.Changed("pprof") {
		cfg.Pprof = f.Pprof
	}
}

// check validates the security settings; the files are read by the server
// at start.
func (s serveSecurity) check() error {
	switch {
	case (s.TLSCert == "") != (s.TLSKey == ""):
		return configErrorf("--tls-cert and --tls-key go together: give both (or $TERN_TLS_CERT and $TERN_TLS_KEY, or tls_cert: and tls_key: in the config file)")
	case s.TLSClientCA != "" && s.TLSCert == "":
		return configErrorf("--tls-client-ca asks clients for certificates over TLS, and TLS is off: give --tls-cert and --tls-key too")
	}
	return nil
}
