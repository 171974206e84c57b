package tern

import (
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/ternwal/tern/internal/replica"
)

// serving is a Cluster whose node serves the logs with the IDs it holds,
// and reaches no replica.
type serving map[uint64]bool

func (s serving) Node(id string) (replica.Node, error) { return nil, errors.New("no replicas here") }
func (s serving) Live() []string                       { return nil }
func (s serving) Serves(logID uint64) bool             { return s[logID] }

// TestRetentionSkipsLogsServedElsewhere checks that the retention loop of a
// cluster node opens, and so trims, only the logs the node serves, and that
// of a client outside a cluster every log.
func TestRetentionSkipsLogsServedElsewhere(t *testing.T) {
	dir := t.TempDir()
	c := openClient(t, dir)
	ids := map[string]uint64{}
	for _, name := range []string{"mine", "theirs"} {
		l, w := createLog(t, c, name, LogOptions{SegmentBytes: 4096, RetentionEntries: 10})
		appendN(t, w, 0, 1000)
		info, err := l.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = info.ID
	}
	c.Close()
	segments := func(name string) int {
		segs, err := filepath.Glob(filepath.Join(dir, "logs", strconv.FormatUint(ids[name], 10), "*.seg"))
		if err != nil {
			t.Fatal(err)
		}
		return len(segs)
	}
	before := segments("theirs")

	for _, tc := range []struct {
		name    string
		cluster Cluster
		want    []string
	}{
		{"cluster node", serving{ids["mine"]: true}, []string{"mine"}},
		{"standalone", nil, []string{"mine", "theirs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Open(t.Context(), Options{Dir: dir, Cluster: tc.cluster})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var got []string
			for _, l := range embeddedOf(c).retainable() {
				got = append(got, l.name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("the retention loop works on %q, want %q", got, tc.want)
			}
			if tc.cluster != nil {
				embeddedOf(c).mu.Lock()
				_, opened := embeddedOf(c).logs["theirs"]
				embeddedOf(c).mu.Unlock()
				if opened || segments("theirs") != before {
					t.Fatalf("a log another node serves was opened (%v) or trimmed (%d segments, were %d)", opened, segments("theirs"), before)
				}
			}
		})
	}
}

// The options of a log created with no mode are checked against the mode
// the client gives it: quorum settings are a quorum log's, also when quorum
// is only the client's default (tern serve --mode quorum).
func TestCreateLogChecksOptionsOfTheDefaultMode(t *testing.T) {
	c, err := Open(t.Context(), Options{
		Dir: t.TempDir(), Storage: StorageOptions{URL: "dir://" + t.TempDir()},
		DefaultMode: ModeQuorum, Cluster: serving{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.CreateLog(t.Context(), "q", LogOptions{Ensemble: 1, AckQuorum: 1})
	if err != nil {
		t.Fatalf("a log of the default mode, quorum, with quorum settings: %v", err)
	}
	if o := l.Options(); o.Mode != ModeQuorum || o.Ensemble != 1 || o.AckQuorum != 1 {
		t.Fatalf("the log's options are %+v", o)
	}
	if _, err := c.CreateLog(t.Context(), "f", LogOptions{FlushBytes: 1 << 20}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a quorum log with a flush size: %v, want ErrInvalid", err)
	}
}
