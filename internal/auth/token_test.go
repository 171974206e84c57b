package auth

import (
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"net"
	"net/url"
	"strings"
	"testing"
)

func TestHashToken(t *testing.T) {
	const token = "0123456789abcdef" // MinTokenBytes exactly
	h, err := HashToken(token)
	sum := sha256.Sum256([]byte(token))
	if err != nil || h != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("HashToken = %q, %v", h, err)
	}
	if !tokenHashForm.MatchString(h) {
		t.Errorf("HashToken's %q is not what Parse accepts", h)
	}
	for _, tc := range []struct{ token, want string }{
		{"", "the token is 0 bytes, fewer than 16"},
		{"0123456789abcde", "the token is 15 bytes, fewer than 16"},
		{"0123456789 abcdef", "whitespace, a control character or invalid UTF-8 at byte 10"},
		{"0123456789abcdef\n", "at byte 16"},
		{"\t0123456789abcdef", "at byte 0"},
		{"0123456789\x00abcdef", "at byte 10"},
		{"0123456789\xffabcdef", "at byte 10"},
		{"0123456789\u00a0abcdef", "at byte 10"}, // a no-break space
	} {
		_, err := HashToken(tc.token)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "tern auth new-token") {
			t.Errorf("HashToken(%q): %v, want %q", tc.token, err, tc.want)
		}
	}
}

func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, err := NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if len(tok) != 43 || strings.ContainsAny(tok, "+/=") || seen[tok] {
			t.Fatalf("NewToken = %q", tok)
		}
		seen[tok] = true
		if _, err := HashToken(tok); err != nil {
			t.Fatalf("HashToken(NewToken()): %v", err)
		}
	}
}

func TestByToken(t *testing.T) {
	tokA, tokB := mustToken(t), mustToken(t)
	hA, _ := HashToken(tokA)
	hB, _ := HashToken(tokB)
	weak := "short"
	hWeak := hashToken(weak) // what a file made without HashToken could hold
	p := &Policy{Principals: []*Principal{
		{Name: "cert", Subject: "CN=x"},
		{Name: "a", TokenHash: hA},
		{Name: "b", TokenHash: hB},
		{Name: "weak", TokenHash: hWeak},
		{Name: "junk", TokenHash: "sha256:zz"},
	}}
	for _, tc := range []struct{ token, want string }{
		{tokA, "a"}, {tokB, "b"}, {mustToken(t), ""}, {weak, ""}, {"", ""}, {hA, ""},
	} {
		got, ok := p.ByToken(tc.token)
		if ok != (tc.want != "") || ok && got.Name != tc.want || !ok && got != nil {
			t.Errorf("ByToken(%q) = %v, %v; want %q", tc.token, got, ok, tc.want)
		}
	}
	if _, ok := (*Policy)(nil).ByToken(tokA); ok {
		t.Error("a nil policy knows a token")
	}
}

func mustToken(t *testing.T) string {
	t.Helper()
	tok, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestByCert(t *testing.T) {
	p := &Policy{Principals: []*Principal{
		{Name: "ops", TokenHash: hashA},
		{Name: "indexer", Subject: "CN=indexer,O=acme"},
		{Name: "dns", SAN: "svc.example.com"},
		{Name: "ip", SAN: "10.1.2.3"},
		{Name: "ip6", SAN: "2001:db8::1"},
		{Name: "mail", SAN: "bot@example.com"},
		{Name: "uri", SAN: "spiffe://example.com/tern/reader"},
		{Name: "both", Subject: "CN=both", SAN: "both.example.com"},
	}}
	cert := func(cn string, f func(*x509.Certificate)) *x509.Certificate {
		c := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
		if f != nil {
			f(c)
		}
		return c
	}
	uri, _ := url.Parse("spiffe://example.com/tern/reader")
	for _, tc := range []struct {
		name string
		c    *x509.Certificate
		want string
	}{
		{"subject", cert("indexer", func(c *x509.Certificate) { c.Subject.Organization = []string{"acme"} }), "indexer"},
		{"subject without its O", cert("indexer", nil), ""},
		{"dns", cert("whatever", func(c *x509.Certificate) { c.DNSNames = []string{"other.example.com", "svc.example.com"} }), "dns"},
		{"ip", cert("", func(c *x509.Certificate) { c.IPAddresses = []net.IP{net.ParseIP("10.1.2.3")} }), "ip"},
		{"ip as 16 bytes", cert("", func(c *x509.Certificate) { c.IPAddresses = []net.IP{net.ParseIP("10.1.2.3").To16()} }), "ip"},
		{"ipv6", cert("", func(c *x509.Certificate) { c.IPAddresses = []net.IP{net.ParseIP("2001:0db8:0::1")} }), "ip6"},
		{"email", cert("", func(c *x509.Certificate) { c.EmailAddresses = []string{"bot@example.com"} }), "mail"},
		{"uri", cert("", func(c *x509.Certificate) { c.URIs = []*url.URL{uri} }), "uri"},
		{"subject of one, san of both", cert("both", func(c *x509.Certificate) { c.DNSNames = []string{"svc.example.com"} }), "both"},
		{"san of a principal with a subject too", cert("nobody", func(c *x509.Certificate) { c.DNSNames = []string{"both.example.com"} }), "both"},
		{"the subject beats an earlier san", cert("both", func(c *x509.Certificate) { c.EmailAddresses = []string{"bot@example.com"} }), "both"},
		{"unknown", cert("stranger", func(c *x509.Certificate) { c.DNSNames = []string{"example.com"} }), ""},
		{"an empty certificate matches no empty field", &x509.Certificate{}, ""},
	} {
		got, ok := p.ByCert(tc.c)
		if ok != (tc.want != "") || ok && got.Name != tc.want {
			t.Errorf("%s: ByCert = %v, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
	if _, ok := p.ByCert(nil); ok {
		t.Error("ByCert(nil) found a principal")
	}
}
