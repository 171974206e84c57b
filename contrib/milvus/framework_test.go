//go:build test

package milvus

import (
	"testing"

	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls"

	"github.com/ternwal/tern"
)

// openEmbedded opens an embedded Tern in a temporary directory, closed at
// the test's end.
func openEmbedded(t *testing.T) *tern.Client {
	t.Helper()
	c, err := tern.Open(t.Context(), tern.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestFrameworkEmbedded runs Milvus's acceptance test of WAL
// implementations on local logs of an embedded Tern.
func TestFrameworkEmbedded(t *testing.T) {
	walimpls.NewWALImplsTestFramework(t, 1000, NewBuilder(Config{Embedded: openEmbedded(t)})).Run()
}

// TestFrameworkServe runs Milvus's acceptance test of WAL implementations
// on local logs of a tern serve, over the client module.
func TestFrameworkServe(t *testing.T) {
	addr := serve(t)
	walimpls.NewWALImplsTestFramework(t, 1000, NewBuilder(Config{Nodes: []string{addr}})).Run()
}
