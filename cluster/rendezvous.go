package cluster

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"
)

// Rank orders member ids for a sona by rendezvous (highest random weight)
// hashing: every member computes the same order from the same ids, and a
// member joining or leaving moves only the sonas it ranks first for. The
// owner's replicas are the first R-1 others in this order.
func Rank(sona string, members []string) []string {
	type scored struct {
		id    string
		score uint64
	}
	s := make([]scored, len(members))
	for i, m := range members {
		h := sha256.Sum256([]byte(m + "\x00" + sona))
		s[i] = scored{m, binary.BigEndian.Uint64(h[:8])}
	}
	slices.SortFunc(s, func(a, b scored) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.id
	}
	return out
}
