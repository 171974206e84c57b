package driver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ternwal/tern/internal/auth"
	"github.com/ternwal/tern/internal/certs"
)

// Security is how the server started in this process (Loopback) is
// reached: over TLS, with a bearer token, both or neither (the zero value).
type Security struct {
	// TLS serves TLS with a certificate made for the run (ECDSA P-256,
	// self-signed, for 127.0.0.1), which the client trusts; the session
	// cache is off, so every new connection makes a full handshake.
	TLS bool
	// Token gives the server an auth file with one principal, granted
	// everything on every log, known by a token made for the run, which
	// the client sends with every call.
	Token bool
	// NoDedup: the server applies appends without their producers'
	// numbers (server.Options.NoDedup, unsafe), to measure what
	// deduplication costs.
	NoDedup bool
}

// Secured measures a server started in this process, as Loopback does,
// reached as sec says.
func Secured(sec Security) Mode { return Mode{loopback: true, sec: sec} }

// String says how the server is reached, for people: "plaintext", "TLS",
// "TLS, token", "plaintext, token".
func (s Security) String() string {
	parts := []string{"plaintext"}
	if s.TLS {
		parts[0] = "TLS"
	}
	if s.Token {
		parts = append(parts, "token")
	}
	if s.NoDedup {
		parts = append(parts, "no dedup (unsafe)")
	}
	return strings.Join(parts, ", ")
}

// security is the material of a Security, made for one server: the files
// the server loads, what the client trusts and sends.
type security struct {
	certs  *certs.Store   // nil without TLS
	roots  *x509.CertPool // the certificate, for the client
	policy *auth.Policy   // nil without a token
	token  string
}

// makeSecurity makes sec's certificate and auth file in dir.
func makeSecurity(dir string, sec Security) (*security, error) {
	s := &security{}
	if sec.TLS {
		files, cert, err := writeCert(dir)
		if err != nil {
			return nil, fmt.Errorf("driver: make the run's certificate: %w", err)
		}
		if s.certs, err = certs.Load(files); err != nil {
			return nil, err
		}
		s.roots = x509.NewCertPool()
		s.roots.AddCert(cert)
	}
	if sec.Token {
		var err error
		if s.token, err = auth.NewToken(); err != nil {
			return nil, err
		}
		hash, err := auth.HashToken(s.token)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, "auth.yaml")
		file := fmt.Sprintf(`principals:
  - name: bench
    token_hash: %q
    grants:
      - {prefix: "", allow: [read, append, subscribe, admin]}
`, hash)
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			return nil, err
		}
		if s.policy, err = auth.Load(path); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// clientTLS is the client's TLS configuration: it trusts the run's
// certificate, and keeps no sessions, so that no handshake is resumed.
func (s *security) clientTLS() *tls.Config {
	if s.certs == nil {
		return nil
	}
	return &tls.Config{RootCAs: s.roots, ServerName: "127.0.0.1"}
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key
// (ECDSA P-256) in dir, and returns their files and the certificate.
func writeCert(dir string) (certs.Files, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return certs.Files{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return certs.Files{}, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "tern bench"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return certs.Files{}, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return certs.Files{}, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return certs.Files{}, nil, err
	}
	f := certs.Files{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
	if err := os.WriteFile(f.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return certs.Files{}, nil, err
	}
	if err := os.WriteFile(f.Key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return certs.Files{}, nil, err
	}
	return f, cert, nil
}

// Describe says, for people, what a measure through a server in this
// process reached as sec measures; with TLS it makes a certificate in a
// new directory inside dir, removed afterwards, and one connection, to
// learn the version and key exchange the client and server agree on.
func Describe(dir string, sec Security) (string, error) {
	what := "through a server in this process (gRPC on loopback)"
	if !sec.TLS {
		if sec.Token {
			return what + ", in plaintext with a bearer token", nil
		}
		return what + ", in plaintext", nil
	}
	dir, err := os.MkdirTemp(dir, "describe-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	s, err := makeSecurity(dir, Security{TLS: true})
	if err != nil {
		return "", err
	}
	st, err := handshakeOnce(s)
	if err != nil {
		return "", err
	}
	what += fmt.Sprintf(", over %s (%s, ECDSA P-256 certificate)", tls.VersionName(st.Version), st.CurveID)
	if sec.Token {
		what += " with a bearer token"
	}
	return what, nil
}

// handshakeOnce makes one TLS handshake between the configurations a
// server and a client of s use, over loopback, and returns its state.
func handshakeOnce(s *security) (tls.ConnectionState, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer lis.Close()
	served := make(chan error, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		served <- tls.Server(c, s.certs.ServerConfig()).Handshake()
	}()
	conf := s.clientTLS()
	conf.NextProtos = []string{"h2"}
	c, err := tls.Dial("tcp", lis.Addr().String(), conf)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer c.Close()
	if err := <-served; err != nil {
		return tls.ConnectionState{}, err
	}
	return c.ConnectionState(), nil
}
