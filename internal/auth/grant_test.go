package auth

import (
	"slices"
	"testing"
)

func TestAllows(t *testing.T) {
	all := []Permission{Read, Append, Subscribe, Admin}
	ops := &Principal{Name: "ops", Grants: []Grant{{Prefix: "", Allow: all}}}
	indexer := &Principal{Name: "indexer", Grants: []Grant{
		{Prefix: "tenant-a/", Allow: []Permission{Read, Subscribe}},
		{Prefix: "tenant-a/ingest/", Allow: []Permission{Append}},
		{Prefix: "shared", Allow: []Permission{Read}},
	}}
	none := &Principal{Name: "none"}
	for _, tc := range []struct {
		p     *Principal
		log   string
		allow []Permission
	}{
		{ops, "anything", all},
		{ops, "", all},
		{indexer, "tenant-a/x", []Permission{Read, Subscribe}},
		{indexer, "tenant-a/", []Permission{Read, Subscribe}},
		{indexer, "tenant-a", nil},    // the prefix is not the namespace's name
		{indexer, "tenant-ab/x", nil}, // nor does a prefix without "/" stop at one
		{indexer, "tenant-a/ingest/1", []Permission{Read, Append, Subscribe}},
		{indexer, "tenant-b/x", nil},
		{indexer, "shared", []Permission{Read}},
		{indexer, "shared-2/x", []Permission{Read}},
		{indexer, "TENANT-A/x", nil},
		{none, "tenant-a/x", nil},
		{nil, "tenant-a/x", nil},
	} {
		for _, perm := range all {
			want := slices.Contains(tc.allow, perm)
			if got := tc.p.Allows(perm, tc.log); got != want {
				name := "nil"
				if tc.p != nil {
					name = tc.p.Name
				}
				t.Errorf("%s.Allows(%s, %q) = %v", name, perm, tc.log, got)
			}
		}
	}
}

func TestPrefixes(t *testing.T) {
	p := &Principal{Name: "p", Grants: []Grant{
		{Prefix: "b/", Allow: []Permission{Read}},
		{Prefix: "a/x/", Allow: []Permission{Read, Append}},
		{Prefix: "a/", Allow: []Permission{Read}},
		{Prefix: "a/", Allow: []Permission{Read, Subscribe}},
		{Prefix: "ab", Allow: []Permission{Read}},
		{Prefix: "a", Allow: []Permission{Subscribe}},
		{Prefix: "a/y", Allow: []Permission{Subscribe}},
		{Prefix: "c", Allow: []Permission{Append}},
		{Prefix: "c", Allow: []Permission{Append}},
	}}
	for _, tc := range []struct {
		p    *Principal
		perm Permission
		want []string
	}{
		{p, Read, []string{"a/", "ab", "b/"}},
		{p, Append, []string{"a/x/", "c"}},
		{p, Subscribe, []string{"a"}},
		{p, Admin, nil},
		{&Principal{Grants: []Grant{{Prefix: "x", Allow: []Permission{Read}}, {Prefix: "", Allow: []Permission{Read}}}}, Read, []string{""}},
		{nil, Read, nil},
	} {
		got := tc.p.Prefixes(tc.perm)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Prefixes(%s) = %q, want %q", tc.perm, got, tc.want)
		}
		// Allows agrees: a log is allowed when one of the prefixes starts it.
		for _, log := range []string{"", "a", "a/", "a/x/1", "a/y", "ab", "abc", "b", "b/1", "c", "x"} {
			under := slices.ContainsFunc(got, func(pre string) bool { return len(log) >= len(pre) && log[:len(pre)] == pre })
			if under != tc.p.Allows(tc.perm, log) {
				t.Errorf("Prefixes(%s) = %q but Allows(%s, %q) = %v", tc.perm, got, tc.perm, log, !under)
			}
		}
	}
}
