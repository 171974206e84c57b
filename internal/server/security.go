package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ternwal/tern/internal/auth"
	"github.com/ternwal/tern/internal/certs"
)

// certsWatchInterval is how often the TLS files are checked for a change.
const certsWatchInterval = 5 * time.Second

// loadSecurity loads the TLS material (into r.certs) and the auth file of
// cfg, refusing files that do not parse.
func loadSecurity(cfg Config, r *Running) (*auth.Policy, error) {
	t := cfg.TLS
	switch {
	case t.Cert == "" && t.Key == "" && t.ClientCA == "":
	case t.Cert == "" || t.Key == "":
		return nil, errors.New("TLS needs both a certificate and its key: give --tls-cert and --tls-key (and --tls-client-ca for mTLS)")
	default:
		st, err := certs.Load(t)
		if err != nil {
			return nil, err
		}
		r.certs = st
	}
	if cfg.AuthFile == "" {
		return nil, nil
	}
	return auth.Load(cfg.AuthFile)
}

// checkExposure refuses a listener beyond loopback without TLS and an auth
// file, unless cfg.Insecure says so; then it warns, and exports
// tern_server_insecure 1.
func checkExposure(cfg Config, tlsOn, authOn bool, logger *slog.Logger, reg prometheus.Registerer) error {
	var exposed []string
	if !tlsOn || !authOn {
		for _, a := range []struct{ addr, flag string }{{cfg.Listen, "--listen"}, {cfg.HTTP, "--http"}} {
			if !Loopback(a.addr) {
				exposed = append(exposed, fmt.Sprintf("%s %s", a.flag, a.addr))
			}
		}
	}
	insecure := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tern_server_insecure",
		Help: "1 when the server listens beyond loopback without TLS and an auth file, because --insecure said so; else 0.",
	})
	reg.MustRegister(insecure)
	if len(exposed) == 0 {
		return nil
	}
	var missing []string
	if !tlsOn {
		missing = append(missing, "TLS")
	}
	if !authOn {
		missing = append(missing, "an auth file")
	}
	what := strings.Join(exposed, " and ") + " beyond loopback without " + strings.Join(missing, " or ")
	if !cfg.Insecure {
		return fmt.Errorf("refusing to listen on %s: anyone who reaches it could read, append to, truncate and delete every log. Give --tls-cert, --tls-key and --auth (docs/security.md), listen on 127.0.0.1, or say --insecure to accept it", what)
	}
	insecure.Set(1)
	logger.Warn("INSECURE: listening on " + what + " (--insecure): anyone who reaches this server can read, append to, truncate and delete every log")
	return nil
}

// Loopback reports whether an address (host:port, or a bare host) is on
// loopback only: an empty or unspecified host is every interface.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// watchCerts reloads r.certs when its files change, until r closes, and
// exports the certificate's expiry.
func watchCerts(r *Running, reg prometheus.Registerer, logger *slog.Logger) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tern_tls_certificate_expiry_timestamp_seconds",
		Help: "When the certificate the server serves expires, in seconds since the epoch: alert well before it.",
	}, func() float64 { return float64(r.certs.Certificate().NotAfter.Unix()) }))
	warnExpiry(r.certs, logger)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.certs.Watch(ctx, certsWatchInterval, func(err error) { reportReload(r.certs, err, logger) })
	}()
	r.undo.push("", func() error { cancel(); <-done; return nil })
}

func reportReload(st *certs.Store, err error, logger *slog.Logger) {
	if err != nil {
		logger.Error("TLS files not reloaded; still serving the certificate loaded before", "err", err)
		return
	}
	c := st.Certificate()
	logger.Info("TLS certificate reloaded", "subject", c.Subject.String(), "not_after", c.NotAfter)
	warnExpiry(st, logger)
}

func warnExpiry(st *certs.Store, logger *slog.Logger) {
	if left := time.Until(st.Expiry()); left < certs.ExpiryWarning {
		logger.Warn("the TLS certificate expires soon: renew it (the server reloads the files when they change)", "not_after", st.Expiry(), "left", left.Round(time.Minute))
	}
}

// Reload reads the TLS files and the auth file again, as SIGHUP asks: a
// file that fails to load leaves the one before in force, and the error
// says which.
func (r *Running) Reload() error {
	var errs []error
	if r.certs != nil {
		err := r.certs.Reload()
		reportReload(r.certs, err, r.logger)
		errs = append(errs, err)
	}
	if r.cfg.AuthFile != "" {
		p, err := auth.Load(r.cfg.AuthFile)
		if err != nil {
			r.logger.Error("auth file not reloaded; the one loaded before stays in force", "err", err)
			errs = append(errs, err)
		} else {
			r.srv.SetPolicy(p)
			r.logger.Info("auth file reloaded", "file", r.cfg.AuthFile, "principals", len(p.Principals))
		}
	}
	return errors.Join(errs...)
}

// checkNodeCert refuses to join a cluster with a certificate the other
// nodes would refuse: the nodes authenticate each other by mTLS, with
// certificates of the CA of --tls-client-ca, and with an auth file, of a
// node principal.
func checkNodeCert(st *certs.Store, policy *auth.Policy) error {
	if st == nil {
		return nil
	}
	if !st.Mutual() {
		return errors.New("a node of a cluster with TLS needs --tls-client-ca, the CA of the nodes' certificates: the nodes authenticate each other by mTLS")
	}
	c := st.Certificate()
	if err := st.VerifyClient(c); err != nil {
		return fmt.Errorf("this node's certificate (%s) is not one the other nodes accept, as they verify it with --tls-client-ca: %w", c.Subject, err)
	}
	if policy != nil {
		if p, ok := policy.ByCert(c); !ok || !p.Node {
			return fmt.Errorf("this node's certificate (%s) is not a node principal of the auth file: add a principal with its subject and node: true, on every node, or the others refuse its replica traffic", c.Subject)
		}
	}
	return nil
}

// nodeTLS is the TLS configuration a node dials another node at addr with,
// or nil without TLS.
func nodeTLS(st *certs.Store, addr string) *tls.Config {
	if st == nil {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return st.ClientConfig(host)
}
