package auth

import (
	"crypto/x509"
	"errors"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that its errors wrap
// ErrBadFile and name a line, and that a policy it accepts has the
// invariants its doc comment promises.
func FuzzParse(f *testing.F) {
	f.Add(example)
	f.Add("principals:\n- {name: a, token_hash: " + hashA + ", grants: [{prefix: '', allow: [read]}]}\n")
	f.Add("principals:\n- {name: a, subject: x, node: true}\n- {name: b, san: x, quotas: {logs: 1, append_bytes_per_second: 1KiB}}\n")
	f.Add("principals:\n- &p {name: a, subject: x}\n- *p\n")
	f.Add("principals:\n  - name: a\n    subject: x\n    grants:\n      - prefix: a/\n        allow: [read, wirte]\n")
	f.Add("---\nprincipals: []\n---\n")
	f.Add("principals: {a: b}\n")
	f.Fuzz(func(t *testing.T, file string) {
		p, err := Parse([]byte(file))
		if err != nil {
			if p != nil || !errors.Is(err, ErrBadFile) {
				t.Fatalf("Parse = %v, %v", p, err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "auth: ") {
				t.Fatalf("error %q", msg)
			}
			return
		}
		checkPolicy(t, p)
	})
}

// checkPolicy fails t unless p has the invariants of Parse's policies.
func checkPolicy(t *testing.T, p *Policy) {
	t.Helper()
	if len(p.Principals) == 0 {
		t.Fatal("no principals")
	}
	names, tokens, subjects, sans := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	unique := func(m map[string]bool, v, what string) {
		if v == "" {
			return
		}
		if m[v] {
			t.Fatalf("two principals with %s %q", what, v)
		}
		m[v] = true
	}
	for _, pr := range p.Principals {
		if pr.Name == "" {
			t.Fatal("a principal without a name")
		}
		unique(names, pr.Name, "name")
		unique(tokens, pr.TokenHash, "token_hash")
		unique(subjects, pr.Subject, "subject")
		unique(sans, pr.SAN, "san")
		if pr.TokenHash == "" && pr.Subject == "" && pr.SAN == "" {
			t.Fatalf("principal %q cannot authenticate", pr.Name)
		}
		if pr.TokenHash != "" && !tokenHashForm.MatchString(pr.TokenHash) {
			t.Fatalf("principal %q: token_hash %q", pr.Name, pr.TokenHash)
		}
		if pr.Node && pr.TokenHash != "" {
			t.Fatalf("node %q has a token", pr.Name)
		}
		for _, g := range pr.Grants {
			if len(g.Allow) == 0 {
				t.Fatalf("principal %q: a grant of %q allows nothing", pr.Name, g.Prefix)
			}
			for _, perm := range g.Allow {
				if !perm.valid() {
					t.Fatalf("principal %q: permission %q", pr.Name, perm)
				}
				if !pr.Allows(perm, g.Prefix+"x") {
					t.Fatalf("principal %q: grant %q %s does not allow", pr.Name, g.Prefix, perm)
				}
			}
		}
		q := pr.Quotas
		if q.AppendBytesPerSecond < 0 || q.AppendBurstBytes < 0 || q.Logs < 0 || q.Subscriptions < 0 {
			t.Fatalf("principal %q: negative quotas %+v", pr.Name, q)
		}
		if q.AppendBurstBytes > 0 && q.AppendBytesPerSecond == 0 {
			t.Fatalf("principal %q: a burst without a rate", pr.Name)
		}
		if pr.SAN != "" {
			// SANs are unique, and the certificate's empty subject is no
			// principal's.
			if got, ok := p.ByCert(&x509.Certificate{DNSNames: []string{pr.SAN}}); !ok || got != pr {
				t.Fatalf("ByCert of %q's SAN = %v, %v", pr.Name, got, ok)
			}
		}
	}
}
