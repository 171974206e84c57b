package server

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/internal/auth"
)

// httpMux serves the metrics of reg, the health checks and, with pprof,
// the profiles. /healthz and /readyz answer anyone (a load balancer's or
// Kubernetes' probes carry no credentials); /metrics needs an identity of
// the auth file, and /debug/pprof/ a principal with admin on every log
// (the prefix ""), as gRPC calls prove it: a bearer token in the
// Authorization header or a client certificate.
func httpMux(reg *prometheus.Registry, ready http.Handler, pprofOn bool, g *httpGuard) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", g.check("GET /metrics", false, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.Handle("/readyz", ready)
	if pprofOn {
		mux.Handle("/debug/pprof/", g.check("GET /debug/pprof/", true, http.HandlerFunc(pprof.Index))) // and the profiles by name: heap, goroutine, ...
		mux.Handle("/debug/pprof/cmdline", g.check("GET /debug/pprof/", true, http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", g.check("GET /debug/pprof/", true, http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", g.check("GET /debug/pprof/", true, http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", g.check("GET /debug/pprof/", true, http.HandlerFunc(pprof.Trace)))
	} else {
		mux.HandleFunc("/debug/pprof/", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "pprof is off: start tern serve with --pprof to serve it (to principals with admin on every log)", http.StatusNotFound)
		})
	}
	return mux
}

// httpGuard is the Server's guard as the HTTP listener sees it: set once
// the Server exists; until then the endpoints it protects answer 503.
// Under mTLS without an auth file (mutual), the certificate is the only
// credential: the endpoints it protects need one, as gRPC calls do.
type httpGuard struct {
	g      atomic.Pointer[guard]
	mutual bool
}

// check lets a request through to h when its caller may: any identity of
// the auth file, or with admin one granted admin on every log; without an
// auth file, anyone, or under mTLS any client with a certificate. A
// refusal is audited as op.
func (hg *httpGuard) check(op string, admin bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := hg.g.Load()
		if g == nil {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		var cert *x509.Certificate
		if r.TLS != nil {
			cert = verifiedCert(*r.TLS)
		}
		token, hasToken := bearer(r.Header.Values("Authorization"))
		who, err := g.identify(token, hasToken, cert)
		if err == nil && who.acc == nil && hg.mutual && cert == nil {
			err = fmt.Errorf("%w: the server requires a client certificate of its CA (--tls-client-ca)", rpcerr.ErrUnauthenticated)
		}
		if err == nil && admin && who.acc != nil && !who.p.Allows(auth.Admin, "") {
			err = fmt.Errorf("%w: principal %q may not read profiles: /debug/pprof/ needs admin on every log (a grant of admin on the prefix \"\")", rpcerr.ErrPermissionDenied, who.name)
		}
		if err != nil {
			g.record(who.name, op, "", err)
			code := http.StatusForbidden
			if errors.Is(err, rpcerr.ErrUnauthenticated) {
				code = http.StatusUnauthorized
				w.Header().Set("WWW-Authenticate", `Bearer realm="tern"`)
			}
			http.Error(w, err.Error(), code)
			return
		}
		h.ServeHTTP(w, r)
	})
}
