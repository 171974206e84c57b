package auth

import (
	"slices"
	"strings"
)

// Allows says whether a grant of p allows perm on the log named log: one
// whose Prefix starts log and whose Allow holds perm. A nil principal
// allows nothing.
func (p *Principal) Allows(perm Permission, log string) bool {
	if p == nil {
		return false
	}
	for _, g := range p.Grants {
		if strings.HasPrefix(log, g.Prefix) && slices.Contains(g.Allow, perm) {
			return true
		}
	}
	return false
}

// Prefixes are the prefixes of the logs p may perm, sorted, none a prefix of
// another: [""] when p may perm every log, none when it may perm no log or
// p is nil. A new slice on every call: a ListLogs filter walks these.
func (p *Principal) Prefixes(perm Permission) []string {
	if p == nil {
		return nil
	}
	var all []string
	for _, g := range p.Grants {
		if slices.Contains(g.Allow, perm) {
			all = append(all, g.Prefix)
		}
	}
	slices.Sort(all)
	// In sorted order, whatever follows a prefix q and starts with it comes
	// right after q: a prefix not covered by the last one kept is covered
	// by none.
	var minimal []string
	for _, s := range all {
		if len(minimal) == 0 || !strings.HasPrefix(s, minimal[len(minimal)-1]) {
			minimal = append(minimal, s)
		}
	}
	return minimal
}
