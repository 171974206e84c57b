package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ternwal/tern/client/grpcopts"
)

// reconnectMax is the longest pause between two dials of a node that cannot
// be reached.
const reconnectMax = 250 * time.Millisecond

// diagnoseTimeout bounds the connection diagnose makes.
const diagnoseTimeout = 5 * time.Second

// dialOptions are the options of a connection to the node at addr: the
// client's TLS, checking that the node's certificate holds addr's host
// unless Options.TLS names a ServerName, and its token. A connection that
// broke is dialed again after at most reconnectMax, so that a server back
// from a restart is found within that (gRPC's default waits up to 2
// minutes, and fails the calls meanwhile).
func (c *Client) dialOptions(addr string) []grpc.DialOption {
	opts := append(grpcopts.Dial(), grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           grpcbackoff.Config{BaseDelay: backoffFirst, Multiplier: 1.6, Jitter: 0.2, MaxDelay: reconnectMax},
		MinConnectTimeout: 20 * time.Second, // gRPC's default
	}))
	if c.tls == nil {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tlsFor(c.tls, addr))))
	}
	if c.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(c.token)))
	}
	return opts
}

// tlsFor is a copy of cfg for a connection to addr: its ServerName is
// addr's host when cfg has none, so that each node of a cluster is checked
// against its own name.
func tlsFor(cfg *tls.Config, addr string) *tls.Config {
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	return cfg
}

// bearer is a token that every call carries in its metadata, as
// "authorization: Bearer <token>".
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false: a server on loopback may check tokens
// without TLS. Over plaintext anywhere else, whoever sees the traffic sees
// the token.
func (bearer) RequireTransportSecurity() bool { return false }

// checkToken checks that a token can go in a header: printable ASCII, no
// spaces.
func checkToken(token string) error {
	for i := 0; i < len(token); i++ {
		if b := token[i]; b <= ' ' || b > '~' {
			return fmt.Errorf("%w: the token (Options.Token) has a space, control or non-ASCII byte at byte %d: a token is printable ASCII without spaces (check for a trailing newline)", ErrInvalid, i)
		}
	}
	return nil
}

// tlsError is an error of Open that TLS explains: its message says what
// is wrong and what to do, and it matches ErrTLS and its cause.
type tlsError struct {
	msg   string
	cause error
}

func (e *tlsError) Error() string   { return e.msg }
func (e *tlsError) Unwrap() []error { return []error{ErrTLS, e.cause} }

// h2Preface is what an HTTP/2 client sends first: the connection preface,
// and an empty SETTINGS frame.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + "\x00\x00\x00\x04\x00\x00\x00\x00\x00"

// diagnose connects to addr again, as the client did, to tell whether TLS
// is why the connection failed: a plaintext client reaching a TLS server,
// the reverse, or a certificate one side refused. It returns a *tlsError
// that says so, or nil when it finds nothing to say (the server is down,
// say, which the caller reports).
func (c *Client) diagnose(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if c.tls == nil {
		return plaintextHint(conn, addr)
	}
	cfg := tlsFor(c.tls, addr)
	cfg.NextProtos = []string{"h2"}
	tc := tls.Client(conn, cfg)
	err = tc.HandshakeContext(ctx)
	if err == nil {
		// In TLS 1.3 the server checks the client's certificate after the
		// client's side of the handshake is done, and a refusal comes as
		// an alert on the first read.
		if _, err = io.WriteString(tc, h2Preface); err == nil {
			var b [1]byte
			_, err = tc.Read(b[:])
		}
	}
	return tlsHint(err, addr)
}

// plaintextHint tells from what a server answers to an HTTP/2 preface
// whether it expects TLS: a gRPC server without TLS answers with its
// settings, a TLS server closes the connection or sends a TLS alert.
func plaintextHint(conn net.Conn, addr string) error {
	if _, err := io.WriteString(conn, h2Preface); err != nil {
		return nil
	}
	var b [9]byte
	n, err := conn.Read(b[:])
	const alert, handshake = 0x15, 0x16 // TLS record types
	switch {
	case n > 0 && (b[0] == alert || b[0] == handshake),
		n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
		return &tlsError{
			msg:   fmt.Sprintf("tern: the server at %s closed the connection before answering: it may require TLS; give the client its CA (Options.TLS, tern --tls-ca)", addr),
			cause: errors.New("connection closed before the server's HTTP/2 preface"),
		}
	}
	return nil
}

// tlsHint explains err, the failure of a TLS handshake with the server at
// addr, or returns nil when it is not TLS's.
func tlsHint(err error, addr string) error {
	if err == nil {
		return nil
	}
	var (
		header   tls.RecordHeaderError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		op       *net.OpError
		msg      string
	)
	switch {
	case errors.As(err, &header):
		msg = fmt.Sprintf("tern: the server at %s does not speak TLS: drop TLS (Options.TLS, tern --tls-ca) or check the address", addr)
	case errors.As(err, &unknown):
		issuer := ""
		if unknown.Cert != nil {
			issuer = fmt.Sprintf(" (issuer %s)", unknown.Cert.Issuer)
		}
		msg = fmt.Sprintf("tern: the certificate of the server at %s is signed by an unknown authority%s: give the client the CA that signed it (Options.TLS.RootCAs, tern --tls-ca)", addr, issuer)
	case errors.As(err, &hostname):
		msg = fmt.Sprintf("tern: the certificate of the server at %s is not valid for the name %q (%s): connect by a name it holds, or set the name to check (Options.TLS.ServerName, tern --tls-server-name)", addr, hostname.Host, certNames(hostname.Certificate))
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		msg = fmt.Sprintf("tern: the certificate of the server at %s has expired or is not valid yet (%s): renew it on the server, or check the clocks", addr, invalid.Detail)
	case errors.As(err, &verify) || errors.As(err, &invalid):
		msg = fmt.Sprintf("tern: the client does not accept the certificate of the server at %s: %v", addr, err)
	case errors.As(err, &op) && op.Op == "remote error":
		msg = fmt.Sprintf("tern: the server at %s refused the TLS connection (%v): if it requires a client certificate, give the client one its CA signed (Options.TLS.Certificates, tern --tls-cert and --tls-key)", addr, op.Err)
	default:
		return nil
	}
	return &tlsError{msg: msg, cause: err}
}

// certNames says which names a certificate holds.
func certNames(cert *x509.Certificate) string {
	if cert == nil {
		return "the certificate was not given"
	}
	names := append([]string(nil), cert.DNSNames...)
	for _, ip := range cert.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return "it holds no DNS or IP name"
	}
	return "it is for " + strings.Join(names, ", ")
}
