package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
)

// ErrTooFewNodes is returned by Choose when fewer nodes are eligible than the
// ensemble needs. (ErrTooFew is about a recovery's answers.)
var ErrTooFewNodes = errors.New("quorum: too few live nodes for the ensemble")

// Choose picks the n nodes of a new segment's ensemble from live, never any
// in avoid (nodes that just failed the segment before). It ranks the eligible
// nodes by a rendezvous hash of (node ID, seed) and takes the n highest, in
// that order, which can serve as the replicas' order. The choice depends only
// on the sets live and avoid, not on their order or repeats; different seeds
// (a hash of the log ID and the segment's sequence number, say) spread
// segments evenly over the nodes, and a node joining or leaving changes only
// the ensembles it enters or leaves.
//
// Choose fails with ErrTooFewNodes if fewer than n nodes are eligible.
func Choose(n int, live []string, avoid []string, seed uint64) ([]string, error) {
	if n < 1 || n > MaxEnsemble {
		return nil, fmt.Errorf("quorum: ensemble of %d replicas: use 1 to %d", n, MaxEnsemble)
	}
	type ranked struct {
		id    string
		score uint64
	}
	skip := make(map[string]bool, len(avoid)+len(live))
	for _, id := range avoid {
		skip[id] = true
	}
	var eligible []ranked
	for _, id := range live {
		if !skip[id] {
			skip[id] = true // once
			eligible = append(eligible, ranked{id, Score(id, seed)})
		}
	}
	if len(eligible) < n {
		return nil, fmt.Errorf("%w: %d eligible, %d needed (%d live, %d avoided)", ErrTooFewNodes, len(eligible), n, len(live), len(avoid))
	}
	// Highest first; ties (never seen) by ID, so the choice is deterministic.
	slices.SortFunc(eligible, func(a, b ranked) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
	chosen := make([]string, n)
	for i := range chosen {
		chosen[i] = eligible[i].id
	}
	return chosen, nil
}

// Score is the rendezvous weight of node id for seed: FNV-1a 64 of the ID's
// bytes followed by seed's 8 bytes big-endian, finished with murmur3's 64-bit
// mixer. FNV-1a alone barely mixes the last bytes into the high bits, so the
// ranking of IDs would hardly depend on seed. It is the weight cluster.Assign
// uses for logs.
func Score(id string, seed uint64) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	h.Write(binary.BigEndian.AppendUint64(nil, seed))
	k := h.Sum64()
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
