package bench

import (
	"context"
	"fmt"
	mrand "math/rand"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/coder/hnsw"
	"github.com/philippgille/chromem-go"
	"github.com/viterin/vek/vek32"

	"github.com/memoria-ai/memoria/internal/loadgen"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/vector"
)

// The dense-search measurements run in this process over the vectors the
// server holds: the store's texts (the first size it stored, or the
// corpus's first size texts when no store was built) embedded with the
// hashed embedder, the server's default. Queries are four words of a
// stored text, embedded the same way. Exact search is the truth the
// others' recall@10 is counted against.

// k is how many neighbours a search asks for.
const k = 10

// chromemBudget bounds chromem-go's exhaustive queries (hundreds of ms
// each at 100k).
const chromemBudget = 30 * time.Second

// vectors runs ann and the search references at one size.
func (r *run) vectors(ctx context.Context, size int) error {
	phase := "vectors: " + FormatSize(size)
	emb := llm.NewHashedEmbedder(r.o.Config.Embedder.Dims)
	texts := r.indexedTexts(size)
	r.progress(phase+", embedding", 0, len(texts))
	vecs, err := embedAll(ctx, emb, texts, func(n int) { r.progress(phase+", embedding", n, len(texts)) })
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(r.o.Seed), 7))
	qtexts := make([]string, r.o.Queries)
	for i := range qtexts {
		qtexts[i] = Query(texts[rng.IntN(len(texts))], rng)
	}
	queries, err := emb.Embed(ctx, qtexts)
	if err != nil {
		return err
	}
	r.progress(phase+", exact search", 0, len(queries))
	truth := make([][]int, len(queries))
	exact := r.searches(phase+", exact search", len(queries), func(i int) bool {
		truth[i] = exactSearch(vecs, queries[i], k)
		return true
	})
	if r.o.has(Refs) {
		res := exact.result(Refs, "exact (brute force, vek32.Dot)", size)
		res.Note = "one core; the truth of recall@10"
		r.add(res)
	}
	if r.o.has(ANN) {
		if err := r.ownHNSW(phase, vecs, queries, truth); err != nil {
			return err
		}
	}
	if r.o.has(Refs) {
		r.coderHNSW(phase, vecs, queries, truth)
		if err := r.chromem(ctx, phase, texts, vecs, queries, truth, emb); err != nil {
			return err
		}
	}
	return nil
}

// indexedTexts are the texts of the first size memories of the store, or
// of the corpus when no store was built.
func (r *run) indexedTexts(size int) []string {
	texts := make([]string, 0, size)
	for i := 0; len(texts) < size; i++ {
		if r.store != nil {
			if i >= r.store.man.Tried {
				break
			}
			if r.store.skipped[i] {
				continue
			}
		}
		texts = append(texts, r.o.Corpus.Text(i))
	}
	return texts
}

func embedAll(ctx context.Context, emb *llm.HashedEmbedder, texts []string, done func(int)) ([][]float32, error) {
	out := make([][]float32, len(texts))
	const batch = 1024
	workers := runtime.NumCPU()
	var mu sync.Mutex
	var firstErr error
	n := 0
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := range next {
				hi := min(lo+batch, len(texts))
				v, err := emb.Embed(ctx, texts[lo:hi])
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				copy(out[lo:hi], v)
				n += hi - lo
				done(n)
				mu.Unlock()
			}
		}()
	}
	for lo := 0; lo < len(texts); lo += batch {
		next <- lo
	}
	close(next)
	wg.Wait()
	return out, firstErr
}

// timing is a series of timed operations in this process.
type timing struct {
	lat     []time.Duration
	seconds float64
	cpu     time.Duration
	rss     RSS
}

// searches times up to n calls of f, one after the other, until one
// returns false, with this process's CPU time and memory around them.
func (r *run) searches(phase string, n int, f func(i int) bool) *timing {
	t := &timing{}
	before, _ := loadgen.ReadProc(os.Getpid())
	t.rss.Start = before.RSS
	start := time.Now()
	for i := range n {
		s := time.Now()
		more := f(i)
		t.lat = append(t.lat, time.Since(s))
		if !more {
			break
		}
		if i%16 == 0 {
			r.progress(phase, i, n)
		}
	}
	t.seconds = time.Since(start).Seconds()
	after, _ := loadgen.ReadProc(os.Getpid())
	t.cpu = after.CPU - before.CPU
	// VmHWM lags VmRSS (the kernel counts RSS per CPU in batches): the
	// peak is at least every sample taken.
	t.rss.End, t.rss.Peak = after.RSS, max(after.Peak, before.RSS, after.RSS)
	r.progress(phase, n, n)
	return t
}

func (t *timing) result(scenario, name string, size int) Result {
	lat := slices.Clone(t.lat)
	slices.Sort(lat)
	res := Result{Scenario: scenario, Name: name, Path: "in-process", StoreSize: size, Clients: 1, Ops: int64(len(lat)),
		Seconds: t.seconds, RSS: &RSS{Start: t.rss.Start, Peak: t.rss.Peak, End: t.rss.End}}
	if len(lat) > 0 {
		res.PerSecond = float64(len(lat)) / t.seconds
		res.P50Ms, res.P99Ms, res.MaxMs = ms(loadgen.Percentile(lat, 0.5)), ms(loadgen.Percentile(lat, 0.99)), ms(lat[len(lat)-1])
		res.CPUMsPerOp = ms(t.cpu) / float64(len(lat))
	}
	return res
}

// recallAt is the mean share of each query's exact k nearest found.
func recallAt(truth [][]int, found [][]int) *float64 {
	var sum float64
	for i, want := range truth {
		hit := 0
		for _, id := range found[i] {
			if slices.Contains(want, id) {
				hit++
			}
		}
		sum += float64(hit) / float64(len(want))
	}
	v := sum / float64(len(truth))
	return &v
}

// exactSearch returns the ids of the k vectors most similar to q (unit
// vectors: the dot product is the cosine), best first.
func exactSearch(vecs [][]float32, q []float32, k int) []int {
	type hit struct {
		id  int
		sim float32
	}
	top := make([]hit, 0, k+1)
	for id, v := range vecs {
		sim := vek32.Dot(q, v)
		if len(top) == k && sim <= top[k-1].sim {
			continue
		}
		i := len(top)
		for i > 0 && top[i-1].sim < sim {
			i--
		}
		top = slices.Insert(top, i, hit{id, sim})
		if len(top) > k {
			top = top[:k]
		}
	}
	ids := make([]int, len(top))
	for i, h := range top {
		ids[i] = h.id
	}
	return ids
}

// ownHNSW measures memory/vector's index with the server's index settings.
func (r *run) ownHNSW(phase string, vecs, queries [][]float32, truth [][]int) error {
	o := r.o.Config.Index
	x := vector.New(vector.Options{Dims: len(vecs[0]), M: o.M, EfSearch: o.EfSearch, EfConstruction: o.EfConstruction, Seed: o.Seed})
	defer x.Close()
	r.progress(phase+", memoria HNSW build", 0, 0)
	start := time.Now()
	for i, v := range vecs {
		x.Add(strconv.Itoa(i), v)
	}
	x.WaitBuilt()
	build := time.Since(start).Seconds()
	found := make([][]int, len(queries))
	t := r.searches(phase+", memoria HNSW", len(queries), func(i int) bool {
		for _, h := range x.Search(queries[i], k) {
			id, _ := strconv.Atoi(h.Key)
			found[i] = append(found[i], id)
		}
		return true
	})
	res := t.result(ANN, "memoria HNSW (memory/vector)", len(vecs))
	res.BuildSeconds, res.RecallAt10 = &build, recallAt(truth, found)
	res.Note = fmt.Sprintf("M %d, ef_search %d, ef_construction %d (the server's index settings); build on one goroutine", o.M, o.EfSearch, o.EfConstruction)
	r.add(res)
	return nil
}

// coderHNSW measures github.com/coder/hnsw, the design card's index, with
// the same settings: M, ef_construction while building, ef_search while
// searching, cosine as 1 − dot of unit vectors (as memory/vector had it).
func (r *run) coderHNSW(phase string, vecs, queries [][]float32, truth [][]int) {
	o := r.o.Config.Index
	g := hnsw.NewGraph[int]()
	g.M, g.Distance = o.M, func(a, b []float32) float32 { return 1 - vek32.Dot(a, b) }
	g.Rng = mrand.New(mrand.NewSource(o.Seed))
	g.EfSearch = o.EfConstruction
	start := time.Now()
	for i, v := range vecs {
		g.Add(hnsw.MakeNode(i, v))
		if i%1024 == 0 {
			r.progress(phase+", coder/hnsw build", i, len(vecs))
		}
	}
	build := time.Since(start).Seconds()
	g.EfSearch = o.EfSearch
	found := make([][]int, len(queries))
	t := r.searches(phase+", coder/hnsw", len(queries), func(i int) bool {
		for _, n := range g.Search(queries[i], k) {
			found[i] = append(found[i], n.Key)
		}
		return true
	})
	res := t.result(Refs, "coder/hnsw", len(vecs))
	res.BuildSeconds, res.RecallAt10 = &build, recallAt(truth, found)
	res.Note = fmt.Sprintf("M %d, ef_search %d, ef_construction %d, as memoria's", o.M, o.EfSearch, o.EfConstruction)
	r.add(res)
}

// chromem measures github.com/philippgille/chromem-go, an embedded Go
// vector database: an in-memory collection of the documents with their
// embeddings, queried by embedding (exhaustive, on every core).
func (r *run) chromem(ctx context.Context, phase string, texts []string, vecs, queries [][]float32, truth [][]int, emb *llm.HashedEmbedder) error {
	embed := func(ctx context.Context, text string) ([]float32, error) {
		v, err := emb.Embed(ctx, []string{text})
		if err != nil {
			return nil, err
		}
		return v[0], nil
	}
	col, err := chromem.NewDB().CreateCollection("bench", nil, embed)
	if err != nil {
		return err
	}
	r.progress(phase+", chromem-go add", 0, 0)
	docs := make([]chromem.Document, len(vecs))
	for i, v := range vecs {
		docs[i] = chromem.Document{ID: strconv.Itoa(i), Embedding: v, Content: texts[i]}
	}
	start := time.Now()
	if err := col.AddDocuments(ctx, docs, runtime.NumCPU()); err != nil {
		return err
	}
	build := time.Since(start).Seconds()
	var found [][]int
	deadline := time.Now().Add(chromemBudget)
	var qerr error
	t := r.searches(phase+", chromem-go", len(queries), func(i int) bool {
		res, err := col.QueryEmbedding(ctx, queries[i], k, nil, nil)
		if err != nil {
			qerr = err
			return false
		}
		var ids []int
		for _, d := range res {
			id, _ := strconv.Atoi(d.ID)
			ids = append(ids, id)
		}
		found = append(found, ids)
		return i < 9 || time.Now().Before(deadline)
	})
	if qerr != nil {
		return fmt.Errorf("bench: chromem-go: %w", qerr)
	}
	res := t.result(Refs, "chromem-go v0.7.0", len(vecs))
	res.BuildSeconds, res.RecallAt10 = &build, recallAt(truth[:len(found)], found)
	res.Note = fmt.Sprintf("exhaustive, QueryEmbedding on %d goroutines; %d queries (at most %s of them)", runtime.NumCPU(), len(found), chromemBudget)
	r.add(res)
	return nil
}
