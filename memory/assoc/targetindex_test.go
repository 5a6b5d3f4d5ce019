package assoc

import (
	"fmt"
	"testing"
)

// TestTargetIndexFindsWhatAScanFinds holds the index to a scan from the
// front, across its growth out of its own room, with targets added twice
// and CIDs shorter than eight bytes or alike in their last eight bytes.
func TestTargetIndexFindsWhatAScanFinds(t *testing.T) {
	for _, n := range []int{0, 1, 7, 31, 64, 200} {
		var keys []string
		for i := range n {
			switch i % 4 {
			case 0:
				keys = append(keys, fmt.Sprintf("cid-%036d", i))
			case 3: // the same last eight bytes as case 0's
				keys = append(keys, fmt.Sprintf("dig-%036d", i-3))
			case 1:
				keys = append(keys, string(rune('a'+i%26))+fmt.Sprint(i%5)) // short
			default:
				keys = append(keys, keys[i/2]) // again
			}
		}
		var room indexRoom
		x := newTargetIndex(n/4, &room) // it grows
		seen := map[string]bool{}
		for i, k := range keys {
			if _, added := x.findOrAdd(targetHash(k), i, func(at int) bool { return keys[at] == k }); added == seen[k] {
				t.Fatalf("n=%d: %q at %d added %v, seen before %v", n, k, i, added, seen[k])
			}
			seen[k] = true
		}
		for i, k := range keys {
			want := i
			for j := range i {
				if keys[j] == k {
					want = j
					break
				}
			}
			if got, _ := x.probe(targetHash(k), func(at int) bool { return keys[at] == k }); got != want {
				t.Fatalf("n=%d: %q found at %d, want %d (the first)", n, k, got, want)
			}
		}
		for _, absent := range []string{"", "cid-", "zz9", fmt.Sprintf("cid-%036d", n+1)} {
			if got, _ := x.probe(targetHash(absent), func(at int) bool { return keys[at] == absent }); got != -1 {
				t.Errorf("n=%d: %q, which was never added, found at %d", n, absent, got)
			}
		}
	}
}
