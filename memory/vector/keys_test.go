package vector

import (
	"math/rand"
	"testing"

	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/memory/base"
)

// The keys are held in the index's own chunks, not as a string each: a
// hundred thousand keys add a few hundred objects to the heap (the
// vectors' chunks, the table's), not a hundred thousand, and each reads back as it was given — after a key
// removed before it too, and through a copy frozen before more were
// added.
func TestKeysAreNotAnObjectEach(t *testing.T) {
	const n, dims = 100_000, 4
	rng := rand.New(rand.NewSource(3))
	x := New(Options{Dims: dims, Seed: 1, Lazy: true})
	defer x.Close()
	vec := unit(randVec(rng, dims))
	before := testutil.HeapObjects()
	for i := range n {
		x.Add(key(i), vec)
	}
	after := testutil.HeapObjects()
	grew := int64(after) - int64(before)
	t.Logf("%d keys: %d more objects on the heap", n, grew)
	if grew > n/20 {
		t.Fatalf("%d keys added %d objects to the heap", n, grew)
	}
	x.kmu.RLock()
	frozen := x.keys.Frozen()
	x.kmu.RUnlock()
	x.Remove(key(10))
	x.Add("a key longer than a chunk "+string(make([]byte, base.KeyChunk)), vec)
	for i := range n {
		want := key(i)
		if i == 10 {
			want = ""
		}
		if got, ok := x.Key(uint64(i)); !ok || got != want {
			t.Fatalf("key %d: %q %v, want %q", i, got, ok, want)
		}
		if got := frozen.At(uint32(i)); got != key(i) && i != 10 {
			t.Fatalf("frozen key %d: %q", i, got)
		}
		if id, ok := x.ID(key(i)); ok != (i != 10) || (ok && id != uint64(i)) {
			t.Fatalf("ID of key %d: %d %v", i, id, ok)
		}
	}
	if got, _ := x.Key(n); len(got) != len("a key longer than a chunk ")+base.KeyChunk {
		t.Fatalf("the long key reads back %d bytes", len(got))
	}
	if frozen.Len() != n {
		t.Fatalf("the frozen copy holds %d keys, want %d", frozen.Len(), n)
	}
}
