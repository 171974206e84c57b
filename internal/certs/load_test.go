package certs_test

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/ternwal/tern/internal/certs"
	"github.com/ternwal/tern/internal/certs/certstest"
)

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoadGood(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	leaf := nodeLeaf(t, ca, "node-1")
	f := files(t, true)
	s := store(t, f, leaf, ca)
	if !s.Mutual() {
		t.Error("Mutual() = false with a client CA")
	}
	if got := s.Certificate(); got.SerialNumber.Cmp(leaf.Cert.SerialNumber) != 0 {
		t.Errorf("Certificate() serial %s, want %s", got.SerialNumber, leaf.Cert.SerialNumber)
	}
	if !s.Expiry().Equal(leaf.Cert.NotAfter) {
		t.Errorf("Expiry() = %s, want %s", s.Expiry(), leaf.Cert.NotAfter)
	}
	if s.Files() != f {
		t.Errorf("Files() = %+v, want %+v", s.Files(), f)
	}

	f.ClientCA = ""
	s, err := certs.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if s.Mutual() {
		t.Error("Mutual() = true without a client CA")
	}
}

// A key in SEC 1 form ("EC PRIVATE KEY", what openssl ecparam writes) and
// a certificate file followed by its CA load.
func TestLoadSEC1KeyAndChain(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	leaf := nodeLeaf(t, ca, "node-1")
	f := files(t, false)
	key, err := x509.ParsePKCS8PrivateKey(pemBytes(t, leaf.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	write(t, f.Key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}))
	write(t, f.Cert, append(append([]byte{}, leaf.CertPEM...), ca.PEM...))
	s, err := certs.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if s.Certificate().Subject.CommonName != "node-1" {
		t.Errorf("leaf %q, want node-1", s.Certificate().Subject)
	}
}

func pemBytes(t *testing.T, b []byte) []byte {
	p, _ := pem.Decode(b)
	if p == nil {
		t.Fatal("no PEM")
	}
	return p.Bytes
}

func TestLoadErrors(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	leaf := nodeLeaf(t, ca, "node-1")
	other := nodeLeaf(t, ca, "node-2")
	encrypted := pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1, 2, 3}})

	for _, tc := range []struct {
		name string
		// set up writes the files; the good ones are written before.
		setup func(f certs.Files)
		file  func(f certs.Files) string // the file the error must name
		want  []string
	}{
		{"missing cert", func(f certs.Files) { os.Remove(f.Cert) },
			func(f certs.Files) string { return f.Cert }, []string{"cannot read the certificate file", "--tls-cert", "no such file"}},
		{"missing key", func(f certs.Files) { os.Remove(f.Key) },
			func(f certs.Files) string { return f.Key }, []string{"cannot read the key file", "--tls-key"}},
		{"missing client CA", func(f certs.Files) { os.Remove(f.ClientCA) },
			func(f certs.Files) string { return f.ClientCA }, []string{"cannot read the client CA file", "--tls-client-ca"}},
		{"unreadable cert", func(f certs.Files) { os.Remove(f.Cert); os.Mkdir(f.Cert, 0o700) },
			func(f certs.Files) string { return f.Cert }, []string{"cannot read the certificate file"}},
		{"garbage cert", func(f certs.Files) { write(t, f.Cert, []byte("not a certificate")) },
			func(f certs.Files) string { return f.Cert }, []string{"no PEM certificate"}},
		{"cert and key swapped", func(f certs.Files) { write(t, f.Cert, leaf.KeyPEM); write(t, f.Key, leaf.CertPEM) },
			func(f certs.Files) string { return f.Cert }, []string{"private key but no certificate", "swapped"}},
		{"cert that does not parse", func(f certs.Files) {
			write(t, f.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}))
		}, func(f certs.Files) string { return f.Cert }, []string{"certificate 1 of", "does not parse"}},
		{"garbage key", func(f certs.Files) { write(t, f.Key, []byte("not a key")) },
			func(f certs.Files) string { return f.Key }, []string{"no PEM private key"}},
		{"key holds a certificate", func(f certs.Files) { write(t, f.Key, leaf.CertPEM) },
			func(f certs.Files) string { return f.Key }, []string{"certificate but no private key"}},
		{"encrypted key", func(f certs.Files) { write(t, f.Key, encrypted) },
			func(f certs.Files) string { return f.Key }, []string{"encrypted"}},
		{"key of another certificate", func(f certs.Files) { write(t, f.Key, other.KeyPEM) },
			func(f certs.Files) string { return f.Key }, []string{"does not match the certificate", "node-1"}},
		{"client CA without certificates", func(f certs.Files) { write(t, f.ClientCA, []byte("nothing")) },
			func(f certs.Files) string { return f.ClientCA }, []string{"no PEM certificate", "--tls-client-ca"}},
		{"client CA holds a leaf", func(f certs.Files) { write(t, f.ClientCA, leaf.CertPEM) },
			func(f certs.Files) string { return f.ClientCA }, []string{"no CA certificate", "CA:TRUE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := files(t, true)
			leaf.WriteFiles(t, f.Cert, f.Key)
			ca.WriteFile(t, f.ClientCA)
			tc.setup(f)
			s, err := certs.Load(f)
			if s != nil {
				t.Error("Load returned a Store with an error")
			}
			t.Log(err)
			mustFail(t, err, append(tc.want, "certs: ", tc.file(f))...)
		})
	}

	if _, err := certs.Load(certs.Files{Cert: "x"}); err == nil {
		t.Error("Load without a key: no error")
	}
	f := files(t, false)
	_, err := certs.Load(f)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of missing files: %v, want an error that is fs.ErrNotExist", err)
	}
}

func TestLoadRefusesInvalidNow(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	now := time.Now()
	for _, tc := range []struct {
		name      string
		notBefore time.Time
		notAfter  time.Time
		want      []string
	}{
		{"expired", now.Add(-48 * time.Hour), now.Add(-time.Hour), []string{"has expired", "NotAfter"}},
		{"not yet valid", now.Add(time.Hour), now.Add(48 * time.Hour), []string{"not valid yet", "NotBefore"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaf := ca.Issue(t, certstest.LeafOptions{CommonName: "old", DNS: []string{"localhost"}, Server: true,
				NotBefore: tc.notBefore, NotAfter: tc.notAfter})
			f := files(t, false)
			leaf.WriteFiles(t, f.Cert, f.Key)
			_, err := certs.Load(f)
			bound := tc.notAfter
			if tc.name != "expired" {
				bound = tc.notBefore
			}
			t.Log(err)
			mustFail(t, err, append(tc.want, f.Cert, bound.UTC().Format(time.RFC3339))...)
		})
	}
}

func TestLoadClientCAAllExpired(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	f := files(t, true)
	nodeLeaf(t, ca, "node-1").WriteFiles(t, f.Cert, f.Key)
	write(t, f.ClientCA, newExpiredCA(t))
	_, err := certs.Load(f)
	mustFail(t, err, "no CA certificate in", f.ClientCA, "is valid now")
}

// newExpiredCA returns the PEM of a CA certificate that expired an hour ago.
func newExpiredCA(t *testing.T) []byte {
	ca := certstest.NewCA(t, "expired-ca")
	// Re-sign the CA's own template with its validity in the past.
	tmpl := *ca.Cert
	tmpl.NotBefore = time.Now().Add(-48 * time.Hour)
	tmpl.NotAfter = time.Now().Add(-time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, ca.Key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// A certificate that expires within ExpiryWarning loads, and Expiry says when.
func TestExpirySoon(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	notAfter := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	leaf := ca.Issue(t, certstest.LeafOptions{CommonName: "soon", DNS: []string{"localhost"}, Server: true, NotAfter: notAfter})
	f := files(t, false)
	s := store(t, f, leaf, nil)
	if !s.Expiry().Equal(notAfter) {
		t.Errorf("Expiry() = %s, want %s", s.Expiry(), notAfter)
	}
	if time.Until(s.Expiry()) >= certs.ExpiryWarning {
		t.Errorf("a certificate expiring in 48h is not within ExpiryWarning (%s)", certs.ExpiryWarning)
	}
}
