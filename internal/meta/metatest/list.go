package metatest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ternwal/tern/internal/meta"
)

// testListLogsPage follows the pages of every prefix at several page sizes
// and checks that they add up to ListLogs.
func testListLogsPage(t *testing.T, s meta.Store) {
	ctx := t.Context()
	if logs, err := s.ListLogsPage(ctx, "", "", 2); err != nil || len(logs) != 0 {
		t.Fatalf("ListLogsPage of an empty store = %v, %v, want none", logs, err)
	}
	for i, name := range []string{"b", "a/c", "ab", "a", "a/b/c", "a/b", "a.b", "a0", "b/a"} {
		create(t, s, name, []byte{byte(i)})
	}
	for _, prefix := range []string{"", "a", "a/", "a/b", "b", "c"} {
		want, err := s.ListLogs(ctx, prefix)
		if err != nil {
			t.Fatalf("ListLogs(%q): %v", prefix, err)
		}
		for _, limit := range []int{1, 2, 3, 100, 0} {
			var got []meta.Log
			after := ""
			for range 20 {
				page, err := s.ListLogsPage(ctx, prefix, after, limit)
				if err != nil {
					t.Fatalf("ListLogsPage(%q, %q, %d): %v", prefix, after, limit, err)
				}
				if limit > 0 && len(page) > limit {
					t.Fatalf("ListLogsPage(%q, %q, %d) = %q, more than the limit", prefix, after, limit, names(page))
				}
				got = append(got, page...)
				if len(page) == 0 || limit <= 0 {
					break
				}
				after = page[len(page)-1].Name
			}
			if !slices.Equal(names(got), names(want)) {
				t.Errorf("pages of %q by %d = %q, want %q", prefix, limit, names(got), names(want))
			}
			for i := range min(len(got), len(want)) {
				checkEqual(t, fmt.Sprintf("ListLogsPage(%q)", prefix), got[i], want[i])
			}
		}
	}
	// A page token past the prefix, or before it, is no error.
	for _, tc := range []struct {
		prefix, after string
		want          []string
	}{
		{"a/", "b", nil},
		{"a/", "a", []string{"a/b", "a/b/c", "a/c"}},
		{"a/", "a/b", []string{"a/b/c", "a/c"}},
		{"", "a/bb", []string{"a/c", "a0", "ab", "b", "b/a"}},
		{"", "b/a", nil},
	} {
		page, err := s.ListLogsPage(ctx, tc.prefix, tc.after, 0)
		if err != nil || !slices.Equal(names(page), tc.want) {
			t.Errorf("ListLogsPage(%q, %q) = %q, %v, want %q", tc.prefix, tc.after, names(page), err, tc.want)
		}
	}
}

func testCountLogs(t *testing.T, s meta.Store) {
	ctx := t.Context()
	for i, name := range []string{"b", "a/c", "ab", "a", "a/b/c", "a/b"} {
		create(t, s, name, []byte{byte(i)})
	}
	if err := s.DeleteLog(ctx, "ab"); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	for prefix, want := range map[string]int{"": 5, "a": 4, "a/": 3, "a/b": 2, "a/b/": 1, "b": 1, "c": 0} {
		if n, err := s.CountLogs(ctx, prefix); err != nil || n != want {
			t.Errorf("CountLogs(%q) = %d, %v, want %d", prefix, n, err, want)
		}
	}
}
