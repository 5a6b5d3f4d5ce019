// Package vector is Memoria's dense index: coder/hnsw over unit-length
// embeddings (cosine similarity as a dot product), safe for concurrent
// search and add.
//
// Adds are cheap and immediately searchable: a new vector first joins a
// small pending set that every search scans exactly, and a background
// builder moves pending vectors into the HNSW graph, one exclusive-lock
// insertion at a time. So an acknowledged write is found by the next
// search (read-your-writes) without paying for graph insertion on the
// write path, and a graph rebuilt at start serves exact results while it
// fills. The index is derived state: the store's embeddings are the copy
// of record, and the index is rebuilt from them at start.
package vector

import (
	"cmp"
	"container/heap"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/coder/hnsw"
	"github.com/viterin/vek/vek32"
)

// Hit is one search result.
type Hit struct {
	Key        string
	Similarity float32 // cosine similarity, -1..1
}

// Options configure an Index.
type Options struct {
	Dims     int
	M        int // HNSW neighbours per node (16)
	EfSearch int // HNSW candidate list size when searching (64)
	// EfConstruction is the candidate list size when inserting (32): a
	// cheaper insertion for a slightly less connected graph.
	EfConstruction int
	// Backlog: while at most this many vectors wait for the graph, the
	// builder works at a fifth of its pace, leaving the CPU to writes and
	// searches; above it, at full pace. 0 = always full pace.
	Backlog int
	Seed    int64 // seeds HNSW level assignment
}

// Index is a concurrent vector index. The zero value is not usable; call New.
type Index struct {
	dims           int
	efSearch       int
	efConstruction int
	backlog        int

	gmu   sync.RWMutex // graph: Search under RLock, Add under Lock
	graph *hnsw.Graph[uint64]

	kmu  sync.RWMutex // ids, keys and vecs
	ids  map[string]uint64
	keys []string
	vecs [][]float32 // by id; the graph holds the same slices

	pmu     sync.RWMutex // ids not yet in the graph
	pending []uint64
	idle    *sync.Cond // signalled when pending drains; uses pmu

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// New returns an empty index and starts its builder.
func New(o Options) *Index {
	if o.M <= 0 {
		o.M = 16
	}
	if o.EfSearch <= 0 {
		o.EfSearch = 64
	}
	if o.EfConstruction <= 0 {
		o.EfConstruction = 32
	}
	g := hnsw.NewGraph[uint64]()
	g.M = o.M
	g.EfSearch = o.EfSearch
	g.Distance = dotDistance
	g.Rng = rand.New(rand.NewSource(o.Seed))
	x := &Index{
		dims:           o.Dims,
		efSearch:       o.EfSearch,
		efConstruction: o.EfConstruction,
		backlog:        o.Backlog,
		graph:          g,
		ids:            map[string]uint64{},
		wake:           make(chan struct{}, 1),
		stop:           make(chan struct{}),
		done:           make(chan struct{}),
	}
	x.idle = sync.NewCond(&x.pmu)
	go x.build()
	return x
}

// dotDistance is cosine distance for unit vectors.
func dotDistance(a, b []float32) float32 { return 1 - vek32.Dot(a, b) }

// Dims is the length of every vector in the index.
func (x *Index) Dims() int { return x.dims }

// Add inserts vec under key and returns the key's id. A key already
// present is left as it is: memories are immutable, so the same key always
// has the same vector. vec must have Dims elements and unit length; the
// index keeps it.
func (x *Index) Add(key string, vec []float32) uint64 {
	if len(vec) != x.dims {
		panic("vector: dimension mismatch")
	}
	x.kmu.Lock()
	if id, ok := x.ids[key]; ok {
		x.kmu.Unlock()
		return id
	}
	id := uint64(len(x.keys))
	x.ids[key] = id
	x.keys = append(x.keys, key)
	x.vecs = append(x.vecs, vec)
	x.kmu.Unlock()

	x.pmu.Lock()
	x.pending = append(x.pending, id)
	x.pmu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
	return id
}

// ID returns the id of key: ids number the keys 0, 1, … in the order they
// were added.
func (x *Index) ID(key string) (uint64, bool) {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	id, ok := x.ids[key]
	return id, ok
}

// Vector returns the vector of id (shared: do not modify).
func (x *Index) Vector(id uint64) []float32 {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	return x.vecs[id]
}

// Lookup returns the vector stored under key (shared: do not modify).
func (x *Index) Lookup(key string) ([]float32, bool) {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	id, ok := x.ids[key]
	if !ok {
		return nil, false
	}
	return x.vecs[id], true
}

// Len is the number of vectors in the index.
func (x *Index) Len() int {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	return len(x.keys)
}

// Pending is the number of vectors not yet in the HNSW graph.
func (x *Index) Pending() int {
	x.pmu.RLock()
	defer x.pmu.RUnlock()
	return len(x.pending)
}

// WaitBuilt blocks until every added vector is in the graph or the index
// is closed.
func (x *Index) WaitBuilt() {
	x.pmu.Lock()
	defer x.pmu.Unlock()
	for len(x.pending) > 0 {
		select {
		case <-x.done:
			return
		default:
		}
		x.idle.Wait()
	}
}

// Close stops the builder. Searches keep working on what is there.
func (x *Index) Close() {
	select {
	case <-x.stop:
	default:
		close(x.stop)
	}
	<-x.done
	x.pmu.Lock()
	x.idle.Broadcast()
	x.pmu.Unlock()
}

// build moves pending vectors into the graph in small chunks, so that a
// search never waits for more than one insertion.
func (x *Index) build() {
	defer close(x.done)
	const chunk = 64
	for {
		select {
		case <-x.stop:
			return
		case <-x.wake:
		}
		for {
			x.pmu.RLock()
			n := min(len(x.pending), chunk)
			ids := slices.Clone(x.pending[:n])
			backlog := len(x.pending)
			x.pmu.RUnlock()
			if n == 0 {
				break
			}
			start := time.Now()
			for _, id := range ids {
				select {
				case <-x.stop:
					return
				default:
				}
				x.kmu.RLock()
				v := x.vecs[id]
				x.kmu.RUnlock()
				// coder/hnsw has one ef for both: insert with the smaller one;
				// no search runs while the write lock is held.
				x.gmu.Lock()
				x.graph.EfSearch = x.efConstruction
				x.graph.Add(hnsw.MakeNode(id, v))
				x.graph.EfSearch = x.efSearch
				x.gmu.Unlock()
			}
			x.pmu.Lock()
			x.pending = append(x.pending[:0], x.pending[n:]...)
			if len(x.pending) == 0 {
				x.idle.Broadcast()
			}
			x.pmu.Unlock()
			// Below the backlog bound, rest restFactor times as long as the
			// chunk took: graph insertion takes a small share of a core from
			// the writes and searches it would otherwise compete with; the
			// pending vectors are searched exactly meanwhile.
			if x.backlog > 0 && backlog <= x.backlog {
				select {
				case <-x.stop:
					return
				case <-time.After(restFactor * time.Since(start)):
				}
			}
		}
	}
}

// Search returns up to k keys nearest to q (unit length), most similar
// first; ties are broken by insertion order.
func (x *Index) Search(q []float32, k int) []Hit {
	if k <= 0 || len(q) != x.dims {
		return nil
	}
	best := make(map[uint64]float32, 2*k)

	x.gmu.RLock()
	for _, r := range x.graph.SearchWithDistance(q, k) {
		best[r.Key] = 1 - r.Distance
	}
	x.gmu.RUnlock()

	x.pmu.RLock()
	pending := slices.Clone(x.pending)
	x.pmu.RUnlock()
	for _, s := range x.exact(q, pending, k) {
		best[s.id] = s.sim
	}
	out := make([]scored, 0, len(best))
	for id, sim := range best {
		out = append(out, scored{id, sim})
	}
	return x.hits(out, k)
}

// exact returns the k best of ids by exact similarity to q.
func (x *Index) exact(q []float32, ids []uint64, k int) []scored {
	top := &minHeap{}
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	for _, id := range ids {
		sim := vek32.Dot(q, x.vecs[id])
		if top.Len() < k {
			heap.Push(top, scored{id, sim})
		} else if sim > (*top)[0].sim {
			(*top)[0] = scored{id, sim}
			heap.Fix(top, 0)
		}
	}
	return *top
}

// hits sorts scored ids best first (ties by insertion order) and keeps k.
func (x *Index) hits(out []scored, k int) []Hit {
	slices.SortFunc(out, func(a, b scored) int {
		if c := cmp.Compare(b.sim, a.sim); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	if len(out) > k {
		out = out[:k]
	}
	hits := make([]Hit, len(out))
	x.kmu.RLock()
	for i, s := range out {
		hits[i] = Hit{Key: x.keys[s.id], Similarity: s.sim}
	}
	x.kmu.RUnlock()
	return hits
}

// SearchAmong returns up to k of ids (from Add or ID) nearest to q by
// exact search: for a small subset (one sona's memories), exact and
// cheaper than filtering a graph search.
func (x *Index) SearchAmong(q []float32, ids []uint64, k int) []Hit {
	if k <= 0 || len(q) != x.dims {
		return nil
	}
	return x.hits(x.exact(q, ids, k), k)
}

type scored struct {
	id  uint64
	sim float32
}

// minHeap keeps the k best by similarity, worst on top.
type minHeap []scored

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return h[i].sim < h[j].sim }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(v any)        { *h = append(*h, v.(scored)) }
func (h *minHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// restFactor is how much longer than it worked the builder rests below its
// backlog bound: it then takes at most 1/(1+restFactor) of a core.
const restFactor = 4
