package vector

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sync"
	"testing"

	"github.com/viterin/vek/vek32"
)

// clustered returns n unit vectors around c random centres, like
// embeddings of texts on a few topics.
func clustered(rng *rand.Rand, n, dims, c int) [][]float32 {
	centres := make([][]float32, c)
	for i := range centres {
		centres[i] = unit(randVec(rng, dims))
	}
	out := make([][]float32, n)
	for i := range out {
		v := randVec(rng, dims)
		ctr := centres[rng.Intn(c)]
		for j := range v {
			v[j] = ctr[j] + 0.35*v[j]/float32(math.Sqrt(float64(dims)))
		}
		out[i] = unit(v)
	}
	return out
}

func randVec(rng *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func unit(v []float32) []float32 {
	n := float32(math.Sqrt(float64(vek32.Dot(v, v))))
	for i := range v {
		v[i] /= n
	}
	return v
}

func key(i int) string { return string(rune('a'+i%26)) + string(rune(i)) }

// exact returns the keys of the k nearest vectors by brute force.
func exact(vecs [][]float32, q []float32, k int) []int {
	idx := make([]int, len(vecs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		da, db := vek32.Dot(q, vecs[a]), vek32.Dot(q, vecs[b])
		switch {
		case da > db:
			return -1
		case da < db:
			return 1
		}
		return a - b
	})
	return idx[:k]
}

func TestSearchRecallAgainstExact(t *testing.T) {
	const n, dims, k = 3000, 64, 10
	rng := rand.New(rand.NewSource(1))
	vecs := clustered(rng, n, dims, 30)
	x := New(Options{Dims: dims, M: 16, EfSearch: 64, Seed: 1})
	defer x.Close()
	for i, v := range vecs {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	if x.Pending() != 0 || x.Len() != n {
		t.Fatalf("pending %d len %d", x.Pending(), x.Len())
	}
	found, total := 0, 0
	for q := 0; q < 100; q++ {
		query := vecs[rng.Intn(n)]
		want := map[string]bool{}
		for _, i := range exact(vecs, query, k) {
			want[key(i)] = true
		}
		hits := x.Search(query, k)
		if len(hits) != k {
			t.Fatalf("got %d hits", len(hits))
		}
		for i, h := range hits {
			if want[h.Key] {
				found++
			}
			if i > 0 && h.Similarity > hits[i-1].Similarity {
				t.Fatal("hits not sorted by similarity")
			}
		}
		total += k
	}
	if r := float64(found) / float64(total); r < 0.9 {
		t.Fatalf("recall@%d = %.3f against exact search, want ≥ 0.9", k, r)
	}
}

func TestAddedVectorIsFoundAtOnce(t *testing.T) {
	x := New(Options{Dims: 8})
	defer x.Close()
	v := unit([]float32{1, 2, 3, 4, 5, 6, 7, 8})
	x.Add("k", v)
	hits := x.Search(v, 1) // before the builder ran, from the pending set
	if len(hits) != 1 || hits[0].Key != "k" || hits[0].Similarity < 0.999 {
		t.Fatalf("hits %v", hits)
	}
	x.Add("k", unit([]float32{8, 7, 6, 5, 4, 3, 2, 1})) // same key again: ignored
	x.WaitBuilt()
	if x.Len() != 1 {
		t.Fatalf("len %d", x.Len())
	}
	if hits := x.Search(v, 5); len(hits) != 1 || hits[0].Key != "k" {
		t.Fatalf("after build: %v", hits)
	}
}

func TestConcurrentAddAndSearch(t *testing.T) {
	const dims = 32
	rng := rand.New(rand.NewSource(2))
	vecs := clustered(rng, 2000, dims, 10)
	x := New(Options{Dims: dims, Seed: 3})
	defer x.Close()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(vecs); i += 4 {
				x.Add(key(i), vecs[i])
				// Read-your-writes: what was just added is found.
				hits := x.Search(vecs[i], 3)
				ok := false
				for _, h := range hits {
					ok = ok || h.Key == key(i)
				}
				if !ok {
					t.Errorf("vector %d not found right after Add", i)
					return
				}
			}
		}()
	}
	wg.Wait()
	x.WaitBuilt()
	if x.Len() != len(vecs) {
		t.Fatalf("len %d", x.Len())
	}
}

func TestSearchEdgeCases(t *testing.T) {
	x := New(Options{Dims: 4})
	defer x.Close()
	if hits := x.Search([]float32{1, 0, 0, 0}, 3); len(hits) != 0 {
		t.Fatalf("empty index: %v", hits)
	}
	x.Add("a", []float32{1, 0, 0, 0})
	if hits := x.Search([]float32{1, 0}, 3); hits != nil {
		t.Fatal("wrong dims must not search")
	}
	if hits := x.Search([]float32{1, 0, 0, 0}, 0); hits != nil {
		t.Fatal("k=0 must return nothing")
	}
}

// BenchmarkBuild measures HNSW insertion (the background builder's work
// per vector) into a graph of 10,000 clustered 384-dim vectors.
func BenchmarkBuild(b *testing.B) {
	for _, efc := range []int{16, 32, 64} {
		b.Run(fmt.Sprintf("efc=%d", efc), func(b *testing.B) {
			rng := rand.New(rand.NewSource(1))
			vecs := clustered(rng, 10_000+b.N, 384, 50)
			x := New(Options{Dims: 384, M: 16, EfSearch: 64, EfConstruction: efc, Seed: 1})
			defer x.Close()
			for i := 0; i < 10_000; i++ {
				x.Add(key(i), vecs[i])
			}
			x.WaitBuilt()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				x.Add(key(10_000+i), vecs[10_000+i])
			}
			x.WaitBuilt()
			b.StopTimer()
			found, total := 0, 0
			for q := 0; q < 50; q++ {
				query := vecs[rng.Intn(len(vecs))]
				want := map[string]bool{}
				for _, i := range exact(vecs[:x.Len()], query, 10) {
					want[key(i)] = true
				}
				for _, h := range x.Search(query, 10) {
					if want[h.Key] {
						found++
					}
				}
				total += 10
			}
			b.ReportMetric(float64(found)/float64(total), "recall@10")
		})
	}
}
