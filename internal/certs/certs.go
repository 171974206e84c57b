// Package certs holds a server's TLS material, the files of tern serve
// --tls-cert, --tls-key and --tls-client-ca, and reloads it when the files
// change: the tls.Configs it makes read the current material at each
// handshake, so a renewed certificate is served without a restart.
//
// A Store is loaded once (Load), then reloaded on demand (Reload, on SIGHUP)
// or when its files change (Watch). A reload that fails keeps the material
// the Store had: a half-written or wrong file never takes a server's
// certificate away. Connections opened before a reload keep the certificate
// they were made with; the next handshake uses the new one.
//
// In a cluster the nodes' certificates are issued by the CA of
// --tls-client-ca and serve both as server and as client certificates:
// ServerConfig asks every client for one, and ClientConfig presents the
// node's own and verifies the other node's against that CA.
package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ExpiryWarning is how close to its NotAfter a certificate is worth a
// warning: one that expires sooner loads, and the server says so (Expiry).
const ExpiryWarning = 7 * 24 * time.Hour

// Files names the PEM files of a server's TLS material.
type Files struct {
	// Cert holds the server's certificate, then any intermediates.
	Cert string
	// Key holds the certificate's private key (PKCS #8, PKCS #1 or SEC 1).
	Key string
	// ClientCA holds the CA certificates that issue client certificates.
	// Empty: no client certificate is asked for (no mutual TLS).
	ClientCA string
}

// Store is a server's current TLS material, made by Load (the zero Store is
// not usable). It is safe for concurrent use: handshakes read the material
// while Reload or Watch replaces it.
type Store struct {
	files Files
	cur   atomic.Pointer[material]

	// reload serializes loads, and guards seen.
	reload sync.Mutex
	// seen is what the files looked like at the start of the last load,
	// successful or not: Watch reloads when they look different.
	seen [3]stamp
}

// material is one consistent load of the files, never modified once stored.
type material struct {
	cert  *tls.Certificate // Leaf is set
	inter *x509.CertPool   // the intermediates of the certificate file
	pool  *x509.CertPool   // the client CAs; nil without a client CA file
}

// Load reads the files and checks them: each must be readable PEM, the
// certificate must be valid now and match the key, and the client CA file,
// when named, must hold at least one CA certificate. Its errors name the
// file, what is wrong with it and what to do.
func Load(f Files) (*Store, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("certs: a certificate and a key are both needed: give --tls-cert and --tls-key")
	}
	s := &Store{files: f}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload re-reads the files. On an error it keeps the material it had, and
// returns the error; handshakes go on with the old material either way.
func (s *Store) Reload() error {
	s.reload.Lock()
	defer s.reload.Unlock()
	return s.reloadLocked()
}

func (s *Store) reloadLocked() error {
	// The stamps are taken before the files are read: a change made while
	// they are read is seen as a change by the next poll.
	s.seen = s.stamps()
	m, err := readMaterial(s.files, time.Now())
	if err != nil {
		return err
	}
	s.cur.Store(m)
	return nil
}

// Files returns the files the Store reads.
func (s *Store) Files() Files { return s.files }

// Mutual reports whether clients must present a certificate (a client CA
// file was given).
func (s *Store) Mutual() bool { return s.files.ClientCA != "" }

// Certificate returns the current leaf certificate. The caller must not
// modify it.
func (s *Store) Certificate() *x509.Certificate { return s.cur.Load().cert.Leaf }

// Expiry returns when the current certificate expires. A server warns when
// it is less than ExpiryWarning away.
func (s *Store) Expiry() time.Time { return s.Certificate().NotAfter }

// VerifyClient checks that c, with the intermediates of the Store's own
// certificate file, verifies for client authentication against the current
// client CA: what a node checks of its own certificate before it joins a
// cluster, where the other nodes will check the same. It fails when the
// Store has no client CA.
func (s *Store) VerifyClient(c *x509.Certificate) error {
	m := s.cur.Load()
	if m.pool == nil {
		return errors.New("certs: no client CA to verify a client certificate against: give --tls-client-ca")
	}
	if c == nil {
		return errors.New("certs: no client certificate to verify")
	}
	_, err := c.Verify(x509.VerifyOptions{
		Roots:         m.pool,
		Intermediates: m.inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return fmt.Errorf("certs: certificate %q does not verify as a client certificate against the client CA %s: %w (issue it from that CA, with the clientAuth extended key usage)",
			c.Subject, s.files.ClientCA, err)
	}
	return nil
}

// poolOf returns a pool of certs.
func poolOf(certs []*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}
