package cluster

import "github.com/ternwal/tern/internal/quorum"

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
