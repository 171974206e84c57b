package main

import (
	"strings"
	"testing"
)

// The security settings come from the file, the environment and the
// flags, each layer winning over the one before; half a pair is refused.
func TestSecurityConfig(t *testing.T) {
	path := writeConfig(t, `
tls_cert: /file/cert.pem
tls_key: /file/key.pem
tls_client_ca: /file/ca.pem
auth: /file/auth.yaml
insecure: true
pprof: true
`)
	want := serveSecurity{TLSCert: "/file/cert.pem", TLSKey: "/file/key.pem", TLSClientCA: "/file/ca.pem", Auth: "/file/auth.yaml", Insecure: true, Pprof: true}
	if got := printConfig(t, nil, "--config", path).serveSecurity; got != want {
		t.Errorf("from the file: %+v, want %+v", got, want)
	}
	env := map[string]string{"TERN_TLS_CERT": "/env/cert.pem", "TERN_TLS_KEY": "/env/key.pem", "TERN_AUTH": "/env/auth.yaml", "TERN_INSECURE": "false"}
	want = serveSecurity{TLSCert: "/env/cert.pem", TLSKey: "/env/key.pem", TLSClientCA: "/file/ca.pem", Auth: "/env/auth.yaml", Insecure: false, Pprof: true}
	if got := printConfig(t, env, "--config", path).serveSecurity; got != want {
		t.Errorf("env over the file: %+v, want %+v", got, want)
	}
	want = serveSecurity{TLSCert: "/flag/cert.pem", TLSKey: "/env/key.pem", TLSClientCA: "/flag/ca.pem", Auth: "/env/auth.yaml", Insecure: true, Pprof: false}
	if got := printConfig(t, env, "--config", path, "--tls-cert", "/flag/cert.pem", "--tls-client-ca", "/flag/ca.pem", "--insecure", "--pprof=false").serveSecurity; got != want {
		t.Errorf("flags over env: %+v, want %+v", got, want)
	}
	if got := printConfig(t, nil).serveSecurity; got != (serveSecurity{}) {
		t.Errorf("defaults: %+v, want none set", got)
	}

	for _, c := range []struct {
		env  map[string]string
		args []string
		want []string
	}{
		{nil, []string{"--tls-cert", "c.pem"}, []string{"--tls-cert and --tls-key go together"}},
		{map[string]string{"TERN_TLS_KEY": "k.pem"}, nil, []string{"--tls-cert and --tls-key go together", "$TERN_TLS_KEY"}},
		{nil, []string{"--tls-client-ca", "ca.pem"}, []string{"--tls-client-ca", "--tls-cert and --tls-key"}},
		{map[string]string{"TERN_INSECURE": "yes please"}, nil, []string{"$TERN_INSECURE", "true or false"}},
	} {
		r := ternEnv(t, c.env, append([]string{"serve", "--print-config"}, c.args...)...)
		if r.code != 2 {
			t.Errorf("%v %q: exit %d, want 2; stderr:\n%s", c.env, c.args, r.code, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v %q: stderr lacks %q:\n%s", c.env, c.args, w, r.stderr)
			}
		}
	}
}
