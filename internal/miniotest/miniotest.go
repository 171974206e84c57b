// Package miniotest starts a real MinIO server for a test: the pinned
// binary that scripts/install-minio builds, on loopback ports, with its data
// in the test's temporary directory.
//
// A missing binary fails the test with the command that installs it; it is
// never skipped, so that CI cannot pass without the S3 coverage.
package miniotest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Version is the MinIO module version scripts/install-minio builds.
const Version = "v0.0.0-20260212201848-7aac2a2c5b7c"

// The credentials of every test server: throwaway, loopback only.
const (
	AccessKey = "ternminio"
	SecretKey = "ternminio-secret"
)

// Server is a running MinIO with one empty bucket.
type Server struct {
	// Endpoint is host:port of the S3 API, plain HTTP.
	Endpoint  string
	AccessKey string
	SecretKey string
	// Bucket exists and is empty when Start returns.
	Bucket string
	// Client is connected to Endpoint with the credentials.
	Client *minio.Client
	// PID is the server's process ID.
	PID int
	// CAFile is, for a server started by StartTLS, the PEM file of its
	// self-signed certificate, to trust; empty for plain HTTP.
	CAFile string

	bin, data, console string
	certs              string // --certs-dir, for TLS
	stop               func() // stops the running process; nil after Stop
}

// Stop stops the server (SIGTERM, then SIGKILL after 10s), keeping its data,
// to simulate an outage of the object store. Restart starts it again.
func (s *Server) Stop() {
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
}

// Kill stops the server with SIGKILL, keeping its data.
func (s *Server) Kill() {
	if s.stop != nil {
		syscall.Kill(s.PID, syscall.SIGKILL)
		s.stop()
		s.stop = nil
	}
}

// Restart starts a stopped server again on the same address and data. It
// fails t if it cannot.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.stop != nil {
		t.Fatal("miniotest: Restart of a running server")
	}
	var err error
	for attempt := 1; attempt <= 20; attempt++ {
		var n *Server
		if n, err = run(t, s.bin, s.data, s.certs, s.Endpoint, s.console); err == nil {
			s.PID, s.stop = n.PID, n.stop
			return
		}
		time.Sleep(250 * time.Millisecond) // the port may still be held
	}
	t.Fatalf("miniotest: restart: %v", err)
}

// Binary returns the path where scripts/install-minio puts the pinned MinIO:
// ${XDG_CACHE_HOME:-$HOME/.cache}/tern/minio/VERSION/minio.
func Binary() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("miniotest: %w", err)
	}
	return filepath.Join(cache, "tern", "minio", Version, "minio"), nil
}

// InstallCommand is the command that installs the binary, as a path from the
// current directory when the repository root can be found above it.
func InstallCommand() string {
	dir, err := os.Getwd()
	for err == nil {
		if _, serr := os.Stat(filepath.Join(dir, "scripts", "install-minio")); serr == nil {
			if rel, rerr := filepath.Rel(".", filepath.Join(dir, "scripts", "install-minio")); rerr == nil {
				return rel
			}
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "scripts/install-minio"
}

// Start starts a MinIO for t, creates a bucket in it and stops it when t
// ends. It fails t if the server cannot be started.
func Start(t testing.TB) *Server {
	t.Helper()
	return startWith(t, false)
}

// StartTLS is Start with HTTPS, on a self-signed certificate for 127.0.0.1
// whose PEM is in CAFile.
func StartTLS(t testing.TB) *Server {
	t.Helper()
	return startWith(t, true)
}

func startWith(t testing.TB, tls bool) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("miniotest: the pinned MinIO is not installed (%v): run %s from the repository root, which builds it in a few minutes", err, InstallCommand())
	}
	data := t.TempDir()
	certs := ""
	if tls {
		certs = t.TempDir()
		if err := writeCert(certs); err != nil {
			t.Fatal(err)
		}
	}
	var s *Server
	for attempt := 1; ; attempt++ {
		s, err = start(t, bin, data, certs)
		if err == nil || attempt == 3 {
			break
		}
		t.Logf("miniotest: attempt %d: %v; retrying", attempt, err)
	}
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mo := &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, "")}
	if tls {
		if mo.Transport, err = s.transport(); err != nil {
			t.Fatal(err)
		}
		mo.Secure = true
	}
	s.Client, err = minio.New(s.Endpoint, mo)
	if err != nil {
		t.Fatalf("miniotest: client: %v", err)
	}
	s.Bucket = "tern-test"
	if err := s.Client.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("miniotest: create bucket %s: %v", s.Bucket, err)
	}
	return s
}

// start runs one attempt to start the server on fresh ports. A port found
// free may be taken by someone else before MinIO binds it; the caller
// retries then.
func start(t testing.TB, bin, data, certs string) (*Server, error) {
	api, err := freePort()
	if err != nil {
		return nil, err
	}
	console, err := freePort()
	if err != nil {
		return nil, err
	}
	return run(t, bin, data, certs, fmt.Sprintf("127.0.0.1:%d", api), fmt.Sprintf("127.0.0.1:%d", console))
}

// run starts the server on the given addresses, with TLS if certs is a
// directory holding its certificate.
func run(t testing.TB, bin, data, certs, endpoint, console string) (*Server, error) {
	args := []string{"server", "--quiet", "--address", endpoint, "--console-address", console}
	if certs != "" {
		args = append(args, "--certs-dir", certs)
	}
	cmd := exec.Command(bin, append(args, data)...)
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+AccessKey,
		"MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_UPDATE=off",
	)
	out := new(syncBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("miniotest: start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	s := &Server{Endpoint: endpoint, AccessKey: AccessKey, SecretKey: SecretKey, PID: cmd.Process.Pid,
		bin: bin, data: data, console: console, certs: certs}
	if certs != "" {
		s.CAFile = filepath.Join(certs, "public.crt")
	}
	if err := s.waitLive(exited); err != nil {
		stop()
		return nil, fmt.Errorf("miniotest: %w; its output:\n%s", err, out.String())
	}
	var once sync.Once
	s.stop = func() { once.Do(stop) }
	t.Cleanup(s.stop)
	return s, nil
}

// transport trusts the server's self-signed certificate.
func (s *Server) transport() (*http.Transport, error) {
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		return nil, fmt.Errorf("miniotest: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	return tr, nil
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key
// where MinIO's --certs-dir looks for them.
func writeCert(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tern-test MinIO"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "public.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "private.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
}

// waitLive polls MinIO's liveness probe until it answers 200, the process
// exits, or 30 seconds pass.
func (s *Server) waitLive(exited <-chan struct{}) error {
	endpoint := s.Endpoint
	client := &http.Client{Timeout: time.Second}
	url := "http://" + endpoint + "/minio/health/live"
	if s.CAFile != "" {
		tr, err := s.transport()
		if err != nil {
			return err
		}
		client.Transport = tr
		url = "https://" + endpoint + "/minio/health/live"
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("MinIO exited before it was ready")
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("MinIO not ready on %s after 30s", endpoint)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("miniotest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer is the server's output, written by exec's copying goroutine
// and read on failure.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 64<<10 {
		return len(p), nil // enough to tell what went wrong
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
