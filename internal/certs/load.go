package certs

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// timeFormat is how the errors spell a certificate's validity bounds.
const timeFormat = time.RFC3339

// readMaterial reads and checks the files as they are at now.
func readMaterial(f Files, now time.Time) (*material, error) {
	certPEM, err := readFile("certificate", "--tls-cert", f.Cert)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readFile("key", "--tls-key", f.Key)
	if err != nil {
		return nil, err
	}
	chain, err := parseCertFile(f.Cert, certPEM)
	if err != nil {
		return nil, err
	}
	leaf := chain[0]
	if err := checkValid(f.Cert, leaf, now); err != nil {
		return nil, err
	}
	key, err := parseKeyFile(f.Key, keyPEM)
	if err != nil {
		return nil, err
	}
	pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return nil, fmt.Errorf("certs: the key in %s does not match the certificate in %s (subject %q, serial %s): give the key the certificate was issued for (--tls-key) with its certificate (--tls-cert)",
			f.Key, f.Cert, leaf.Subject, leaf.SerialNumber)
	}
	m := &material{
		cert:  &tls.Certificate{PrivateKey: key, Leaf: leaf},
		inter: poolOf(chain[1:]),
	}
	for _, c := range chain {
		m.cert.Certificate = append(m.cert.Certificate, c.Raw)
	}
	if f.ClientCA != "" {
		caPEM, err := readFile("client CA", "--tls-client-ca", f.ClientCA)
		if err != nil {
			return nil, err
		}
		if m.pool, err = parseClientCA(f.ClientCA, caPEM, now); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func readFile(what, flag, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		reason := err
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			reason = pe.Err // the path is said once, below
		}
		return nil, fmt.Errorf("certs: cannot read the %s file %s (%s): %w: give the path of a PEM file that tern's user can read",
			what, path, flag, reason)
	}
	return b, nil
}

// blocks returns the PEM blocks of a file, in order.
func blocks(b []byte) []*pem.Block {
	var bs []*pem.Block
	for {
		var p *pem.Block
		if p, b = pem.Decode(b); p == nil {
			return bs
		}
		bs = append(bs, p)
	}
}

func isKeyBlock(p *pem.Block) bool { return strings.HasSuffix(p.Type, "PRIVATE KEY") }

// parseCertFile returns the certificates of a certificate file, the leaf
// first.
func parseCertFile(path string, b []byte) ([]*x509.Certificate, error) {
	var chain []*x509.Certificate
	sawKey := false
	for _, p := range blocks(b) {
		switch {
		case p.Type == "CERTIFICATE":
			c, err := x509.ParseCertificate(p.Bytes)
			if err != nil {
				return nil, fmt.Errorf("certs: certificate %d of %s does not parse: %w: give a PEM certificate file (--tls-cert) as a CA issued it", len(chain)+1, path, err)
			}
			chain = append(chain, c)
		case isKeyBlock(p):
			sawKey = true
		}
	}
	if len(chain) > 0 {
		return chain, nil
	}
	if sawKey {
		return nil, fmt.Errorf("certs: %s holds a private key but no certificate: --tls-cert names the certificate file and --tls-key the key file; were they swapped?", path)
	}
	return nil, fmt.Errorf("certs: %s holds no PEM certificate (no BEGIN CERTIFICATE block): give --tls-cert the certificate in PEM (a DER file converts with openssl x509 -inform der)", path)
}

// checkValid refuses a certificate that is not valid at now.
func checkValid(path string, c *x509.Certificate, now time.Time) error {
	switch {
	case now.Before(c.NotBefore):
		return fmt.Errorf("certs: the certificate in %s (subject %q) is not valid yet: its NotBefore is %s and it is now %s: check this machine's clock, or give a certificate valid now",
			path, c.Subject, c.NotBefore.UTC().Format(timeFormat), now.UTC().Format(timeFormat))
	case now.After(c.NotAfter):
		return fmt.Errorf("certs: the certificate in %s (subject %q) has expired: its NotAfter is %s and it is now %s: renew it and replace the file",
			path, c.Subject, c.NotAfter.UTC().Format(timeFormat), now.UTC().Format(timeFormat))
	}
	return nil
}

// parseKeyFile returns the first private key of a key file.
func parseKeyFile(path string, b []byte) (crypto.Signer, error) {
	sawCert := false
	for _, p := range blocks(b) {
		if p.Type == "CERTIFICATE" {
			sawCert = true
		}
		if !isKeyBlock(p) {
			continue
		}
		if p.Type == "ENCRYPTED PRIVATE KEY" || p.Headers["Proc-Type"] != "" {
			return nil, fmt.Errorf("certs: the key in %s is encrypted: tern reads unencrypted keys only; decrypt it into a file only tern's user can read", path)
		}
		var (
			key any
			err error
		)
		switch p.Type {
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(p.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(p.Bytes)
		default:
			key, err = x509.ParsePKCS8PrivateKey(p.Bytes)
		}
		if err != nil {
			return nil, fmt.Errorf("certs: the %s block of %s does not parse: %w: give the key in PEM (PKCS #8, PKCS #1 or SEC 1)", p.Type, path, err)
		}
		s, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("certs: the key in %s is a %T, which cannot sign: give an ECDSA, RSA or Ed25519 key", path, key)
		}
		return s, nil
	}
	if sawCert {
		return nil, fmt.Errorf("certs: %s holds a certificate but no private key: --tls-key names the key file and --tls-cert the certificate file; were they swapped?", path)
	}
	return nil, fmt.Errorf("certs: %s holds no PEM private key (no BEGIN PRIVATE KEY block): give --tls-key the certificate's key in PEM", path)
}

// parseClientCA returns the pool of the CA certificates of a client CA file.
// Certificates that are not CAs are left out: Go never accepts them as the
// issuer of a chain.
func parseClientCA(path string, b []byte, now time.Time) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	var cas, valid, others int
	var first *x509.Certificate
	for _, p := range blocks(b) {
		if p.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(p.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certs: certificate %d of %s does not parse: %w: give --tls-client-ca the CA certificates in PEM", cas+others+1, path, err)
		}
		if !c.BasicConstraintsValid || !c.IsCA {
			others++
			continue
		}
		cas++
		if first == nil {
			first = c
		}
		if !now.Before(c.NotBefore) && !now.After(c.NotAfter) {
			valid++
		}
		pool.AddCert(c)
	}
	switch {
	case cas == 0 && others == 0:
		return nil, fmt.Errorf("certs: %s holds no PEM certificate (no BEGIN CERTIFICATE block): give --tls-client-ca the certificate of the CA that issues client certificates, in PEM", path)
	case cas == 0:
		return nil, fmt.Errorf("certs: %s holds %d certificate(s) but no CA certificate (basic constraints CA:TRUE): give --tls-client-ca the certificate of the CA that issues client certificates, not a client's", path, others)
	case valid == 0:
		return nil, fmt.Errorf("certs: no CA certificate in %s is valid now (the first, %q, is valid from %s to %s): give the CA's current certificate",
			path, first.Subject, first.NotBefore.UTC().Format(timeFormat), first.NotAfter.UTC().Format(timeFormat))
	}
	return pool, nil
}
