package vector

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/memoria-ai/memoria/internal/testutil"
)

// A lazy index builds no graph while its searches are of small sets: its
// vectors wait, pending, while the builder moves the oldest out of the
// heap all the same. The first search that needs the graph is answered
// exactly from the pending vectors (the builder held off here), and
// wants the graph: the builder then places them all, and the index
// answers as one that built its graph as the vectors came (the same
// graph: the same vectors placed in the same order).
func TestLazyGraphWaitsForASearch(t *testing.T) {
	const n, dims = 1100, 32 // four whole chunks and a partial one
	cb := int64(dims) << chunkBits * 4
	vecs := clustered(rand.New(rand.NewSource(41)), n, dims, 8)
	o := Options{Dims: dims, M: 6, EfConstruction: 20, Seed: 1, HeapVectors: 2 * cb, SpillDir: t.TempDir()}
	eager := New(o)
	defer eager.Close()
	o.Lazy = true
	lazy := New(o)
	defer lazy.Close()
	if lazy.GraphWanted() || !eager.GraphWanted() {
		t.Fatalf("wanted: lazy %v, eager %v", lazy.GraphWanted(), eager.GraphWanted())
	}
	for i, v := range vecs {
		eager.Add(key(i), v)
		lazy.Add(key(i), v)
	}
	eager.WaitBuilt()
	queries := clustered(rand.New(rand.NewSource(42)), 20, dims, 8)
	small := []uint64{3, 40, 700, 1099}
	for _, q := range queries {
		if a, b := lazy.SearchAmong(q, Unnamed(small), 2), eager.SearchAmong(q, Unnamed(small), 2); !slices.Equal(a, b) {
			t.Fatalf("a small set's exact scan differs:\n%v\n%v", a, b)
		}
	}
	// The builder moves the vectors out of the heap with no graph to
	// wait for: all but the last two chunks (the partial one and one whole).
	testutil.EventuallyShow(t, "the lazy index's spill", func() (bool, string) {
		heap, spilled, err := lazy.FloatBytes()
		return heap == 2*cb && spilled == 3*cb && err == nil, fmt.Sprintf("%d in the heap, %d spilled, %v", heap, spilled, err)
	})
	lazy.gmu.RLock()
	placed := lazy.graph.n
	lazy.gmu.RUnlock()
	if placed != 0 || lazy.Pending() != n || lazy.GraphWanted() {
		t.Fatalf("before a search that needs it: %d placed, %d pending, wanted %v; want none placed", placed, lazy.Pending(), lazy.GraphWanted())
	}

	// The first search of every vector, the builder held off (it places a
	// vector under bmu): exact, from the pending vectors.
	lazy.bmu.Lock()
	q := queries[0]
	got := lazy.Search(q, 10)
	if !lazy.GraphWanted() {
		t.Fatal("a search of every vector did not want the graph")
	}
	lazy.bmu.Unlock()
	want := exact(vecs, q, 10)
	if len(got) != len(want) {
		t.Fatalf("%d hits, want %d", len(got), len(want))
	}
	for i, h := range got {
		if h.Key != key(want[i]) {
			t.Fatalf("hit %d is %s, exact search's is %s", i, h.Key, key(want[i]))
		}
	}

	lazy.WaitBuilt()
	if lazy.Pending() != 0 {
		t.Fatalf("%d pending once built", lazy.Pending())
	}
	alike(t, eager, lazy, queries, n)
}

// WaitBuilt wants a lazy index's graph, and so does a SearchIn over a set
// larger than its exactMax; one within it does not.
func TestLazyGraphWantedByWaitAndLargeSets(t *testing.T) {
	o := Options{Dims: 8, Lazy: true}
	x := New(o)
	defer x.Close()
	x.WaitBuilt()
	if !x.GraphWanted() {
		t.Fatal("WaitBuilt did not want the graph")
	}
	y := New(o)
	defer y.Close()
	vecs := clustered(rand.New(rand.NewSource(43)), 40, 8, 2)
	ids := make([]uint64, len(vecs))
	for i, v := range vecs {
		ids[i] = y.Add(key(i), v)
	}
	y.SearchIn(vecs[0], Unnamed(ids), 3, len(ids))
	if y.GraphWanted() {
		t.Fatal("a set within exactMax wanted the graph")
	}
	y.SearchIn(vecs[0], Unnamed(ids), 3, len(ids)-1)
	if !y.GraphWanted() {
		t.Fatal("a set past exactMax did not want the graph")
	}
}
