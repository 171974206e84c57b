package meta_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/ternwal/tern/internal/meta"
)

// Stores on one etcd root that race to create the installation all get
// the one stored first; another root is another installation.
func TestEtcdInstallationShared(t *testing.T) {
	srv := startEtcd(t, t.TempDir())
	const n = 4
	got := make([]meta.Installation, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		s := openEtcd(t, srv.Endpoints(), meta.EtcdOptions{Root: "/shared/"})
		defer s.Close()
		wg.Go(func() { got[i], errs[i] = s.Installation(t.Context()) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Installation %d: %v", i, errs[i])
		}
		if got[i] != got[0] {
			t.Errorf("store %d: Installation = %+v, want %+v like store 0", i, got[i], got[0])
		}
	}
	other := openEtcd(t, srv.Endpoints(), meta.EtcdOptions{Root: "/other/"})
	defer other.Close()
	in, err := other.Installation(t.Context())
	if err != nil {
		t.Fatalf("Installation on another root: %v", err)
	}
	if in.ID == got[0].ID {
		t.Errorf("another root has the same installation %q", in.ID)
	}
}

// The bbolt store keeps its installation across a reopen.
func TestBoltInstallationPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	s := openBolt(t, path)
	in, err := s.Installation(t.Context())
	if err != nil {
		t.Fatalf("Installation: %v", err)
	}
	s.Close()
	s = openBolt(t, path)
	defer s.Close()
	again, err := s.Installation(t.Context())
	if err != nil {
		t.Fatalf("Installation after reopen: %v", err)
	}
	if again != in {
		t.Fatalf("Installation after reopen = %+v, want %+v", again, in)
	}
}
