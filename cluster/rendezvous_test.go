package cluster

import (
	"fmt"
	"slices"
	"testing"
)

func TestRankIsStableAndMovesLittle(t *testing.T) {
	members := []string{"a", "b", "c", "d"}
	// Same ids in any order: same ranking.
	if !slices.Equal(Rank("s1", members), Rank("s1", []string{"d", "c", "b", "a"})) {
		t.Fatal("the ranking depends on the order of the members")
	}
	// Removing a member only removes it from each ranking: the others keep
	// their relative order, so only the sonas it led move.
	moved, first := 0, map[string]int{}
	for i := range 1000 {
		sona := fmt.Sprintf("sona-%d", i)
		all := Rank(sona, members)
		first[all[0]]++
		without := Rank(sona, []string{"a", "b", "d"})
		if !slices.Equal(without, slices.DeleteFunc(slices.Clone(all), func(m string) bool { return m == "c" })) {
			t.Fatalf("%s: removing c reordered the others: %v → %v", sona, all, without)
		}
		if all[0] != without[0] {
			moved++
		}
	}
	if moved != first["c"] {
		t.Fatalf("%d sonas changed their first member, %d had c first", moved, first["c"])
	}
	for _, m := range members {
		if first[m] < 180 || first[m] > 320 {
			t.Errorf("member %s is first for %d of 1000 sonas: not spread", m, first[m])
		}
	}
}
