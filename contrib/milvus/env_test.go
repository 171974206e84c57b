//go:build test

package milvus

import (
	"context"
	"strings"
	"testing"

	"github.com/milvus-io/milvus/pkg/v2/streaming/util/types"
	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls"
	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls/registry"
)

// clearEnv unsets the variables ConfigFromEnv reads, for the test.
func clearEnv(t *testing.T) {
	for _, v := range []string{EnvServer, EnvToken, EnvTLSCA, EnvTLSCert, EnvTLSKey, EnvTLSServerName, EnvMode, EnvData, EnvPrefix, EnvRetryTimeout} {
		t.Setenv(v, "")
	}
}

// TestConfigFromEnv: the variables of the tern CLI configure the client.
func TestConfigFromEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv(EnvServer, "127.0.0.1:7000, https://node2/")
	t.Setenv(EnvToken, "secret")
	t.Setenv(EnvMode, "quorum")
	t.Setenv(EnvPrefix, "prod/milvus/")
	t.Setenv(EnvRetryTimeout, "5s")
	cfg, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Nodes, " ") != "127.0.0.1:7000 node2:7070" || cfg.Token != "secret" || cfg.Mode != "quorum" ||
		cfg.Prefix != "prod/milvus/" || cfg.RetryTimeout.Seconds() != 5 || cfg.TLS == nil {
		t.Errorf("config %+v", cfg)
	}

	for _, c := range []struct{ env, val, want string }{
		{EnvTLSCert, "cert.pem", "TERN_TLS_KEY"},
		{EnvTLSCA, "/does/not/exist.pem", "TERN_TLS_CA"},
		{EnvRetryTimeout, "soon", "TERN_RETRY_TIMEOUT"},
		{EnvServer, "grpc://node:7070", "TERN_SERVER"},
	} {
		clearEnv(t)
		t.Setenv(EnvServer, "127.0.0.1:7000")
		t.Setenv(c.env, c.val) // $TERN_SERVER's case replaces the one above
		if _, err := ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("$%s=%s: %v, want an error naming %s", c.env, c.val, err, c.want)
		}
	}
}

// TestRegistryBuildFromEnv: the registered builder fails without a Tern to
// use, naming the variables, and with $TERN_DATA keeps the WALs in an
// embedded Tern that the opener closes.
func TestRegistryBuildFromEnv(t *testing.T) {
	clearEnv(t)
	b := registry.MustGetBuilder(WALName)
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), EnvServer) || !strings.Contains(err.Error(), EnvData) {
		t.Fatalf("Build without configuration: %v, want an error naming $%s and $%s", err, EnvServer, EnvData)
	}
	dir := t.TempDir()
	t.Setenv(EnvData, dir)
	for range 2 { // the second Build finds the data directory unlocked
		o, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		w, err := o.Open(context.Background(), &walimpls.OpenOption{Channel: types.PChannelInfo{Name: "ch", Term: 1, AccessMode: types.AccessModeRW}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(context.Background(), testMessage(t, map[string]string{"k": "v"})); err != nil {
			t.Fatal(err)
		}
		w.Close()
		o.Close()
	}
}
