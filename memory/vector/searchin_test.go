package vector

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/viterin/vek/vek32"
)

// SearchIn finds a set's own nearest whatever its share of the index: a
// set scanned exactly (at most exactMax ids, or too small a share for the
// graph to find k of it) and one whose members the graph's nearest do not
// hold (they are the least similar to the query) give exact's k; a set
// that is most or all of the index comes through the graph, nearly
// exact's, none of it another set's.
func TestSearchInFindsTheSetsNearest(t *testing.T) {
	const n, dims, k = 6000, 64, 10
	rng := rand.New(rand.NewSource(7))
	vecs := clustered(rng, n, dims, 50)
	x := New(Options{Dims: dims, Seed: 1})
	defer x.Close()
	for i, v := range vecs {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	// ids are insertion order here.
	exactAmong := func(q []float32, ids []uint64) []string {
		order := slices.Clone(ids)
		slices.SortFunc(order, func(a, b uint64) int {
			sa, sb := vek32.Dot(q, vecs[a]), vek32.Dot(q, vecs[b])
			if sa != sb {
				if sa > sb {
					return -1
				}
				return 1
			}
			return int(a) - int(b)
		})
		var keys []string
		for _, id := range order[:k] {
			keys = append(keys, key(int(id)))
		}
		return keys
	}
	keys := func(hits []Hit) []string {
		var out []string
		for _, h := range hits {
			out = append(out, h.Key)
		}
		return out
	}
	var most, share, all []uint64 // three quarters of the index; a twentieth of it; all of it
	for i := range n {
		all = append(all, uint64(i))
		if i < n*3/4 {
			most = append(most, uint64(i))
		}
		if i%20 == 0 {
			share = append(share, uint64(i))
		}
	}
	overlap := 0
	for qi := range 20 {
		q := unit(randVec(rng, dims))
		if qi%2 == 0 {
			q = vecs[rng.Intn(n)]
		}
		// A fifth of the index, the least similar to q: the graph's
		// nearest hold none of it.
		byFar := make([]uint64, n)
		for i := range byFar {
			byFar[i] = uint64(i)
		}
		slices.SortFunc(byFar, func(a, b uint64) int {
			sa, sb := vek32.Dot(q, vecs[a]), vek32.Dot(q, vecs[b])
			switch {
			case sa < sb:
				return -1
			case sa > sb:
				return 1
			}
			return 0
		})
		far := byFar[:n/5]
		for _, c := range []struct {
			name     string
			ids      []uint64
			exactMax int
		}{{"a twentieth, exactMax 100", share, 100}, {"a twentieth, exactMax 1000", share, 1000}, {"the far fifth", far, 100}} {
			if got, want := keys(x.SearchIn(q, Unnamed(c.ids), k, c.exactMax)), exactAmong(q, c.ids); !slices.Equal(got, want) {
				t.Fatalf("query %d, %s: %v, want %v", qi, c.name, got, want)
			}
		}
		for _, ids := range [][]uint64{most, all} {
			got, want := keys(x.SearchIn(q, Unnamed(ids), k, 100)), exactAmong(q, ids)
			if len(got) != k {
				t.Fatalf("query %d, %d ids: %d hits", qi, len(ids), len(got))
			}
			for _, g := range got {
				if !slices.Contains(ids, idOf(t, x, g)) {
					t.Fatalf("query %d: %s is not in the set", qi, g)
				}
				if slices.Contains(want, g) {
					overlap++
				}
			}
		}
	}
	if r := float64(overlap) / (2 * 20 * k); r < 0.9 {
		t.Fatalf("three quarters and all of the index through the graph: recall@%d %.2f", k, r)
	}
}

// inSet keeps exactly the items whose ids are in the set (of two runs),
// including ids that share a bit of its screen.
func TestInSet(t *testing.T) {
	var found []item
	for _, id := range []uint32{3, 65539, 131075, 70, 9000, 65536} {
		found = append(found, item{sim: float32(id), id: id})
	}
	runs := []Run{{Name: "a", IDs: []uint64{65539, 7, 70, 1 << 33}}, {Name: "b", IDs: []uint64{131075 + 65536, 65536, 3}}}
	got := inSet(slices.Clone(found), runs)
	var gotIDs []uint32
	for _, it := range got {
		gotIDs = append(gotIDs, it.id)
		if it.sim != float32(it.id) {
			t.Fatalf("item %d lost its similarity: %v", it.id, it.sim)
		}
	}
	slices.Sort(gotIDs)
	if want := []uint32{3, 70, 65536, 65539}; !slices.Equal(gotIDs, want) {
		t.Fatalf("in the set: %v, want %v", gotIDs, want)
	}
}

// BenchmarkSearchIn measures a sona-scoped search of a large sona (half,
// or all, of 50,000 clustered 384-dim vectors, over recall.exact_scan_max)
// through the graph (SearchIn), against the exact scan of the same ids
// (SearchAmong) that a sona within recall.exact_scan_max gets.
func BenchmarkSearchIn(b *testing.B) {
	const n, dims, k = 50_000, 384, 16
	rng := rand.New(rand.NewSource(1))
	vecs := clustered(rng, n+200, dims, 50)
	x := New(Options{Dims: dims, Seed: 1})
	defer x.Close()
	for i, v := range vecs[:n] {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	var half, all []uint64
	for i := range n {
		all = append(all, uint64(i))
		if i%2 == 0 {
			half = append(half, uint64(i))
		}
	}
	qs := vecs[n:]
	for _, c := range []struct {
		name string
		ids  []uint64
	}{{"half", half}, {"all", all}} {
		b.Run(c.name+"/graph", func(b *testing.B) {
			i := 0
			for b.Loop() {
				x.SearchIn(qs[i%len(qs)], Unnamed(c.ids), k, 20_000)
				i++
			}
		})
		b.Run(c.name+"/exact", func(b *testing.B) {
			i := 0
			for b.Loop() {
				x.SearchAmong(qs[i%len(qs)], Unnamed(c.ids), k)
				i++
			}
		})
	}
}

// idOf is key's id in x, failing when x does not know it.
func idOf(t *testing.T, x *Index, key string) uint64 {
	t.Helper()
	id, ok := x.ID(key)
	if !ok {
		t.Fatalf("no id for %q", key)
	}
	return id
}
