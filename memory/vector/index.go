package vector

import (
	"cmp"
	"errors"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/viterin/vek/vek32"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
)

// Hit is one search result.
type Hit struct {
	Key        string
	Similarity float32 // cosine similarity, -1..1
}

// Options configure an Index.
type Options struct {
	Dims     int
	M        int // HNSW links per node on upper layers, twice as many on layer 0 (32; at least 2)
	EfSearch int // HNSW candidate list size when searching (128)
	// EfConstruction is the candidate list size when inserting (64): a
	// cheaper insertion for a slightly less connected graph.
	EfConstruction int
	// Backlog: while at most this many vectors wait for the graph, the
	// builder works at a fifth of its pace, leaving the CPU to writes and
	// searches; above it, at full pace. 0 = always full pace.
	Backlog int
	Seed    int64 // seeds HNSW level assignment
	// HeapVectors is the most bytes of float32 vectors a restore from a
	// snapshot file reads into the heap, and (with SpillDir) the heap
	// keeps (64 MiB: 43,690 vectors of 384 dimensions; negative: none). A snapshot with more leaves them in
	// the file and reads each from it when a search needs it (floats.go):
	// a system call a vector re-ranked — a search of 20,000 vectors took
	// 0.4–0.9 ms so, 0.15–0.3 ms with them in the heap
	// (BenchmarkSearchRestored, a loaded machine) — which a store that
	// small need not pay.
	HeapVectors int64
	// SpillDir is where the float32 vectors added beyond HeapVectors go
	// once the graph holds them, oldest first, into a file no name reaches
	// (floats.go), until a snapshot's file holds them (AdoptFloats): the
	// heap then keeps at most HeapVectors bytes of them, not every vector
	// added since the last snapshot. Empty: the heap keeps them all.
	SpillDir string
	// PackBytes is the most bytes of packs (packs.go): copies of large
	// sonas' int8 records side by side, which their scans read several
	// times faster than where the records lie (256 MiB; negative: none).
	PackBytes int64
	// SpillRoom reports whether n more bytes may be written to SpillDir
	// (nil: always); a chunk it refuses stays in the heap.
	SpillRoom func(n int64) bool
	// SpillStopped is told why spilling stopped, once (nil: nobody).
	SpillStopped func(error)
	// Clock times the builder's pacing (default: the wall clock).
	Clock clock.Clock
	// Lazy defers the graph until a search needs it: Search, a SearchIn
	// that goes through the graph (a set past its exactMax, at least an
	// eighth of the index), or WaitBuilt. Until then the added vectors
	// stay pending, searched exactly, and the builder only moves them out
	// of the heap; from then on it places them as if the index were not
	// lazy. A store whose searches are all of small sets (a sona's
	// memories, scanned exactly) never pays for the graph. A graph a
	// snapshot restores is searched as it is, its pending vectors placed
	// once wanted.
	Lazy bool
}

// Index is a concurrent vector index. The zero value is not usable; call New.
type Index struct {
	dims     int
	efSearch int
	backlog  int
	clock    clock.Clock
	heapVecs int64 // Options.HeapVectors

	// smu orders the moves of vectors out of the heap (spillOld) with
	// AdoptFloats, which frees the spill's blocks; taken before the others.
	smu       sync.Mutex
	spillDir  string
	spillRoom func(n int64) bool
	spillStop func(error)
	spillBuf  []float32 // the chunk being written
	spillErr  error     // why spilling stopped

	gmu sync.RWMutex // graph: Search under RLock, insertion under Lock
	// bmu is held by the builder around each insertion, and by a snapshot
	// while it writes the graph: the builder then waits without queueing
	// on gmu, which would hold up new searches behind it.
	bmu     sync.Mutex
	graph   *graph
	scratch sync.Pool // *scratch for searches
	// hurry is how many vectors the builder still places at full pace
	// whatever the backlog: those a restored snapshot left pending (a
	// start is not done until they are in the graph).
	hurry atomic.Int64
	// wanted: the builder places vectors in the graph (Options.Lazy: from
	// the first search that needs it, want).
	wanted atomic.Bool

	kmu     sync.RWMutex    // ids, keys, the vectors and removed
	ids     *base.KeyIndex  // key → id, of the keys not removed (keyOf)
	keys    base.KeyTable   // by id; a snapshot reads a Frozen copy under gmu, which Remove (its Clear) takes
	vecs    floats          // by id (floats.go): in the heap or a restored snapshot's file
	qv      chunked[int8]   // by id, quantised records (quant.go); the graph shares the chunks
	removed map[uint64]bool // ids of removed keys (forgotten memories)
	// mapping is the part of a snapshot's file mapped by Restore (nil if
	// none): the pages holding its quantised records.
	mapping []byte
	packs   packs  // of named runs' records, read and extended under kmu read-held
	changes uint64 // keys added and removed (Changes)
	// retired are the files of floats AdoptFloats replaced, which copies
	// made before may still read: each is closed when the last copy goes
	// (its finalizer), or by Unmap.
	retired []weak.Pointer[os.File]

	pmu     sync.RWMutex // ids not yet in the graph
	pending []uint64
	// spilling: the builder moves vectors out of the heap after its last
	// insertions (spillOld).
	spilling bool
	idle     *sync.Cond // signalled when pending drains and spilling ends; uses pmu

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// New returns an empty index and starts its builder.
func New(o Options) *Index {
	if o.M <= 0 {
		o.M = 32
	}
	o.M = max(o.M, 2) // the level multiplier is 1/ln(M)
	if o.EfSearch <= 0 {
		o.EfSearch = 128
	}
	if o.EfConstruction <= 0 {
		o.EfConstruction = 64
	}
	if o.HeapVectors == 0 {
		o.HeapVectors = 64 << 20
	}
	if o.PackBytes == 0 {
		o.PackBytes = 256 << 20
	}
	x := &Index{
		dims:     o.Dims,
		efSearch: o.EfSearch,
		backlog:  o.Backlog,
		heapVecs: o.HeapVectors,
		clock:    clock.Or(o.Clock),
		graph:    newGraph(o.Dims, o.M, o.EfConstruction, o.Seed),
		scratch:  sync.Pool{New: func() any { return new(scratch) }},
		vecs:     floats{chunked: chunked[float32]{stride: o.Dims}},
		qv:       chunked[int8]{stride: o.Dims + scaleBytes},
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	x.ids = base.NewKeyIndex(0, x.keyOf)
	x.packs.budget = o.PackBytes
	x.spillDir, x.spillRoom, x.spillStop = o.SpillDir, o.SpillRoom, o.SpillStopped
	x.idle = sync.NewCond(&x.pmu)
	x.wanted.Store(!o.Lazy)
	go x.build()
	return x
}

// Dims is the length of every vector in the index.
func (x *Index) Dims() int { return x.dims }

// Add inserts vec under key and returns the key's id. A key already
// present is left as it is: memories are immutable, so the same key always
// has the same vector. vec must have Dims elements and unit length; the
// index keeps a copy.
func (x *Index) Add(key string, vec []float32) uint64 {
	if len(vec) != x.dims {
		panic("vector: dimension mismatch")
	}
	x.kmu.Lock()
	if id, ok := x.ids.Get(key); ok {
		x.kmu.Unlock()
		return uint64(id)
	}
	if uint64(x.keys.Len()) >= math.MaxUint32 { // KeyIndex numbers up to 2^32-2
		x.kmu.Unlock()
		panic("vector: more than 2^32-1 vectors")
	}
	id := uint64(x.keys.Len())
	x.keys.Add(key)
	x.ids.Put(key, uint32(id))
	x.changes++
	x.vecs.grow(x.keys.Len())
	x.qv.grow(x.keys.Len())
	copy(x.vecs.at(uint32(id)), vec)
	quantizeRecord(vec, x.qv.at(uint32(id)))
	x.kmu.Unlock()

	x.pmu.Lock()
	x.pending = append(x.pending, id)
	x.pmu.Unlock()
	x.wakeBuilder()
	return id
}

// ID returns the id of key: ids number the keys 0, 1, … in the order they
// were added.
func (x *Index) ID(key string) (uint64, bool) {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	id, ok := x.ids.Get(key)
	return uint64(id), ok
}

// keyOf is the key of id (for ids), under kmu.
func (x *Index) keyOf(id uint32) string { return x.keys.At(id) }

// Key returns the key of id.
func (x *Index) Key(id uint64) (string, bool) {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	if id >= uint64(x.keys.Len()) {
		return "", false
	}
	return x.keys.At(uint32(id)), true
}

// Vector returns the vector of id: the index's own (shared: do not
// modify) or, for one out of the heap (a restored snapshot's or one moved
// out: floats.go), a copy read from its file into buf, grown when shorter
// than Dims (nil: a new slice).
func (x *Index) Vector(id uint64, buf []float32) []float32 {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	if id >= uint64(x.keys.Len()) {
		panic("vector: no such id")
	}
	return x.vecs.get(uint32(id), slices.Grow(buf[:0], x.dims))
}

// Lookup returns the vector stored under key: the index's own (shared: do
// not modify) or, for one out of the heap, a copy.
func (x *Index) Lookup(key string) ([]float32, bool) { return x.LookupInto(key, nil) }

// LookupInto is Lookup reading a vector out of the heap into buf when it
// holds Dims elements (else into a new slice): a caller that needs many at
// once reads them into one slice, not one each.
func (x *Index) LookupInto(key string, buf []float32) ([]float32, bool) {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	id, ok := x.ids.Get(key)
	if !ok {
		return nil, false
	}
	if len(buf) < x.dims && !x.vecs.inHeap(uint32(id)) {
		buf = make([]float32, x.dims)
	}
	return x.vecs.get(uint32(id), buf), true
}

// Dot is q's dot product with the vector stored under key, false when
// there is none: Lookup's vector without its copy — a restored snapshot's
// is read into the scratch of the scans. A recall scores each candidate
// and each neighbour of its chain so (issue 15: the copies were a
// twentieth of a recall's CPU on a restored store of 100,000 memories).
func (x *Index) Dot(key string, q []float32) (float32, bool) {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	id, ok := x.ids.Get(key)
	if !ok {
		return 0, false
	}
	if x.vecs.inHeap(uint32(id)) {
		return vek32.Dot(q, x.vecs.at(uint32(id))), true
	}
	s := x.scratch.Get().(*scratch)
	defer x.scratch.Put(s)
	s.f32 = x.vecs.get(uint32(id), slices.Grow(s.f32[:0], x.dims))
	return vek32.Dot(q, s.f32), true
}

// Quantized is a query in the int8 form of the index's records
// (Quantize), for ApproxDot.
type Quantized struct {
	q     []int8
	scale float32
}

// Quantize is q's int8 form (q of the index's dimensions).
func (x *Index) Quantize(q []float32) Quantized {
	qq := Quantized{q: make([]int8, len(q))}
	qq.scale = quantize(q, qq.q)
	return qq
}

// ApproxDotID is the dot product of q with the vector of id from the
// int8 records the graph is searched on, which are in memory where a
// restored snapshot's float32 vectors are read from its file: within the
// quantisation's error of Dot (for unit vectors of 384 dimensions, a few
// thousandths); 0 for a removed id, as Dot reads it; false for an id never
// given out. By id: a sona's chain holds its members' ids, and looking up
// their keys was a third of what their cosines cost a recall.
func (x *Index) ApproxDotID(id uint64, q Quantized) (float32, bool) {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	if id >= uint64(x.keys.Len()) || len(q.q) != x.dims {
		return 0, false
	}
	if x.removed[id] {
		return 0, true // its vector is zero (as Dot reads it)
	}
	return ApproxDot(q, x.record(id)), true
}

// record is id's int8 record as the index holds it, not a copy (kmu held,
// id given out and not removed): from a mapped pack when one holds it (so
// that the records by id lie untouched where packs hold every id).
func (x *Index) record(id uint64) Quantized {
	if r, ok := x.packs.mapped.record(id, x.dims); ok {
		return r
	}
	rec := x.qv.at(uint32(id))
	return Quantized{q: rec[:x.dims], scale: recordScale(rec[x.dims:])}
}

// RecordInto is the int8 record of id — the form the graph is searched
// on — copied into buf (grown when shorter than Dims), for ApproxDot:
// zero for a removed id, as Dot reads it; false for an id never given out.
func (x *Index) RecordInto(id uint64, buf []int8) (Quantized, bool) {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	if id >= uint64(x.keys.Len()) {
		return Quantized{}, false
	}
	buf = slices.Grow(buf[:0], x.dims)[:x.dims]
	if x.removed[id] {
		clear(buf)
		return Quantized{q: buf}, true
	}
	r := x.record(id)
	copy(buf, r.q)
	return Quantized{q: buf, scale: r.scale}, true
}

// Len is the number of dimensions of q (0: none).
func (q Quantized) Len() int { return len(q.q) }

// ApproxDot is the dot product of two int8 forms (Quantize, RecordInto),
// within the quantisation's error of their vectors' (for unit vectors of
// 384 dimensions, a few thousandths); 0 when their lengths differ.
func ApproxDot(a, b Quantized) float32 {
	if len(a.q) != len(b.q) {
		return 0
	}
	return float32(dotInt8(a.q, b.q)) * a.scale * b.scale
}

// Len is the number of vectors in the index.
func (x *Index) Len() int {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	return x.keys.Len() - len(x.removed)
}

// IDs is the number of ids given out: the vectors in the index and
// those removed.
func (x *Index) IDs() int { return x.total() }

// Live reports whether id is a vector of the index: given out and not
// removed.
func (x *Index) Live(id uint64) bool {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	return id < uint64(x.keys.Len()) && !x.removed[id]
}

// Remove takes key's vector out of the index (a forgotten memory): its
// vector is zeroed, searches no longer return it, and ID and Lookup no
// longer know the key. Its id stays taken, and its node stays in the
// graph as a waypoint until the index is rebuilt (at the next start). It
// reports whether key was there.
func (x *Index) Remove(key string) bool {
	x.gmu.Lock() // the graph reads the vectors under gmu
	defer x.gmu.Unlock()
	x.kmu.Lock()
	defer x.kmu.Unlock()
	id, ok := x.ids.Get(key)
	if !ok {
		return false
	}
	x.ids.Delete(key) // before the key goes
	x.keys.Clear(id)
	x.vecs.remove(uint32(id))
	if x.removed == nil {
		x.removed = map[uint64]bool{}
	}
	x.removed[uint64(id)] = true
	// A representative stays the way to its live aliases: its quantised
	// record, theirs too, is kept until the last of them goes.
	g := x.graph
	if len(g.aliases[uint32(id)]) == 0 {
		clear(x.qv.at(uint32(id))) // its scale too: a zero vector
	}
	if int(id) < g.n {
		if rep, ok := g.aliasOf(uint32(id)); ok {
			g.unalias(uint32(id))
			if x.removed[uint64(rep)] && len(g.aliases[rep]) == 0 {
				clear(x.qv.at(rep))
			}
		}
	}
	x.changes++
	return true
}

// Pending is the number of vectors not yet in the HNSW graph.
func (x *Index) Pending() int {
	x.pmu.RLock()
	defer x.pmu.RUnlock()
	return len(x.pending)
}

// WaitBuilt blocks until every added vector is in the graph, and the
// heap's vectors beyond Options.HeapVectors in the spill, or the index is
// closed. A lazy index's graph is wanted from then on.
func (x *Index) WaitBuilt() {
	x.want()
	x.pmu.Lock()
	defer x.pmu.Unlock()
	for len(x.pending) > 0 || x.spilling {
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

// Unmap ends the mapping of a restored snapshot's quantised records and
// closes its file (Restore), so that the file's blocks are freed and its
// file system can be unmounted; the index is empty afterwards. It
// closes the index first (the builder must not insert from records it
// drops). Call it last, once nothing searches the index nor holds a
// vector it returned.
func (x *Index) Unmap() error {
	x.Close()
	x.smu.Lock()
	defer x.smu.Unlock()
	x.bmu.Lock()
	defer x.bmu.Unlock()
	x.gmu.Lock()
	defer x.gmu.Unlock()
	x.kmu.Lock()
	defer x.kmu.Unlock()
	x.pmu.Lock()
	defer x.pmu.Unlock()
	var err error
	for _, p := range x.retired {
		if f := p.Value(); f != nil {
			err = errors.Join(err, f.Close())
		}
	}
	x.retired = nil
	if x.mapping == nil && x.vecs.file == nil && x.vecs.spill == nil {
		return err
	}
	g := x.graph
	x.graph = newGraph(x.dims, g.m, g.efc, g.seed)
	x.keys, x.removed, x.pending = base.KeyTable{}, nil, nil
	x.ids.Reset(0)
	x.packs.reset()
	file, spill := x.vecs.file, x.vecs.spill
	x.vecs, x.qv.chunks = floats{chunked: chunked[float32]{stride: x.dims}}, nil
	m := x.mapping
	x.mapping = nil
	if m != nil {
		err = errors.Join(err, unmapFile(m))
	}
	for _, f := range []*os.File{file, spill} {
		if f != nil {
			err = errors.Join(err, f.Close())
		}
	}
	return err
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
		if !x.wanted.Load() {
			x.spill() // a lazy index's vectors wait for no graph
			continue
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
			start := x.clock.Now()
			for _, id := range ids {
				select {
				case <-x.stop:
					return
				default:
				}
				x.bmu.Lock()
				x.gmu.Lock()
				// The chunks hold every pending vector: Add stores a
				// vector before it makes its id pending. Taken anew for
				// each: AdoptFloats may have replaced the floats.
				x.kmu.RLock()
				x.graph.qv, x.graph.vecs = x.qv, x.vecs
				x.kmu.RUnlock()
				x.graph.insert(uint32(id))
				x.gmu.Unlock()
				x.bmu.Unlock()
			}
			x.pmu.Lock()
			x.pending = append(x.pending[:0], x.pending[n:]...)
			x.pmu.Unlock()
			x.spill()
			// Below the backlog bound, rest restFactor times as long as the
			// chunk took: graph insertion takes a small share of a core from
			// the writes and searches it would otherwise compete with; the
			// pending vectors are searched exactly meanwhile.
			if h := x.hurry.Load(); h > 0 {
				x.hurry.Store(max(0, h-int64(n)))
			} else if x.backlog > 0 && backlog <= x.backlog {
				select {
				case <-x.stop:
					return
				case <-x.clock.NewTimer(restFactor * x.clock.Since(start)).C():
				}
			}
		}
	}
}

// spill moves vectors out of the heap (spillOld), WaitBuilt waiting
// meanwhile, and wakes it once nothing is pending.
func (x *Index) spill() {
	x.pmu.Lock()
	x.spilling = true
	x.pmu.Unlock()
	x.spillOld()
	x.pmu.Lock()
	x.spilling = false
	if len(x.pending) == 0 {
		x.idle.Broadcast()
	}
	x.pmu.Unlock()
}

// want has the builder place the pending vectors in the graph from now on
// (Options.Lazy), at full pace until those pending now are placed.
func (x *Index) want() {
	if x.wanted.Load() || !x.wanted.CompareAndSwap(false, true) {
		return
	}
	x.pmu.RLock()
	x.hurry.Add(int64(len(x.pending)))
	x.pmu.RUnlock()
	x.wakeBuilder()
}

// wakeBuilder has the builder look at the pending vectors again.
func (x *Index) wakeBuilder() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// GraphWanted reports whether the builder places vectors in the graph: a
// lazy index's (Options.Lazy) once a search needed it.
func (x *Index) GraphWanted() bool { return x.wanted.Load() }

// Search returns up to k keys nearest to q (unit length), most similar
// first; ties are broken by insertion order.
func (x *Index) Search(q []float32, k int) []Hit {
	if k <= 0 || len(q) != x.dims {
		return nil
	}
	// Removed vectors are zero: they rank low but can still fill the top
	// k of a graph search. Ask for more until k remain or nothing more
	// can be found.
	for want := k; ; want *= 4 {
		hits, found := x.search(q, want, k)
		if len(hits) == k || found < want || want >= x.total() {
			return hits
		}
	}
}

func (x *Index) total() int {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	return x.keys.Len()
}

// search returns the k best of the want nearest (and how many it found).
func (x *Index) search(q []float32, want, k int) ([]Hit, int) {
	found := x.nearest(q, want, k)
	return x.hits(found, k), len(found)
}

// nearest is search's candidates, in no order: the graph's want nearest
// (and their aliases) and the pending vectors' want nearest, the k best
// of them with their exact similarities (rescore).
func (x *Index) nearest(q []float32, want, k int) []item {
	x.want()
	// Pending before the graph: an id leaves the pending set only once it
	// is in the graph, so in this order none slips between the two.
	x.pmu.RLock()
	pending := slices.Clone(x.pending)
	x.pmu.RUnlock()

	s := x.scratch.Get().(*scratch)
	defer x.scratch.Put(s)
	s.q = slices.Grow(s.q[:0], x.dims)[:x.dims]
	qq := qvec{s.q, quantize(q, s.q)}
	ef := max(x.efSearch, want)
	x.gmu.RLock()
	found := x.graph.search(s, qq, ef, make([]item, 0, ef+min(want, len(pending))))
	found = x.graph.withAliases(found, want)
	x.gmu.RUnlock()
	x.rescore(s, q, qq, found, k)

	if len(pending) > 0 {
		found = append(found, x.exactAmong(q, Unnamed(pending), want)...)
		// An id that joined the graph meanwhile is in both: once, whichever
		// similarity it keeps (a quantised one is of an id below the k
		// best, exact or not).
		slices.SortFunc(found, func(a, b item) int { return cmp.Compare(a.id, b.id) })
		found = slices.CompactFunc(found, func(a, b item) bool { return a.id == b.id })
	}
	return found
}

// rescore replaces the similarities of the graph's candidates, from the
// quantised vectors, with the exact ones where they matter: those of the
// k best (removed ones left out, as hits leaves them out) and of every
// candidate that could still be among them. As in exactAmong, each
// candidate's quantised similarity is within a bound of its exact one
// (quantError); best upper bound first, candidates are scored exactly
// until the next one's upper bound is below the k-th best exact
// similarity. The ones left are less similar than k others and keep a
// quantised similarity below theirs: the k best, their order and their
// similarities are those of scoring every candidate exactly, for a
// fraction of the float32 reads — each one a read of the snapshot's file
// for a restored vector (floats.go). qq is the query's quantised form.
func (x *Index) rescore(s *scratch, q []float32, qq qvec, found []item, k int) {
	ea, eb := quantError(q, qq.v, qq.s)
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	checkRemoved := len(x.removed) > 0
	s.sel = s.sel[:0]
	for i, it := range found {
		if checkRemoved && x.removed[uint64(it.id)] {
			found[i].sim = 0 // its vector is zero (its record may stay, for its aliases)
			continue
		}
		ws := recordScale(x.qv.at(it.id)[x.dims:])
		s.sel = append(s.sel, item{it.sim + ea*ws + eb, uint32(i)})
	}
	slices.SortFunc(s.sel, func(a, b item) int { return cmp.Compare(b.sim, a.sim) })
	top := s.top[:0]
	buf := slices.Grow(s.f32[:0], x.dims)
	for _, c := range s.sel {
		if len(top) == k && c.sim < top[0].sim {
			break // no candidate left can reach the k-th best
		}
		it := &found[c.id]
		it.sim = vek32.Dot(q, x.vecs.get(it.id, buf))
		top.offer(*it, k)
	}
	s.f32, s.top = buf, top
}

// quantError returns ea and eb such that a quantised similarity of q to a
// stored vector w of record scale s_w, q's quantised form being q8 at
// scale qs, is within ea·s_w + eb of the exact one.
//
// With q̂ = qs·q8 and ŵ = s_w·w8 the quantised vectors (each component
// within its scale's half of the true one), q·w − q̂·ŵ = q·(w−ŵ) +
// (q−q̂)·ŵ. The first term is at most ‖q‖₁·s_w/2 in size. The second is
// at most ‖q−q̂‖₂·‖ŵ‖₂ (Cauchy–Schwarz), with ‖ŵ‖₂ ≤ ‖w‖₂ + ‖w−ŵ‖₂ ≤ 1 +
// √d·s_w/2 for a unit w (every stored vector; a removed one is zero); and
// q's own rounding, ‖q−q̂‖₂, is known here: about √(d/12)·qs, where the
// worst case that bounded it before (each component off by qs/2, and
// ‖ŵ‖₁ ≤ √d + d·s_w/2 in its place) is √d·qs/2 — the bound's larger part
// for unit vectors, now 40% smaller, so that fewer candidates are scored
// again on their float32 vectors (exactAmong, rescore). Plus a margin for
// float32 rounding.
func quantError(q []float32, q8 []int8, qs float32) (ea, eb float32) {
	var q1, r2 float64
	for i, f := range q {
		q1 += math.Abs(float64(f))
		r := float64(f) - float64(qs)*float64(q8[i])
		r2 += r * r
	}
	r := math.Sqrt(r2)
	return float32(q1/2 + r*math.Sqrt(float64(len(q)))/2), float32(r + 1e-4)
}

// exact returns the k best of ids by exact similarity to q, in no order.
func (x *Index) exact(q []float32, in []Run, k int) []item {
	top := make(minHeap, 0, min(k, RunsLen(in)))
	s := x.scratch.Get().(*scratch)
	defer x.scratch.Put(s)
	buf := slices.Grow(s.f32[:0], x.dims)
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	for _, r := range in {
		ids := r.IDs
		for i, id := range ids {
			if i+prefetchAhead < len(ids) && x.vecs.inHeap(uint32(ids[i+prefetchAhead])) {
				prefetchFloats(x.vecs.at(uint32(ids[i+prefetchAhead])))
			}
			top.offer(item{vek32.Dot(q, x.vecs.get(uint32(id), buf)), uint32(id)}, k)
		}
	}
	s.f32 = buf
	return top
}

// prefetchAhead is how many vectors ahead of the one it scores an exact
// scan asks memory for.
const prefetchAhead = 4

// hits sorts items best first (ties by insertion order) and keeps the
// k best that were not removed.
func (x *Index) hits(found []item, k int) []Hit {
	slices.SortFunc(found, byBest)
	hits := make([]Hit, 0, min(k, len(found)))
	x.kmu.RLock()
	for _, it := range found {
		if len(hits) == k {
			break
		}
		if !x.removed[uint64(it.id)] {
			hits = append(hits, Hit{Key: x.keys.At(it.id), Similarity: it.sim})
		}
	}
	x.kmu.RUnlock()
	return hits
}

// SearchAmong returns up to k of the runs' ids (from Add or ID) nearest
// to q by exact search: for a small subset (one sona's memories), exact
// and cheaper than filtering a graph search.
func (x *Index) SearchAmong(q []float32, in []Run, k int) []Hit {
	if k <= 0 || len(q) != x.dims {
		return nil
	}
	return x.hits(x.exactAmong(q, in, k), k)
}

// SearchIn returns up to k of the runs' ids (a sona's memories, and its
// backbone's) nearest to q. A set of up to exactMax ids is scanned exactly
// (SearchAmong). A larger one goes through the graph when it is a large
// enough share of the index for the graph's nearest to hold k of it: the
// graph's nearest, twice k over the set's share of the index (up to
// searchInMost·k), are scored exactly and the set's among them kept. When
// fewer than k of them are the set's (other sets' vectors are nearer), or
// the set is too small a share for that many to hold k of it, it is
// scanned exactly after all: a large sona in a store of many others gets
// its own nearest, as a small one does, never another sona's in their
// place.
func (x *Index) SearchIn(q []float32, in []Run, k, exactMax int) []Hit {
	if k <= 0 || len(q) != x.dims {
		return nil
	}
	n := RunsLen(in)
	if n <= exactMax {
		return x.SearchAmong(q, in, k)
	}
	total := x.total()
	fetch := k * ((2*total + n - 1) / n)
	if fetch > searchInMost*k {
		return x.SearchAmong(q, in, k)
	}
	found := x.nearest(q, fetch, fetch)
	if n < total { // else the set is the whole index (one sona's store)
		found = inSet(found, in)
	}
	if hits := x.hits(found, k); len(hits) == k {
		return hits
	}
	return x.SearchAmong(q, in, k)
}

// searchInMost bounds how many times k SearchIn asks of the graph: a set
// under an eighth of the index is scanned exactly.
const searchInMost = 16

// inSet returns the items of found whose ids are in the runs, in one pass
// over their ids: a bit per id of found (hashed into 65,536 bits) screens
// out nearly every id that is not one of them before a binary search.
func inSet(found []item, in []Run) []item {
	const maskBits = 1 << 16
	var mask [maskBits / 64]uint64
	slices.SortFunc(found, func(a, b item) int { return cmp.Compare(a.id, b.id) })
	for _, it := range found {
		mask[it.id%maskBits/64] |= 1 << (it.id % 64)
	}
	keep := make([]bool, len(found))
	for _, r := range in {
		for _, id := range r.IDs {
			if id > math.MaxUint32 || mask[id%maskBits/64]&(1<<(id%64)) == 0 {
				continue
			}
			if i, ok := slices.BinarySearchFunc(found, uint32(id), func(it item, id uint32) int { return cmp.Compare(it.id, id) }); ok {
				keep[i] = true
			}
		}
	}
	kept := found[:0]
	for i, it := range found {
		if keep[i] {
			kept = append(kept, it)
		}
	}
	return kept
}

// quantPrefetch is how many records ahead of the one it scores
// exactAmong's screen asks memory for (a record is a quarter of a float32
// vector: more of them in flight), where they lie or in a pack (where 4
// to 8 ahead took a sixth off BenchmarkScreen/packed).
const quantPrefetch = 8

// quantScanMin is the number of ids from which exactAmong screens them on
// their quantised records first — whatever their number when some of
// their vectors are out of the heap, each a read of a file. From it, a
// named run is packed (packMin): screened where they lie, sets of a few
// hundred ids cost about what their float32 scan does (stops 70, 71);
// screened from their packs, in sequence, an insert into 64 sonas of a
// few hundred memories takes 7% less CPU (stop 73).
const quantScanMin = 128

// exactAmong is exact(q, in, k), the same items with the same
// similarities, for less: an exact scan of a large sona (up to
// recall.exact_scan_max, 20,000, members: at 1M memories in 100 sonas,
// 10,000 float32 vectors, 15 MB, read by every insert's neighbour search)
// is bound by memory. So every id is first scored on its int8 record (a
// quarter of the bytes; a named run's from its pack, in sequence, those
// its pack lacks where they lie) with a bound on that score's error
// (quantError); then, best upper bound first, ids are scored exactly until
// the next one's upper bound is below the k-th best exact similarity: an
// id never scored is less similar than k others, so the result is
// exact's.
func (x *Index) exactAmong(q []float32, in []Run, k int) []item {
	n := RunsLen(in)
	if (n < quantScanMin && x.allInHeap(in)) || k >= n/4 {
		return x.exact(q, in, k)
	}
	s := x.scratch.Get().(*scratch)
	defer x.scratch.Put(s)
	s.q = slices.Grow(s.q[:0], x.dims)[:x.dims]
	qs := quantize(q, s.q)
	ea, eb := quantError(q, s.q, qs)
	sc := screen{q: s.q, qs: qs, ea: ea, eb: eb, k: k, hi: slices.Grow(s.hi[:0], n), floor: make(minHeap, 0, k)}
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	if len(x.removed) > 0 {
		sc.removed = x.removed
	}
	for _, r := range in {
		e, p, packed := x.packOf(r)
		if p != nil {
			p.screen(&sc, packed, x.dims)
		}
		rest := r.IDs[packed:]
		for i, id := range rest {
			if i+quantPrefetch < len(rest) {
				prefetch(x.qv.at(uint32(rest[i+quantPrefetch])))
			}
			rec := x.qv.at(uint32(id))
			sc.add(id, rec, recordScale(rec[x.dims:]))
		}
		if e != nil && (p == nil || len(rest) >= packGrow) {
			x.extend(e, r)
		}
	}
	s.hi = sc.hi
	cut := sc.floor[0].sim // k ids are at least this similar
	s.sel = s.sel[:0]
	i := 0
	for _, r := range in {
		for _, id := range r.IDs {
			if hi := sc.hi[i]; hi >= cut {
				s.sel = append(s.sel, item{hi, uint32(id)})
			}
			i++
		}
	}
	slices.SortFunc(s.sel, func(a, b item) int { return cmp.Compare(b.sim, a.sim) })
	top := make(minHeap, 0, k)
	buf := slices.Grow(s.f32[:0], x.dims)
	for _, c := range s.sel {
		if len(top) == k && c.sim < top[0].sim {
			break // no id left can reach the k-th best
		}
		top.offer(item{vek32.Dot(q, x.vecs.get(c.id, buf)), c.id}, k)
	}
	s.f32 = buf
	return top
}

// screen is exactAmong's first pass: each id's bounds from its record.
type screen struct {
	q          []int8 // the query's int8 form, at scale qs
	qs, ea, eb float32
	k          int
	removed    map[uint64]bool // nil when none is
	hi         []float32       // each id's upper bound, in order
	floor      minHeap         // the k best lower bounds
}

// add bounds id's similarity from its record's components rec (at least
// dims of them) and scale ws.
func (sc *screen) add(id uint64, rec []int8, ws float32) {
	a := float32(dotInt8(sc.q, rec)) * sc.qs * ws
	e := sc.ea*ws + sc.eb
	lo, hi := a-e, a+e
	if sc.removed != nil && sc.removed[id] {
		lo, hi = 0, 0 // its vector is zero (its record may stay, for its aliases)
	}
	i := uint32(len(sc.hi))
	sc.hi = append(sc.hi, hi)
	if len(sc.floor) < sc.k {
		sc.floor.push(item{lo, i})
	} else if sc.floor[0].sim < lo {
		sc.floor.replaceTop(item{lo, i})
	}
}

// allInHeap reports whether the float32 vectors of ids are all in the
// heap, where an exact scan reads them for less than their screen would
// cost; one out of the heap is a read of a file.
func (x *Index) allInHeap(in []Run) bool {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	for _, r := range in {
		for _, id := range r.IDs {
			if !x.vecs.inHeap(uint32(id)) {
				return false
			}
		}
	}
	return true
}

// restFactor is how much longer than it worked the builder rests below its
// backlog bound: it then takes at most 1/(1+restFactor) of a core.
const restFactor = 4
