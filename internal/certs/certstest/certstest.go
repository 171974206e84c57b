// Package certstest makes certificates for tests: a CA, and leaves it
// issues for servers and clients, written to files as tern serve reads
// them. Keys are ECDSA P-256, made with crypto/x509 alone. Every function
// calls t.Fatal on an error.
package certstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a self-signed certificate authority, valid from an hour ago for a
// year.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	PEM  []byte // Cert in PEM
}

// NewCA returns a new CA whose subject's common name is name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("certstest: create CA %q: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("certstest: parse CA %q: %v", name, err)
	}
	return &CA{Cert: cert, Key: key, PEM: pemOf("CERTIFICATE", der)}
}

// Pool returns a pool that holds the CA alone, for a tls.Config's RootCAs
// or ClientCAs.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteFile writes the CA's certificate in PEM to path, mode 0600,
// atomically.
func (ca *CA) WriteFile(t testing.TB, path string) {
	t.Helper()
	writeAtomic(t, path, ca.PEM)
}

// LeafOptions says what a leaf certificate is for.
type LeafOptions struct {
	CommonName string
	DNS        []string
	IPs        []net.IP
	URIs       []string // parsed with url.Parse
	Emails     []string
	// NotBefore and NotAfter bound the validity; zero: an hour ago, and a
	// day from now.
	NotBefore, NotAfter time.Time
	// Server and Client set the extended key usages serverAuth and
	// clientAuth. Neither: the certificate has no extended key usage, which
	// Go accepts for any use.
	Server, Client bool
}

// Leaf is a certificate issued by a CA, and its key.
type Leaf struct {
	Cert    *x509.Certificate
	CertPEM []byte // the certificate alone
	KeyPEM  []byte // PKCS #8
}

// Issue returns a new leaf certificate, with a new key, signed by the CA.
func (ca *CA) Issue(t testing.TB, o LeafOptions) *Leaf {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:   serial(t),
		Subject:        pkix.Name{CommonName: o.CommonName},
		DNSNames:       o.DNS,
		IPAddresses:    o.IPs,
		EmailAddresses: o.Emails,
		NotBefore:      o.NotBefore,
		NotAfter:       o.NotAfter,
		KeyUsage:       x509.KeyUsageDigitalSignature,
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = now.Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = now.Add(24 * time.Hour)
	}
	for _, s := range o.URIs {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("certstest: URI %q: %v", s, err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	if o.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if o.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatalf("certstest: issue %q: %v", o.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("certstest: parse %q: %v", o.CommonName, err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("certstest: marshal the key of %q: %v", o.CommonName, err)
	}
	return &Leaf{Cert: cert, CertPEM: pemOf("CERTIFICATE", der), KeyPEM: pemOf("PRIVATE KEY", pkcs8)}
}

// WriteFiles writes the certificate and the key in PEM, mode 0600, each
// atomically (a temporary file renamed), so that a watcher never sees half
// a file. The certificate is written first: a watcher may see it with the
// old key, then with its own.
func (l *Leaf) WriteFiles(t testing.TB, certPath, keyPath string) {
	t.Helper()
	writeAtomic(t, certPath, l.CertPEM)
	writeAtomic(t, keyPath, l.KeyPEM)
}

// TLSCertificate returns the certificate and key for a tls.Config, with
// Leaf set.
func (l *Leaf) TLSCertificate(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatalf("certstest: key pair of %q: %v", l.Cert.Subject, err)
	}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("certstest: generate a key: %v", err)
	}
	return key
}

// serial returns a random 128-bit serial number, so that two certificates
// of a test never share one.
func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		t.Fatalf("certstest: serial number: %v", err)
	}
	return n
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writeAtomic writes b to path through a temporary file in the same
// directory, renamed over path.
func writeAtomic(t testing.TB, path string, b []byte) {
	t.Helper()
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		t.Fatalf("certstest: write %s: %v", path, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		t.Fatalf("certstest: write %s: %v", path, err)
	}
}
