package milvus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client"
)

// The environment variables ConfigFromEnv reads. The client's are those of
// the tern CLI (tern --help).
const (
	EnvServer        = "TERN_SERVER"          // comma-separated addresses of tern serve nodes, as tern --server takes them
	EnvToken         = "TERN_TOKEN"           // bearer token
	EnvTLSCA         = "TERN_TLS_CA"          // PEM file of the server's CA: TLS
	EnvTLSCert       = "TERN_TLS_CERT"        // PEM file of the client's certificate (mutual TLS)
	EnvTLSKey        = "TERN_TLS_KEY"         // PEM file of its key
	EnvTLSServerName = "TERN_TLS_SERVER_NAME" // the name in the server's certificate: TLS
	EnvMode          = "TERN_MODE"            // mode of the logs created: local, object, quorum
	EnvData          = "TERN_DATA"            // without TERN_SERVER: an embedded data directory
	EnvPrefix        = "TERN_MILVUS_PREFIX"   // Config.Prefix
	EnvRetryTimeout  = "TERN_RETRY_TIMEOUT"   // Config.RetryTimeout, a Go duration ("30s")
)

// ConfigFromEnv is the Config of the builder Milvus's registry holds, read
// from the environment when Milvus builds it: with $TERN_SERVER, a client
// of those nodes, with TLS when $TERN_TLS_CA, $TERN_TLS_CERT or
// $TERN_TLS_SERVER_NAME is set (a server address given as https://host:port
// too); without it, $TERN_DATA opens an embedded Tern in that directory,
// which the opener closes. Files are read here; an error names the variable.
func ConfigFromEnv() (Config, error) {
	cfg := Config{
		Token:  os.Getenv(EnvToken),
		Mode:   os.Getenv(EnvMode),
		Prefix: os.Getenv(EnvPrefix),
	}
	if v := os.Getenv(EnvRetryTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return Config{}, fmt.Errorf("tern wal: $%s=%q is not a duration: use e.g. 30s", EnvRetryTimeout, v)
		}
		cfg.RetryTimeout = d
	}
	server := os.Getenv(EnvServer)
	if server == "" {
		dir := os.Getenv(EnvData)
		if dir == "" {
			return Config{}, fmt.Errorf("tern wal: neither $%s (tern serve's address, host:port[,host:port...]) nor $%s (an embedded data directory) is set: set one in the streaming node's environment", EnvServer, EnvData)
		}
		c, err := tern.Open(context.Background(), tern.Options{Dir: dir, DefaultMode: tern.Mode(cfg.Mode)})
		if err != nil {
			return Config{}, fmt.Errorf("tern wal: open the data directory $%s=%s: %w", EnvData, dir, err)
		}
		cfg.Embedded, cfg.owned = c, true
		return cfg, nil
	}
	https := false
	for n := range strings.SplitSeq(server, ",") {
		if strings.TrimSpace(n) == "" {
			continue
		}
		addr, tls, err := client.ParseServer(n)
		if err != nil {
			return Config{}, fmt.Errorf("tern wal: $%s: %w", EnvServer, err)
		}
		cfg.Nodes, https = append(cfg.Nodes, addr), https || tls
	}
	tlsCfg, err := tlsFromEnv(https)
	if err != nil {
		return Config{}, err
	}
	cfg.TLS = tlsCfg
	return cfg, nil
}

// tlsFromEnv is the TLS configuration the variables ask for; nil when none
// does and the address is not https://.
func tlsFromEnv(https bool) (*tls.Config, error) {
	ca, cert, key, name := os.Getenv(EnvTLSCA), os.Getenv(EnvTLSCert), os.Getenv(EnvTLSKey), os.Getenv(EnvTLSServerName)
	if ca == "" && cert == "" && name == "" && !https {
		return nil, nil
	}
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("tern wal: $%s and $%s go together: set the client's certificate and its key, or neither", EnvTLSCert, EnvTLSKey)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: name}
	if ca != "" {
		b, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("tern wal: read the CA file $%s: %w", EnvTLSCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("tern wal: the CA file $%s=%s holds no PEM certificate", EnvTLSCA, ca)
		}
		cfg.RootCAs = pool
	}
	if cert != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("tern wal: load the client certificate $%s=%s with key $%s=%s: %w", EnvTLSCert, cert, EnvTLSKey, key, err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}
