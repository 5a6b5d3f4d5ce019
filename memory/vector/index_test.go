package vector

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/viterin/vek/vek32"

	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/llm"
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

// key names vector i (distinct for every i: string(rune(i)) is not, it
// maps the surrogate range to U+FFFD).
func key(i int) string { return "k" + strconv.Itoa(i) }

// exact returns the indexes of the k nearest vectors by brute force, ties
// by index.
func exact(vecs [][]float32, q []float32, k int) []int {
	sims := make([]float32, len(vecs))
	idx := make([]int, len(vecs))
	for i, v := range vecs {
		sims[i] = vek32.Dot(q, v)
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := cmp.Compare(sims[b], sims[a]); c != 0 {
			return c
		}
		return a - b
	})
	return idx[:min(k, len(idx))]
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

// recall returns recall@k of x against exact search over vecs (added to x
// in order under key(i)) for the given queries.
func recall(x *Index, vecs, queries [][]float32, k int) float64 {
	found := 0
	for _, q := range queries {
		want := map[string]bool{}
		for _, i := range exact(vecs, q, k) {
			want[key(i)] = true
		}
		for _, h := range x.Search(q, k) {
			if want[h.Key] {
				found++
			}
		}
	}
	return float64(found) / float64(k*len(queries))
}

// TestRecallClustered: 5,000 embedding-sized vectors in 50 Gaussian
// clusters with the default options, asked held-out queries from the same
// clusters.
func TestRecallClustered(t *testing.T) {
	const n, dims, k = 5000, 384, 10
	rng := rand.New(rand.NewSource(7))
	vecs := clustered(rng, n+200, dims, 50)
	data, queries := vecs[:n], vecs[n:]
	x := New(Options{Dims: dims, Seed: 1})
	defer x.Close()
	for i, v := range data {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	if r := recall(x, data, queries, k); r < 0.95 {
		t.Fatalf("recall@%d = %.3f, want ≥ 0.95", k, r)
	} else {
		t.Logf("recall@%d = %.3f", k, r)
	}
}

// TestRecallOfflineEmbeddings: the same with the built-in offline
// embedder's vectors of short texts on 50 topics, each with 300 words of
// its own and a third of the words from 300 shared by all, words drawn
// with Zipf frequencies as in real text. (With uniformly drawn words the
// nearest texts share next to nothing, their similarities differ by noise,
// and recall@10 is 0.88 at ef 64, 0.95 at ef 128.)
func TestRecallOfflineEmbeddings(t *testing.T) {
	const n, topics, k = 5000, 50, 10
	rng := rand.New(rand.NewSource(8))
	word := func() string {
		b := make([]byte, 4+rng.Intn(6))
		for i := range b {
			b[i] = byte('a' + rng.Intn(26))
		}
		return string(b)
	}
	vocab := make([][]string, topics+1) // the last is shared
	for i := range vocab {
		for range 300 {
			vocab[i] = append(vocab[i], word())
		}
	}
	zipf := rand.NewZipf(rng, 1.1, 2, 299)
	texts := make([]string, n+200)
	for i := range texts {
		topic := rng.Intn(topics)
		words := make([]string, 6+rng.Intn(14))
		for j := range words {
			v := vocab[topic]
			if rng.Intn(3) == 0 {
				v = vocab[topics]
			}
			words[j] = v[zipf.Uint64()]
		}
		texts[i] = strings.Join(words, " ")
	}
	emb := llm.NewHashedEmbedder(384)
	vecs, err := emb.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	data, queries := vecs[:n], vecs[n:]
	x := New(Options{Dims: emb.Dims(), Seed: 1})
	defer x.Close()
	for i, v := range data {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	if r := recall(x, data, queries, k); r < 0.95 {
		t.Fatalf("recall@%d = %.3f, want ≥ 0.95", k, r)
	} else {
		t.Logf("recall@%d = %.3f", k, r)
	}
}

// TestDeterministic: the same adds in the same order with the same seed
// build the same graph and give the same results.
func TestDeterministic(t *testing.T) {
	const n, dims = 3000, 32
	vecs := clustered(rand.New(rand.NewSource(4)), n, dims, 20)
	build := func(seed int64) *Index {
		x := New(Options{Dims: dims, M: 8, Seed: seed})
		for i, v := range vecs {
			x.Add(key(i), v)
		}
		x.WaitBuilt()
		return x
	}
	a, b, c := build(5), build(5), build(6)
	defer a.Close()
	defer b.Close()
	defer c.Close()
	if !sameGraph(a.graph, b.graph) {
		t.Fatal("same seed, different graphs")
	}
	if sameGraph(a.graph, c.graph) {
		t.Fatal("different seeds, same graph")
	}
	rng := rand.New(rand.NewSource(9))
	for range 100 {
		q := vecs[rng.Intn(n)]
		if ha, hb := a.Search(q, 10), b.Search(q, 10); !slices.Equal(ha, hb) {
			t.Fatalf("same seed, different results:\n%v\n%v", ha, hb)
		}
	}
}

// sameGraph reports whether a and b have the same nodes, levels and links.
func sameGraph(a, b *graph) bool {
	if a.n != b.n || a.entry != b.entry || a.top != b.top {
		return false
	}
	for id := range uint32(a.n) {
		if !slices.Equal(a.links0.at(id), b.links0.at(id)) || !slices.Equal(a.upper[id], b.upper[id]) {
			return false
		}
	}
	return true
}

// TestGraphInvariants builds a graph directly (no Index, no goroutine) and
// checks every node's links: within the layer's capacity, to other nodes
// of at least that layer, never to itself, never twice; and every node is
// reachable on layer 0 from the entry point.
func TestGraphInvariants(t *testing.T) {
	const n, dims, m = 2000, 16, 6
	vecs := clustered(rand.New(rand.NewSource(5)), n, dims, 10)
	g := newGraph(dims, m, 32, 1)
	g.qv.grow(n)
	for i, v := range vecs {
		quantizeRecord(v, g.qv.at(uint32(i)))
		g.insert(uint32(i))
	}
	level := func(id uint32) int { return len(g.upper[id]) / (1 + m) }
	if level(g.entry) != g.top {
		t.Fatalf("entry %d has level %d, top is %d", g.entry, level(g.entry), g.top)
	}
	for id := range uint32(n) {
		if level(id) > g.top {
			t.Fatalf("node %d above the top level", id)
		}
		for layer := 0; layer <= level(id); layer++ {
			links := g.links(id, layer)
			if len(links) > g.capacity(layer) {
				t.Fatalf("node %d has %d links on layer %d", id, len(links), layer)
			}
			if len(links) == 0 && n > 1 && layer == 0 {
				t.Fatalf("node %d has no links on layer 0", id)
			}
			seen := map[uint32]bool{}
			for _, to := range links {
				switch {
				case to == id:
					t.Fatalf("node %d links to itself on layer %d", id, layer)
				case seen[to]:
					t.Fatalf("node %d links twice to %d on layer %d", id, to, layer)
				case level(to) < layer:
					t.Fatalf("node %d links to %d (level %d) on layer %d", id, to, level(to), layer)
				}
				seen[to] = true
			}
		}
	}
	seen := map[uint32]bool{g.entry: true}
	for queue := []uint32{g.entry}; len(queue) > 0; queue = queue[1:] {
		for _, to := range g.links(queue[0], 0) {
			if !seen[to] {
				seen[to] = true
				queue = append(queue, to)
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("%d of %d nodes reachable on layer 0", len(seen), n)
	}
}

// TestSearchDuringBuild runs searches while the builder inserts into the
// graph (run with -race): every result is sorted, without duplicates, and
// finds the query's own vector.
func TestSearchDuringBuild(t *testing.T) {
	const n, dims = 3000, 32
	vecs := clustered(rand.New(rand.NewSource(6)), n, dims, 10)
	x := New(Options{Dims: dims, Seed: 1})
	defer x.Close()
	for i, v := range vecs {
		x.Add(key(i), v)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for x.Pending() > 0 {
				i := rng.Intn(n)
				hits := x.Search(vecs[i], 10)
				if len(hits) != 10 || hits[0].Key != key(i) && hits[0].Similarity < 0.9999 {
					t.Errorf("search for %d: %v", i, hits)
					return
				}
				seen := map[string]bool{}
				for j, h := range hits {
					if seen[h.Key] || j > 0 && h.Similarity > hits[j-1].Similarity {
						t.Errorf("search for %d: unsorted or duplicated: %v", i, hits)
						return
					}
					seen[h.Key] = true
				}
			}
		}()
	}
	wg.Wait()
	x.WaitBuilt()
}

// TestTiesByInsertionOrder: equal similarities rank by insertion order,
// from the pending set, the graph and SearchAmong alike.
func TestTiesByInsertionOrder(t *testing.T) {
	v := unit([]float32{1, 2, 3, 4})
	w := unit([]float32{4, 3, 2, 1})
	x := New(Options{Dims: 4})
	defer x.Close()
	for _, k := range []string{"c", "a", "d", "b"} {
		x.Add(k, v)
	}
	x.Add("e", w)
	keys := func(hits []Hit) string {
		var s []string
		for _, h := range hits {
			s = append(s, h.Key)
		}
		return strings.Join(s, " ")
	}
	if got := keys(x.Search(v, 3)); got != "c a d" {
		t.Fatalf("got %q, want \"c a d\"", got)
	}
	x.WaitBuilt()
	if got := keys(x.Search(v, 5)); got != "c a d b e" {
		t.Fatalf("after build: got %q, want \"c a d b e\"", got)
	}
	if got := keys(x.SearchAmong(v, Unnamed([]uint64{4, 3, 1}), 2)); got != "a b" {
		t.Fatalf("among: got %q, want \"a b\"", got)
	}
}

// TestSearchMoreThanEf: k above EfSearch widens the candidate list.
func TestSearchMoreThanEf(t *testing.T) {
	const n, dims, k = 1000, 16, 200
	vecs := clustered(rand.New(rand.NewSource(3)), n, dims, 5)
	x := New(Options{Dims: dims, EfSearch: 16, Seed: 1})
	defer x.Close()
	for i, v := range vecs {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	hits := x.Search(vecs[0], k)
	if len(hits) != k {
		t.Fatalf("got %d hits, want %d", len(hits), k)
	}
	if r := recall(x, vecs, vecs[:20], k); r < 0.9 {
		t.Fatalf("recall@%d = %.3f", k, r)
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

// BenchmarkSearch measures Search on a built graph of n clustered 384-dim
// vectors with held-out queries from the same clusters, reporting the
// latency percentiles of single queries and recall@10 against exact search.
// Building the graph is setup, outside the timings.
func BenchmarkSearch(b *testing.B) {
	const dims, k, queries = 384, 10, 200
	for _, n := range []int{10_000, 100_000} {
		rng := rand.New(rand.NewSource(1))
		vecs := clustered(rng, n+queries, dims, 50)
		data, qs := vecs[:n], vecs[n:]
		x := New(Options{Dims: dims, Seed: 1})
		for i, v := range data {
			x.Add(key(i), v)
		}
		x.WaitBuilt()
		truth := make([]map[string]bool, len(qs))
		for i, q := range qs {
			truth[i] = map[string]bool{}
			for _, j := range exact(data, q, k) {
				truth[i][key(j)] = true
			}
		}
		for _, ef := range []int{64, 128} {
			b.Run(fmt.Sprintf("n=%d/ef=%d", n, ef), func(b *testing.B) {
				x.gmu.Lock()
				x.efSearch = ef
				x.gmu.Unlock()
				lat := make([]time.Duration, b.N)
				b.ResetTimer()
				for i := range b.N {
					start := time.Now()
					x.Search(qs[i%len(qs)], k)
					lat[i] = time.Since(start)
				}
				b.StopTimer()
				found := 0
				for i, q := range qs {
					for _, h := range x.Search(q, k) {
						if truth[i][h.Key] {
							found++
						}
					}
				}
				testutil.ReportLatencies(b, lat)
				b.ReportMetric(float64(found)/float64(k*len(qs)), "recall@10")
			})
		}
		x.Close()
	}
}

// BenchmarkSearchAmong scans 1,000 and 10,000 ids scattered over 200,000
// random vectors (a sona's memories in a large store: at 1M memories in
// 100 sonas, 10,000), as recall's sona scope and a new memory's
// neighbours do, exactly and screened on the quantised records first
// (exactAmong, what SearchAmong does). The vectors are stored without the
// graph (its build is not what is measured).
func BenchmarkSearchAmong(b *testing.B) {
	const n, dims = 200_000, 384
	rng := rand.New(rand.NewSource(1))
	x := New(Options{Dims: dims, Seed: 1})
	defer x.Close()
	x.vecs.grow(n)
	x.qv.grow(n)
	for i := range n {
		v := unit(randVec(rng, dims))
		copy(x.vecs.at(uint32(i)), v)
		quantizeRecord(v, x.qv.at(uint32(i)))
		x.keys.Add(key(i))
	}
	for _, members := range []int{1000, 10_000} {
		ids := make([]uint64, members)
		for i := range ids {
			ids[i] = uint64(rng.Intn(n))
		}
		q := unit(randVec(rng, dims))
		for _, mode := range []string{"exact", "screened"} {
			b.Run(fmt.Sprintf("%s-%d", mode, members), func(b *testing.B) {
				for b.Loop() {
					if mode == "exact" {
						x.exact(q, Unnamed(ids), 16)
					} else {
						x.exactAmong(q, Unnamed(ids), 16)
					}
				}
			})
		}
	}
}

// The graph is searched by the quantised vectors, and its candidates are
// scored again with the float32 ones: where the quantised similarities put
// two vectors in the wrong order, a search's hits are in the exact one,
// each with its exact similarity.
func TestSearchRescoresExactly(t *testing.T) {
	const dims = 384
	rng := rand.New(rand.NewSource(7))
	qsim := func(a, b []float32) float32 {
		qa, qb := make([]int8, dims), make([]int8, dims)
		sa, sb := quantize(a, qa), quantize(b, qb)
		return float32(dotInt8(qa, qb)) * sa * sb
	}
	// q and two vectors a and b nearly as close to it, exactly a first,
	// quantised b first.
	var q, a, b []float32
	for range 10_000 {
		q = unit(randVec(rng, dims))
		base := randVec(rng, dims)
		for i := range base {
			base[i] += 2 * q[i] * float32(math.Sqrt(dims))
		}
		a, b = unit(base), unit(slices.Clone(base))
		for i := range b {
			b[i] += float32(rng.NormFloat64()) * 0.002
		}
		b = unit(b)
		if vek32.Dot(q, b) > vek32.Dot(q, a) {
			a, b = b, a
		}
		if vek32.Dot(q, a) > vek32.Dot(q, b) && qsim(q, a) < qsim(q, b) {
			break
		}
		q = nil
	}
	if q == nil {
		t.Fatal("no pair the quantised similarities put in the wrong order")
	}
	x := New(Options{Dims: dims, Seed: 1})
	defer x.Close()
	vecs := [][]float32{b, a}
	for range 300 {
		vecs = append(vecs, unit(randVec(rng, dims)))
	}
	for i, v := range vecs {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	if x.Pending() != 0 {
		t.Fatalf("%d vectors not in the graph", x.Pending())
	}
	if hits := x.Search(q, 1); len(hits) != 1 || hits[0].Key != key(1) {
		t.Fatalf("the best by exact similarity is %s (%v), got %+v", key(1), vek32.Dot(q, a), hits)
	}
	// Over many queries: every hit's similarity is the exact one, best
	// first.
	for range 50 {
		q := unit(randVec(rng, dims))
		hits := x.Search(q, 10)
		for i, h := range hits {
			j, _ := strconv.Atoi(strings.TrimPrefix(h.Key, "k"))
			if want := vek32.Dot(q, vecs[j]); h.Similarity != want {
				t.Fatalf("hit %s: similarity %v, exactly %v", h.Key, h.Similarity, want)
			}
			if i > 0 && h.Similarity > hits[i-1].Similarity {
				t.Fatalf("hits out of order: %+v", hits)
			}
		}
	}
}

// TestExactAmongIsExact: the screened scan of a sona's members
// (exactAmong) returns exact's items with exact's similarities — over
// clustered vectors, the offline embedder's, copies of one vector (ties
// by insertion order), members removed (one with aliases, whose record
// stays), and every k up to a quarter of the members.
func TestExactAmongIsExact(t *testing.T) {
	const n, dims = 6000, 384
	rng := rand.New(rand.NewSource(11))
	vecs := clustered(rng, n, dims, 40)
	emb := llm.NewHashedEmbedder(dims)
	texts := make([]string, 1000)
	for i := range texts {
		texts[i] = fmt.Sprintf("note %d about topic %d and word%d", i%37, i%11, i%5)
	}
	ev, err := emb.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	vecs = append(vecs, ev...)
	for range 40 { // copies: aliases in the graph, equal similarities
		vecs = append(vecs, slices.Clone(vecs[17]))
	}
	x := New(Options{Dims: dims, Seed: 1})
	defer x.Close()
	for i, v := range vecs {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	x.Remove(key(17)) // a representative: its record stays for its aliases
	x.Remove(key(100))
	x.Remove(key(n + 3))
	sorted := func(items []item) []item {
		slices.SortFunc(items, byBest)
		return items
	}
	for trial := range 60 {
		var ids []uint64
		for i := range vecs {
			if rng.Intn(3) == 0 || i == 17 || i >= len(vecs)-40 {
				ids = append(ids, uint64(i))
			}
		}
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		q := vecs[rng.Intn(len(vecs))]
		if trial%3 == 0 {
			q = unit(randVec(rng, dims))
		}
		for _, k := range []int{1, 10, 16, 40, 200, len(ids)/4 - 1} {
			want, got := sorted(x.exact(q, Unnamed(ids), k)), sorted(x.exactAmong(q, Unnamed(ids), k))
			if !slices.Equal(want, got) {
				t.Fatalf("trial %d, k %d: exactAmong %v, exact %v", trial, k, got[:min(5, len(got))], want[:min(5, len(want))])
			}
		}
	}
}

// Search scores exactly only the candidates that can be among the k best
// (rescore): its hits are those of scoring every candidate of the graph's
// search exactly — the same keys, order and similarities — over clustered
// vectors, the offline embedder's, copies of one vector (aliases; ties by
// insertion order), removed vectors (one with aliases, whose record
// stays), for k from 1 to beyond ef.
func TestSearchRescoresOnlyWhatCanWin(t *testing.T) {
	const dims = 384
	rng := rand.New(rand.NewSource(12))
	vecs := clustered(rng, 3000, dims, 30)
	emb := llm.NewHashedEmbedder(dims)
	texts := make([]string, 500)
	for i := range texts {
		texts[i] = fmt.Sprintf("note %d about topic %d", i%23, i%7)
	}
	embs, err := emb.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	vecs = append(vecs, embs...)
	for range 40 {
		vecs = append(vecs, vecs[100])
	}
	x := New(Options{Dims: dims, EfSearch: 64, Seed: 1})
	defer x.Close()
	for i, v := range vecs {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	for i := 0; i < len(vecs); i += 29 {
		x.Remove(key(i)) // 100 among them: the representative of the copies
	}
	// every is the search with every candidate scored exactly.
	every := func(q []float32, k int) []Hit {
		s := &scratch{q: make([]int8, dims)}
		qq := qvec{s.q, quantize(q, s.q)}
		x.gmu.RLock()
		found := x.graph.search(s, qq, max(x.efSearch, k), nil)
		found = x.graph.withAliases(found, k)
		x.gmu.RUnlock()
		for i := range found {
			found[i].sim = vek32.Dot(q, x.Vector(uint64(found[i].id), nil))
		}
		return x.hits(found, k)
	}
	queries := append(clustered(rng, 60, dims, 30), vecs[100], vecs[3001])
	for _, q := range queries {
		for _, k := range []int{1, 3, 10, 40, 100} {
			want := every(q, k)
			if len(want) < k {
				continue // Search asks for more; every does not
			}
			if got := x.Search(q, k); !slices.Equal(got, want) {
				t.Fatalf("k %d:\n%v\nwant\n%v", k, got, want)
			}
		}
	}
}
