package cluster

import (
	"slices"
	"testing"
)

func members(ids ...string) []Member {
	var ms []Member
	for _, id := range ids {
		ms = append(ms, Member{ID: id, Addr: id + ":1"})
	}
	return ms
}

func TestAssign(t *testing.T) {
	if _, ok := Assign(1, nil); ok {
		t.Error("Assign over no members succeeded")
	}
	three := members("node-a", "node-b", "node-c")
	reversed := slices.Clone(three)
	slices.Reverse(reversed)
	four := append(members("node-d"), three...)

	const logs = 1000
	count := map[string]int{}
	for id := range uint64(logs) {
		m, ok := Assign(id, three)
		if !ok {
			t.Fatal("no member")
		}
		if again, _ := Assign(id, reversed); again != m {
			t.Fatalf("log %d: %v, then %v with the members reversed", id, m, again)
		}
		count[m.ID]++
		// A fourth member takes some logs and moves no other.
		if m4, _ := Assign(id, four); m4 != m && m4.ID != "node-d" {
			t.Errorf("log %d moved from %s to %s when node-d joined", id, m.ID, m4.ID)
		}
	}
	for _, m := range three {
		if c := count[m.ID]; c < logs*20/100 || c > logs*47/100 {
			t.Errorf("%s has %d of %d logs", m.ID, c, logs)
		}
	}
}
