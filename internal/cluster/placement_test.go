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

func TestPlan(t *testing.T) {
	ab := members("a", "b")
	// Find logs that Assign gives to a and to b.
	var toA, toB []uint64
	for id := uint64(0); len(toA) < 2 || len(toB) < 2; id++ {
		if m, _ := Assign(id, ab); m.ID == "a" {
			toA = append(toA, id)
		} else {
			toB = append(toB, id)
		}
	}
	a1, a2, b1, b2 := toA[0], toA[1], toB[0], toB[1]
	all := []uint64{b2, a2, b1, a1}

	for _, tt := range []struct {
		name             string
		members          []Member
		logs             []uint64
		owners           map[uint64]string
		self             string
		acquire, release []uint64
	}{
		{name: "nothing owned", members: ab, logs: all, self: "a", acquire: sorted(a1, a2)},
		{name: "nothing owned, other node", members: ab, logs: all, self: "b", acquire: sorted(b1, b2)},
		{name: "settled", members: ab, logs: all, self: "a",
			owners: map[uint64]string{a1: "a", a2: "a", b1: "b", b2: "b"}},
		{name: "owner dead", members: ab, logs: all, self: "a",
			owners: map[uint64]string{a1: "c", a2: "a"}, acquire: sorted(a1)},
		{name: "owner alive, not assignee: wait", members: ab, logs: all, self: "a",
			owners: map[uint64]string{a1: "b", a2: "b"}},
		{name: "rebalance after a join", members: ab, logs: all, self: "a",
			owners: map[uint64]string{a1: "a", a2: "a", b1: "a", b2: "a"}, release: sorted(b1, b2)},
		{name: "alone", members: members("a"), logs: all, self: "a",
			owners: map[uint64]string{b1: "b"}, acquire: sorted(a1, a2, b1, b2)},
		{name: "self not a member: only releases", members: members("b"), logs: all, self: "a",
			owners: map[uint64]string{a1: "a"}, release: sorted(a1)},
		{name: "unlisted logs left alone", members: ab, logs: []uint64{a1}, self: "a",
			owners: map[uint64]string{b1: "a"}, acquire: sorted(a1)},
		{name: "no members", logs: all, self: "a", owners: map[uint64]string{a1: "a"}},
		{name: "duplicate logs", members: ab, logs: []uint64{a1, a1}, self: "a", acquire: sorted(a1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			acquire, release := Plan(tt.members, tt.logs, tt.owners, tt.self)
			if !slices.Equal(acquire, tt.acquire) || !slices.Equal(release, tt.release) {
				t.Errorf("Plan = acquire %v, release %v; want %v, %v", acquire, release, tt.acquire, tt.release)
			}
		})
	}
}

func sorted(ids ...uint64) []uint64 {
	slices.Sort(ids)
	return ids
}
