package vector

import (
	"cmp"
	"math"
	"math/rand"
	"slices"
)

// graph is a hierarchical navigable small world graph (Malkov & Yashunin,
// "Efficient and robust approximate nearest neighbor search using
// Hierarchical Navigable Small World graphs", 2016) over unit vectors,
// similarity being their dot product. It is not safe for concurrent use:
// Index runs searches under a read lock and insertions under the write
// lock. Searches only read it, so any number may run at once.
//
// Nodes are the Index's dense uint32 ids; a graph may have holes (ids not
// inserted yet, with no links, which no search reaches). Every node has a
// level drawn from the seeded source; it is linked to at most 2m nodes on
// layer 0 and at most m on each layer from 1 to its level.
//
// A node whose vector is exactly an earlier node's (the same text
// embedded twice: "Noted.", "ok", a repeated tool output) is an alias of
// it: it has no links of its own, and a search that finds the earlier
// node (its representative) finds its aliases with it. Linked as nodes,
// thousands of equal vectors would tie with each other in every
// neighbour selection — each kept, none pruning another — so that every
// insertion near them re-ranked full neighbour lists of them (five times
// the insertion's cost, measured with half the vectors equal) and every
// search near them walked all of them.
type graph struct {
	m    int     // links per node on upper layers; 2m on layer 0
	efc  int     // candidate list size when inserting
	ml   float64 // level multiplier, 1/ln(m)
	rng  *rand.Rand
	seed int64

	dims   int
	qv     chunked[int8]   // by id: the Index's quantised records (quant.go), shared
	vecs   floats          // by id: the Index's vectors, shared (an alias's equals its representative's)
	links0 chunked[uint32] // by id: count, then up to 2m links on layer 0; an alias: aliasFlag, its representative
	upper  [][]uint32      // by id: per layer 1..level, count then up to m links; nil on level 0
	indeg  []uint32        // by id: how many nodes link to it on layer 0
	in     []uint64        // bit set by id: the node was inserted
	n      int             // ids 0..n-1 have a slot (inserted or a hole)
	entry  uint32          // the node of the top layer searches start from
	top    int             // the level of entry; -1 while the graph is empty
	// aliases are each representative's live aliases, in id order.
	aliases map[uint32][]uint32

	ins scratch // the insertions' working space
}

// maxLevel bounds node levels (a level above 16 has probability m^-16).
const maxLevel = 16

// aliasFlag, as the count of a node's layer-0 record, marks an alias; the
// record's first link is its representative.
const aliasFlag = 1 << 31

func newGraph(dims, m, efc int, seed int64) *graph {
	return &graph{
		m:       m,
		efc:     efc,
		ml:      1 / math.Log(float64(m)),
		rng:     rand.New(rand.NewSource(seed)),
		seed:    seed,
		dims:    dims,
		qv:      chunked[int8]{stride: dims + scaleBytes},
		links0:  chunked[uint32]{stride: 1 + 2*m},
		top:     -1,
		aliases: map[uint32][]uint32{},
	}
}

// aliasOf returns the representative of id when id is an alias.
func (g *graph) aliasOf(id uint32) (uint32, bool) {
	rec := g.links0.at(id)
	return rec[1], rec[0] == aliasFlag
}

// twin returns the node of best, the insertion's candidates for id (best
// first), whose vector is exactly id's, if the nearest is one.
func (g *graph) twin(id uint32, best []item) (uint32, bool) {
	if len(best) == 0 {
		return 0, false
	}
	rep := best[0].id
	if recordScale(g.qv.at(rep)[g.dims:]) == 0 || !slices.Equal(g.qv.at(rep), g.qv.at(id)) || !g.equal(rep, id) {
		return 0, false
	}
	return rep, true
}

// equal reports whether the float32 vectors of a and b are equal.
func (g *graph) equal(a, b uint32) bool {
	s := &g.ins
	s.f32 = slices.Grow(s.f32[:0], g.dims)
	s.f32b = slices.Grow(s.f32b[:0], g.dims)
	return slices.Equal(g.vecs.get(a, s.f32), g.vecs.get(b, s.f32b))
}

// alias makes id an alias of rep.
func (g *graph) alias(id, rep uint32) {
	rec := g.links0.at(id)
	rec[0], rec[1] = aliasFlag, rep
	g.aliases[rep] = append(g.aliases[rep], id)
}

// unalias takes the alias id out of its representative's aliases and
// leaves it a node without links (removed, it is found no more).
func (g *graph) unalias(id uint32) {
	rep, ok := g.aliasOf(id)
	if !ok {
		return
	}
	g.links0.at(id)[0] = 0
	rest := slices.DeleteFunc(g.aliases[rep], func(a uint32) bool { return a == id })
	if len(rest) == 0 {
		delete(g.aliases, rep)
	} else {
		g.aliases[rep] = rest
	}
}

// withAliases appends to found, for each of its nodes that has aliases,
// up to most of them (the earliest) at the node's similarity.
func (g *graph) withAliases(found []item, most int) []item {
	if len(g.aliases) == 0 {
		return found
	}
	for _, it := range found {
		for _, a := range g.aliases[it.id][:min(most, len(g.aliases[it.id]))] {
			found = append(found, item{it.sim, a})
		}
	}
	return found
}

// inserted reports whether id is a node of the graph (not a hole).
func (g *graph) inserted(id uint32) bool {
	return int(id) < g.n && g.in[id/64]&(1<<(id%64)) != 0
}

// links returns the links of id on layer.
func (g *graph) links(id uint32, layer int) []uint32 {
	if layer == 0 {
		l := g.links0.at(id)
		return l[1 : 1+l[0]]
	}
	stride := 1 + g.m
	l := g.upper[id][(layer-1)*stride : layer*stride]
	return l[1 : 1+l[0]]
}

// setLinks replaces the links of id on layer (at most the layer's cap).
func (g *graph) setLinks(id uint32, layer int, to []item) {
	var l []uint32
	if layer == 0 {
		l = g.links0.at(id)
	} else {
		stride := 1 + g.m
		l = g.upper[id][(layer-1)*stride : layer*stride]
	}
	l[0] = uint32(len(to))
	for i, t := range to {
		l[1+i] = t.id
	}
}

// linkUpper makes room for id's links on layers 1 to l.
func (g *graph) linkUpper(id uint32, l int) {
	if l > 0 {
		g.upper[id] = make([]uint32, l*(1+g.m))
	}
}

// capacity is the most links a node has on layer.
func (g *graph) capacity(layer int) int {
	if layer == 0 {
		return 2 * g.m
	}
	return g.m
}

// qvec is a quantised vector and its scale (quant.go).
type qvec struct {
	v []int8
	s float32
}

// node is id's quantised vector.
func (g *graph) node(id uint32) qvec {
	rec := g.qv.at(id)
	return qvec{rec[:g.dims], recordScale(rec[g.dims:])}
}

// sim is the similarity of q and id by their quantised vectors.
func (g *graph) sim(q qvec, id uint32) float32 {
	rec := g.qv.at(id)
	return float32(dotInt8(q.v, rec)) * q.s * recordScale(rec[g.dims:])
}

// level draws a node's level: floor(-ln(U)·ml), U uniform in (0, 1].
func (g *graph) level() int {
	return min(maxLevel, int(-math.Log(1-g.rng.Float64())*g.ml))
}

// insert links id, whose vector g.qv already holds, into the graph
// (Algorithm 1 of the paper, with the heuristic of Algorithm 4).
func (g *graph) insert(id uint32) {
	if int(id) >= g.n {
		g.n = int(id) + 1
		g.links0.grow(g.n)
		g.upper = append(g.upper, make([][]uint32, g.n-len(g.upper))...)
		g.indeg = append(g.indeg, make([]uint32, g.n-len(g.indeg))...)
		g.in = append(g.in, make([]uint64, (g.n+63)/64-len(g.in))...)
	}
	g.in[id/64] |= 1 << (id % 64)
	l := g.level()
	if g.top < 0 {
		g.linkUpper(id, l)
		g.entry, g.top = id, l
		return
	}
	s := &g.ins
	q := g.node(id)
	ep := item{g.sim(q, g.entry), g.entry}
	for layer := g.top; layer > l; layer-- {
		ep = g.greedy(q, ep, layer)
	}
	s.eps = append(s.eps[:0], ep)
	if l > 0 {
		// Is it an alias? Its twin may be of layer 0 only: look there
		// first (a node of a higher level is one in 1/ln(m)·m).
		for layer := min(g.top, l); layer > 0; layer-- {
			ep = g.greedy(q, ep, layer)
		}
		g.searchLayer(s, q, []item{ep}, g.efc, 0)
		if rep, ok := g.twin(id, s.res.sorted(s.sel[:0])); ok {
			g.alias(id, rep)
			return
		}
		g.linkUpper(id, l)
	}
	for layer := min(g.top, l); layer >= 0; layer-- {
		g.searchLayer(s, q, s.eps, g.efc, layer)
		s.eps = s.res.sorted(s.eps[:0])
		if l == 0 {
			if rep, ok := g.twin(id, s.eps); ok {
				g.alias(id, rep)
				return
			}
		}
		s.sel = g.selectNeighbours(s.sel[:0], s.eps, g.m)
		g.setLinks(id, layer, s.sel)
		if layer == 0 {
			for _, nb := range s.sel {
				g.indeg[nb.id]++
			}
		}
		for _, nb := range s.sel {
			g.connect(s, nb.id, id, nb.sim, layer)
		}
	}
	if l > g.top {
		g.entry, g.top = id, l
	}
}

// connect links from to to on layer, to being at similarity sim. A full
// list is pruned back to its capacity with the heuristic; on layer 0 the
// pruning never drops a node's last incoming link while it can drop
// another (see keepLast).
func (g *graph) connect(s *scratch, from, to uint32, sim float32, layer int) {
	links := g.links(from, layer)
	if len(links) < g.capacity(layer) {
		full := links[:len(links)+1]
		full[len(links)] = to
		if layer == 0 {
			g.links0.at(from)[0]++
			g.indeg[to]++
		} else {
			g.upper[from][(layer-1)*(1+g.m)]++
		}
		return
	}
	v := g.node(from)
	s.prune = append(s.prune[:0], item{sim, to})
	for _, nb := range links {
		s.prune = append(s.prune, item{g.sim(v, nb), nb})
	}
	slices.SortFunc(s.prune, byBest)
	s.keep = g.selectNeighbours(s.keep[:0], s.prune, g.capacity(layer))
	if layer == 0 {
		s.keep = g.keepLast(s.keep, s.prune, to)
		for _, nb := range links {
			g.indeg[nb]--
		}
		for _, k := range s.keep {
			g.indeg[k.id]++
		}
	}
	g.setLinks(from, layer, s.keep)
}

// keepLast puts back into keep each of cands (the pruned list and its new
// link to to) that the heuristic left out and whose link is the last one
// into its node on layer 0: in the room left, or in place of the least
// similar kept link into a node that has others. The heuristic alone
// leaves nodes that no node links to (about 1 in 300 of 20,000 clustered
// 384-dim vectors with the defaults), which no search can ever find.
func (g *graph) keepLast(keep, cands []item, to uint32) []item {
	last := func(c item) bool {
		if c.id == to {
			return g.indeg[to] == 0
		}
		return g.indeg[c.id] == 1
	}
	for _, c := range cands {
		if !last(c) || slices.Contains(keep, c) {
			continue
		}
		if len(keep) < g.capacity(0) {
			keep = append(keep, c)
			continue
		}
		for i := len(keep) - 1; i >= 0; i-- {
			if !last(keep[i]) {
				keep[i] = c
				break
			}
		}
	}
	return keep
}

// selectNeighbours appends to out up to m of cands (sorted best first by
// similarity to some q) by the heuristic of Algorithm 4: a candidate is
// kept only if it is no more similar to any one kept before it than to q,
// which spreads the links over directions instead of spending them all on
// one tight cluster.
func (g *graph) selectNeighbours(out, cands []item, m int) []item {
	for _, c := range cands {
		if len(out) >= m {
			break
		}
		v := g.node(c.id)
		keep := true
		for _, r := range out {
			if g.sim(v, r.id) > c.sim {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, c)
		}
	}
	return out
}

// greedy walks from ep on layer to a node more similar to q than all of
// its neighbours: the search with ef = 1 of the upper layers.
func (g *graph) greedy(q qvec, ep item, layer int) item {
	for moved := true; moved; {
		moved = false
		for _, nb := range g.links(ep.id, layer) {
			if sim := g.sim(q, nb); sim > ep.sim {
				ep, moved = item{sim, nb}, true
			}
		}
	}
	return ep
}

// searchLayer leaves in s.res the ef nodes most similar to q that a best
// first search on layer from eps finds (Algorithm 2).
func (g *graph) searchLayer(s *scratch, q qvec, eps []item, ef, layer int) {
	s.reset(g.n)
	for _, e := range eps {
		s.visit(e.id)
		s.cand.push(item{-e.sim, e.id})
		s.res.push(e)
		if len(s.res) > ef {
			s.res.pop()
		}
	}
	for len(s.cand) > 0 {
		c := s.cand.pop()
		if len(s.res) >= ef && -c.sim < s.res[0].sim {
			break
		}
		// The neighbours not seen yet, their records asked of memory all
		// at once: the loads overlap instead of waiting one after another.
		s.next = s.next[:0]
		for _, nb := range g.links(c.id, layer) {
			if s.visit(nb) {
				s.next = append(s.next, nb)
				prefetch(g.qv.at(nb))
			}
		}
		for _, nb := range s.next {
			sim := g.sim(q, nb)
			if len(s.res) < ef || sim > s.res[0].sim {
				s.cand.push(item{-sim, nb})
				s.res.push(item{sim, nb})
				if len(s.res) > ef {
					s.res.pop()
				}
			}
		}
	}
}

// search appends to out the up to ef nodes most similar to q (by the
// quantised vectors) that a search with a candidate list of ef on layer 0
// finds, in no order.
func (g *graph) search(s *scratch, q qvec, ef int, out []item) []item {
	if g.top < 0 {
		return out
	}
	ep := item{g.sim(q, g.entry), g.entry}
	for layer := g.top; layer > 0; layer-- {
		ep = g.greedy(q, ep, layer)
	}
	s.eps = append(s.eps[:0], ep)
	g.searchLayer(s, q, s.eps, ef, 0)
	return append(out, s.res...)
}

// item is a node and its similarity to the query at hand.
type item struct {
	sim float32
	id  uint32
}

// byBest orders items most similar first, ties by id (insertion order).
func byBest(a, b item) int {
	if c := cmp.Compare(b.sim, a.sim); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// minHeap is a binary heap of items, the least similar on top; ties put
// the later id on top, so that a bounded heap keeps the earlier ones.
// Negated similarities turn it into a most-similar-first queue.
type minHeap []item

func (h minHeap) less(i, j int) bool { return worse(h[i], h[j]) }

// worse reports whether a ranks below b: less similar, or as similar and
// added later.
func worse(a, b item) bool { return a.sim < b.sim || a.sim == b.sim && a.id > b.id }

func (h *minHeap) push(it item) {
	*h = append(*h, it)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *minHeap) pop() item {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	*h = s
	s.down(0)
	return top
}

// offer keeps it among the k best the heap holds (the worst on top).
func (h *minHeap) offer(it item, k int) {
	switch {
	case len(*h) < k:
		h.push(it)
	case worse((*h)[0], it):
		h.replaceTop(it)
	}
}

// replaceTop puts it in place of the top and restores the heap.
func (h minHeap) replaceTop(it item) {
	h[0] = it
	h.down(0)
}

func (h minHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			c = r
		}
		if !h.less(c, i) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// sorted appends the heap's items to out best first; the heap is left
// unordered.
func (h minHeap) sorted(out []item) []item {
	n := len(out)
	out = append(out, h...)
	slices.SortFunc(out[n:], byBest)
	return out
}

// scratch is one search's working space: a visited set and two heaps,
// reused across searches (from a sync.Pool) so that a search allocates
// next to nothing.
type scratch struct {
	visited []uint64 // bit set by id
	cand    minHeap  // negated similarities: the most similar on top
	res     minHeap  // the best found, the worst on top
	eps     []item
	q       []int8    // a search's quantised query
	hi      []float32 // exactAmong: each id's upper bound
	next    []uint32  // a search's neighbours of a candidate not visited before
	sel     []item    // insertion: the new node's neighbours
	prune   []item    // insertion: a full neighbour list and the new link
	keep    []item
	top     minHeap   // rescore: the k best exact similarities
	f32     []float32 // room for a float32 vector read from a file (floats.go)
	f32b    []float32 // and a second one
}

// reset empties the heaps and the visited set, sized for ids below n.
func (s *scratch) reset(n int) {
	s.cand, s.res = s.cand[:0], s.res[:0]
	words := (n + 63) / 64
	if cap(s.visited) < words {
		s.visited = make([]uint64, words, words+words/4)
	} else {
		s.visited = s.visited[:words]
		clear(s.visited)
	}
}

// visit marks id as visited and reports whether it was not before.
func (s *scratch) visit(id uint32) bool {
	w, bit := id/64, uint64(1)<<(id%64)
	if s.visited[w]&bit != 0 {
		return false
	}
	s.visited[w] |= bit
	return true
}

// chunked is a growable array of fixed-length records by id, in chunks
// that never move once allocated: growing it leaves every record where
// it was, so a copy of a chunked made before a grow stays valid for the
// records it covered.
type chunked[T float32 | uint32 | int8] struct {
	stride int // elements per record
	chunks [][]T
}

// chunkBits: 256 records per chunk.
const chunkBits = 8

// at returns record id (its capacity is its length).
func (c *chunked[T]) at(id uint32) []T {
	o := int(id&(1<<chunkBits-1)) * c.stride
	return c.chunks[id>>chunkBits][o : o+c.stride : o+c.stride]
}

// grow makes room for records 0..n-1 (new records are zero).
func (c *chunked[T]) grow(n int) {
	for len(c.chunks)<<chunkBits < n {
		c.chunks = append(c.chunks, make([]T, c.stride<<chunkBits))
	}
}
