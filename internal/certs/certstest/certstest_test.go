package certstest_test

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/certs/certstest"
)

func TestIssue(t *testing.T) {
	ca := certstest.NewCA(t, "test-ca")
	if !ca.Cert.IsCA || ca.Cert.Subject.CommonName != "test-ca" {
		t.Fatalf("CA: IsCA %v, subject %q", ca.Cert.IsCA, ca.Cert.Subject)
	}
	notAfter := time.Now().Add(time.Hour).Truncate(time.Second)
	l := ca.Issue(t, certstest.LeafOptions{
		CommonName: "svc",
		DNS:        []string{"svc.example"},
		IPs:        []net.IP{net.ParseIP("127.0.0.1")},
		URIs:       []string{"spiffe://example/svc"},
		Emails:     []string{"svc@example.com"},
		NotAfter:   notAfter,
		Client:     true,
	})
	c := l.Cert
	if c.DNSNames[0] != "svc.example" || !c.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) ||
		c.URIs[0].String() != "spiffe://example/svc" || c.EmailAddresses[0] != "svc@example.com" {
		t.Errorf("SANs: %v %v %v %v", c.DNSNames, c.IPAddresses, c.URIs, c.EmailAddresses)
	}
	if !c.NotAfter.Equal(notAfter) || !c.NotBefore.Before(time.Now()) {
		t.Errorf("validity %s to %s", c.NotBefore, c.NotAfter)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("a client certificate does not verify for clients: %v", err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "svc.example"}); err == nil {
		t.Error("a client-only certificate verifies for servers")
	}
	if tc := l.TLSCertificate(t); tc.Leaf == nil || !tc.Leaf.Equal(c) {
		t.Error("TLSCertificate's leaf is not the certificate")
	}
	if other := ca.Issue(t, certstest.LeafOptions{CommonName: "svc"}); other.Cert.SerialNumber.Cmp(c.SerialNumber) == 0 {
		t.Error("two certificates share a serial number")
	}
}

func TestWriteFiles(t *testing.T) {
	ca := certstest.NewCA(t, "test-ca")
	l := ca.Issue(t, certstest.LeafOptions{CommonName: "svc", Server: true})
	dir := t.TempDir()
	cert, key, caFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem"), filepath.Join(dir, "ca.pem")
	l.WriteFiles(t, cert, key)
	ca.WriteFile(t, caFile)
	l.WriteFiles(t, cert, key) // over existing files
	for path, want := range map[string][]byte{cert: l.CertPEM, key: l.KeyPEM, caFile: ca.PEM} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(want) {
			t.Errorf("%s does not hold what was written", path)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("the directory holds %d files, want 3 (no temporary file left)", len(ents))
	}
}
