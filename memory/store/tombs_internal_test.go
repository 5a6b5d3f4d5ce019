package store

import (
	"fmt"
	"testing"
)

// The filter holds every key added, across the parts it grows by, and
// answers "surely not" for nearly every other key.
func TestTombFilterHoldsWhatWasAdded(t *testing.T) {
	f := newTombFilter()
	const n = 5 * firstPartKeys // three parts: 16k, 32k, 64k keys
	key := func(i int) []byte { return fmt.Appendf(nil, "z/%08d", i) }
	for i := range n {
		f.add(key(i))
	}
	if parts := len(*f.parts.Load()); parts != 3 {
		t.Fatalf("%d parts for %d keys, want 3", parts, n)
	}
	for i := range n {
		if !f.mayHold(key(i)) {
			t.Fatalf("key %d added, not held", i)
		}
	}
	held := 0
	const others = 100_000
	for i := range others {
		if f.mayHold(key(n + i)) {
			held++
		}
	}
	// Each part ~1% when full; the last is five-eighths full.
	if rate := float64(held) / others; rate > 0.03 {
		t.Fatalf("%.2f%% false positives", 100*rate)
	}
	if f.absent([]byte("b/x")) {
		t.Fatal("a key outside the tombstones' space is said absent")
	}
	var none *tombFilter
	if none.absent(key(n)) {
		t.Fatal("no filter knows nothing, and says nothing is absent")
	}
}
