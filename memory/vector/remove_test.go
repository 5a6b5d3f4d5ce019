package vector

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// A removed key leaves every search, ID and Lookup, and its vector is
// zeroed; the k nearest of the others are still found.
func TestRemove(t *testing.T) {
	x := New(Options{Dims: 8, Seed: 1})
	defer x.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	vecs := map[string][]float32{}
	for i := range 200 {
		v := make([]float32, 8)
		for j := range v {
			v[j] = rng.Float32() - 0.5
		}
		unit(v)
		key := fmt.Sprint(i)
		vecs[key] = v
		x.Add(key, v)
	}
	x.WaitBuilt()
	q := vecs["7"]
	for i := range 100 { // half the index, the query's own key first
		if !x.Remove(fmt.Sprint((i + 7) % 200)) {
			t.Fatalf("remove %d", i)
		}
	}
	if x.Remove("7") {
		t.Fatal("a key removed twice")
	}
	if x.Len() != 100 {
		t.Fatalf("Len %d, want 100", x.Len())
	}
	if _, ok := x.ID("7"); ok {
		t.Fatal("ID of a removed key")
	}
	hits := x.Search(q, 10)
	if len(hits) != 10 {
		t.Fatalf("%d hits, want 10", len(hits))
	}
	for _, h := range hits {
		if _, ok := x.ID(h.Key); !ok {
			t.Fatalf("search returned removed %q", h.Key)
		}
	}
}
