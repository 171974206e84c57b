package cluster

import (
	"slices"

	"github.com/ternwal/tern/internal/quorum"
)

// Assign returns the member that should serve logID: the one with the highest
// quorum.Score(member ID, logID), ties to the smaller ID (rendezvous, or highest
// random weight, hashing). The choice depends only on the set of members, not
// their order, and a member joining or leaving moves only the logs it wins or
// held: about 1/len(members) of them. It reports false if members is empty.
func Assign(logID uint64, members []Member) (Member, bool) {
	var (
		best      Member
		bestScore uint64
		found     bool
	)
	for _, m := range members {
		s := quorum.Score(m.ID, logID)
		if !found || s > bestScore || (s == bestScore && m.ID < best.ID) {
			best, bestScore, found = m, s, true
		}
	}
	return best, found
}

// Plan returns what node self should do to converge on Assign's placement of
// logs over members, the live members: acquire each log assigned to self
// whose owner is absent from owners (log ID → owner node ID) or not a live
// member, and release each log self owns that is assigned to another member.
// Both lists are in increasing order; logs not in logs are left alone.
//
// A log self releases is picked up by its assignee when that node sees the
// owner key vanish and plans again; a log whose owner is alive but not its
// assignee waits for that owner to release it. A node that runs Plan after
// each Changed, acquiring and releasing as told, converges with the others
// once membership stops changing. Plan trusts its inputs: fed from a view,
// it may ask for what is already done (a repeated Acquire or Release is
// harmless) and it never settles a conflict, which Acquire does.
func Plan(members []Member, logs []uint64, owners map[uint64]string, self string) (acquire, release []uint64) {
	live := make(map[string]bool, len(members))
	for _, m := range members {
		live[m.ID] = true
	}
	for _, logID := range logs {
		a, ok := Assign(logID, members)
		if !ok {
			continue
		}
		o, owned := owners[logID]
		switch {
		case a.ID == self && (!owned || !live[o]):
			acquire = append(acquire, logID)
		case a.ID != self && owned && o == self:
			release = append(release, logID)
		}
	}
	slices.Sort(acquire)
	slices.Sort(release)
	return slices.Compact(acquire), slices.Compact(release)
}
