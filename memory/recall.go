package memory

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/messages"
)

// How a recalled memory entered the result.
const (
	ViaHit       = "hit"       // one of the top-k scored candidates
	ViaExpansion = "expansion" // reached along an edge from a hit
)

// Query asks for the memories that matter for a prompt in a sona.
type Query struct {
	Sona   string    // uuid of the recalling sona
	Text   string    // the prompt
	Vector []float32 // its embedding; computed from Text when nil
	K      int       // memories before expansion; 0 = config
	Budget int       // characters of the result; 0 = config
	// Exclude keeps memories out (e.g. the input being answered).
	Exclude []cid.Cid
	// Peek leaves no trace: the access of the returned memories is not
	// recorded (for inspection, which should not change what it inspects).
	Peek bool
}

// ScoreParts are the components of a memory's recall score (DESIGN.md §5).
type ScoreParts struct {
	Relevance      float64 // cosine similarity to the query, at least 0
	KindWeight     float64 // XmetaV kind weight
	Decay          float64 // activity-relative Ebbinghaus factor, 1 for backbone
	Importance     float64 // EWMA of past use
	SonaSimilarity float64 // closeness of the memory's sonas to the recalling sona
}

// Score combines the parts: relevance × kind × decay, plus weighted
// importance and sona similarity.
func Score(p ScoreParts, w config.Weights) float64 {
	return w.Relevance*p.Relevance*p.KindWeight*p.Decay + w.Importance*p.Importance + w.Sona*p.SonaSimilarity
}

// Decay is Living Memory's activity-relative forgetting:
// e^(−λ'·inactivity) where inactivity is the share of its home sona's
// activity (chain length) since the memory was last stored or recalled,
// and λ' = λ/(1+importance) so important memories decay slower. Backbone
// memories never decay.
func Decay(lambda, importance float64, backbone bool, activity, lastTick int64) float64 {
	if backbone || activity <= 0 {
		return 1
	}
	ratio := float64(activity-lastTick) / float64(activity)
	ratio = math.Max(0, math.Min(1, ratio))
	return math.Exp(-lambda / (1 + importance) * ratio)
}

// Recalled is one memory of a recall result.
type Recalled struct {
	CID    cid.Cid
	Memory *Memory
	Meta   *messages.MemoryMeta
	Score  float64
	Parts  ScoreParts
	Via    string
	Depth  int // edge hops from a hit
}

// Chars is the memory's size against the budget: its text in characters.
func (r *Recalled) Chars() int { return utf8.RuneCountInString(r.Memory.Text()) }

// Time orders memories: the memory's timestamp, else when it was stored.
func (r *Recalled) Time() int64 {
	if r.Memory.Timestamp != nil {
		return *r.Memory.Timestamp
	}
	return r.Meta.CreatedAt
}

// Recall returns the memories that matter for q: the top-k scored dense
// candidates that fit the budget, expanded along weighted edges until the
// budget is spent, in topological order (supports before what they
// support, timestamp as tie-breaker). It also records the access.
func (s *Self) Recall(ctx context.Context, q Query) ([]*Recalled, error) {
	rc := s.cfg.Recall
	if q.K <= 0 {
		q.K = rc.TopK
	}
	if q.Budget <= 0 {
		q.Budget = rc.BudgetChars
	}
	if q.Vector == nil {
		vecs, err := s.Embed(ctx, q.Text)
		if err != nil {
			return nil, err
		}
		q.Vector = vecs[0]
	}
	if len(q.Vector) != s.index.Dims() {
		return nil, fmt.Errorf("%w: query vector has %d dims, want %d", ErrInvalid, len(q.Vector), s.index.Dims())
	}
	centroid, _, ok := s.sonaSnapshot(q.Sona)
	if !ok {
		return nil, fmt.Errorf("%w: sona %q", ErrNotFound, q.Sona)
	}
	sc := &scorer{self: s, query: q.Vector, sona: q.Sona, centroid: centroid, now: s.clock.Now().Unix(), sims: map[string]float64{}}

	excluded := map[cid.Cid]bool{}
	for _, c := range q.Exclude {
		excluded[c] = true
	}
	hits := s.index.Search(q.Vector, max(rc.Candidates, q.K)+len(q.Exclude))

	var out []*Recalled
	err := s.store.View(func(txn *badger.Txn) error {
		// Score every candidate from its metadata; read bodies only for
		// the ones that may be chosen.
		var cands []*Recalled
		for _, h := range hits {
			c, err := cid.Cast([]byte(h.Key))
			if err != nil {
				return fmt.Errorf("%w: index key: %v", ErrCorrupt, err)
			}
			if excluded[c] {
				continue
			}
			r, err := sc.score(txn, c)
			if errors.Is(err, errHidden) {
				continue
			}
			if err != nil {
				return err
			}
			r.Parts.Relevance = math.Max(0, float64(h.Similarity))
			r.Score = Score(r.Parts, rc.Weights)
			r.Via = ViaHit
			cands = append(cands, r)
		}
		slices.SortFunc(cands, byScore)

		budget := q.Budget
		chosen := map[cid.Cid]bool{}
		for _, r := range cands {
			if len(out) == q.K {
				break
			}
			m, err := s.loadMemory(txn, r.CID)
			if err != nil {
				return err
			}
			r.Memory = m
			if n := r.Chars(); n <= budget {
				budget -= n
				out = append(out, r)
				chosen[r.CID] = true
			}
		}
		for c := range excluded {
			chosen[c] = true
		}
		more, err := sc.expand(txn, out, chosen, budget, rc)
		out = append(out, more...)
		return err
	})
	if err != nil {
		return nil, err
	}
	out = TopoSort(out)
	if !q.Peek {
		s.store.Submit(s.touchOp(out))
	}
	return out, nil
}

func byScore(a, b *Recalled) int {
	if c := cmp.Compare(b.Score, a.Score); c != 0 {
		return c
	}
	return bytes.Compare(a.CID.Bytes(), b.CID.Bytes())
}

// errHidden marks a memory recall must not return (archived or expired).
var errHidden = errors.New("hidden")

type scorer struct {
	self     *Self
	query    []float32
	sona     string
	centroid []float32
	now      int64
	sims     map[string]float64 // sona similarity by sona uuid
}

// score reads a memory's metadata and computes its parts other than
// relevance. The memory body is not read.
func (sc *scorer) score(txn *badger.Txn, c cid.Cid) (*Recalled, error) {
	meta, err := getMeta(txn, c)
	if err != nil {
		return nil, err
	}
	if meta.Archived || (meta.ExpiresAt > 0 && sc.now >= meta.ExpiresAt) {
		return nil, errHidden
	}
	s := sc.self
	var activity int64
	if len(meta.Sonas) > 0 {
		_, activity, _ = s.sonaSnapshot(meta.Sonas[0])
	}
	return &Recalled{
		CID:  c,
		Meta: meta,
		Parts: ScoreParts{
			KindWeight:     s.cfg.KindWeight(meta.Kind),
			Decay:          Decay(s.cfg.Recall.Lambda, meta.Importance, meta.Backbone, activity, meta.LastAccessTick),
			Importance:     meta.Importance,
			SonaSimilarity: sc.sonaSimilarity(meta.Sonas),
		},
	}, nil
}

// sonaSimilarity is the best cosine between the recalling sona's centroid
// and the centroids of the sonas a memory belongs to (1 for its own).
func (sc *scorer) sonaSimilarity(sonas []string) float64 {
	best := 0.0
	for _, id := range sonas {
		if id == sc.sona {
			return 1
		}
		sim, ok := sc.sims[id]
		if !ok {
			if c, _, ok := sc.self.sonaSnapshot(id); ok && len(c) == len(sc.centroid) {
				sim = cosine(sc.centroid, c)
			}
			sc.sims[id] = sim
		}
		best = math.Max(best, sim)
	}
	return best
}

func cosine(a, b []float32) float64 {
	na, nb := dot(a, a), dot(b, b)
	if na == 0 || nb == 0 {
		return 0
	}
	return dot(a, b) / math.Sqrt(na*nb)
}

// expand follows edges from the chosen memories, best first, adding each
// reachable memory that fits the remaining budget with the score of the
// path that reached it: parent score × edge weight (capped at 1) × decay
// per hop, up to the configured depth.
func (sc *scorer) expand(txn *badger.Txn, from []*Recalled, chosen map[cid.Cid]bool, budget int, rc config.Recall) ([]*Recalled, error) {
	if rc.ExpandDepth == 0 {
		return nil, nil
	}
	frontier := &edgeHeap{}
	push := func(r *Recalled) {
		for _, e := range r.Memory.Edges {
			if chosen[e.Target] {
				continue
			}
			w := math.Max(0, math.Min(1, e.Weight))
			heap.Push(frontier, edgeCand{target: e.Target, score: r.Score * w * rc.ExpandDecay, depth: r.Depth + 1})
		}
	}
	for _, r := range from {
		push(r)
	}
	var out []*Recalled
	for frontier.Len() > 0 && budget > 0 {
		e := heap.Pop(frontier).(edgeCand)
		if chosen[e.target] {
			continue
		}
		chosen[e.target] = true
		r, err := sc.score(txn, e.target)
		if errors.Is(err, errHidden) || errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if r.Memory, err = sc.self.loadMemory(txn, e.target); err != nil {
			return nil, err
		}
		n := r.Chars()
		if n > budget {
			continue
		}
		budget -= n
		if vec, err := readVector(txn, e.target); err == nil {
			r.Parts.Relevance = math.Max(0, dot(sc.query, vec))
		}
		r.Score, r.Via, r.Depth = e.score, ViaExpansion, e.depth
		out = append(out, r)
		if e.depth < rc.ExpandDepth {
			push(r)
		}
	}
	return out, nil
}

func readVector(txn *badger.Txn, c cid.Cid) ([]float32, error) {
	item, err := txn.Get(vectorKey(c))
	if err != nil {
		return nil, err
	}
	var vec []float32
	err = item.Value(func(v []byte) error {
		vec, err = decodeVector(v)
		return err
	})
	return vec, err
}

type edgeCand struct {
	target cid.Cid
	score  float64
	depth  int
}

// edgeHeap pops the best-scored edge first; ties by target bytes.
type edgeHeap []edgeCand

func (h edgeHeap) Len() int { return len(h) }
func (h edgeHeap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score > h[j].score
	}
	return bytes.Compare(h[i].target.Bytes(), h[j].target.Bytes()) < 0
}
func (h edgeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *edgeHeap) Push(v any)   { *h = append(*h, v.(edgeCand)) }
func (h *edgeHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// TopoSort orders memories so that every memory comes after the memories
// its edges point to (its supports), breaking ties by time, then CID.
func TopoSort(rs []*Recalled) []*Recalled {
	index := make(map[cid.Cid]int, len(rs))
	for i, r := range rs {
		index[r.CID] = i
	}
	pending := make([]int, len(rs))      // unresolved supports within the set
	dependents := make([][]int, len(rs)) // who waits on whom
	for i, r := range rs {
		for _, e := range r.Memory.Edges {
			if j, ok := index[e.Target]; ok && j != i {
				pending[i]++
				dependents[j] = append(dependents[j], i)
			}
		}
	}
	ready := &readyHeap{rs: rs}
	for i := range rs {
		if pending[i] == 0 {
			heap.Push(ready, i)
		}
	}
	out := make([]*Recalled, 0, len(rs))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		out = append(out, rs[i])
		for _, d := range dependents[i] {
			if pending[d]--; pending[d] == 0 {
				heap.Push(ready, d)
			}
		}
	}
	return out
}

type readyHeap struct {
	rs  []*Recalled
	idx []int
}

func (h *readyHeap) Len() int { return len(h.idx) }
func (h *readyHeap) Less(i, j int) bool {
	a, b := h.rs[h.idx[i]], h.rs[h.idx[j]]
	if ta, tb := a.Time(), b.Time(); ta != tb {
		return ta < tb
	}
	return bytes.Compare(a.CID.Bytes(), b.CID.Bytes()) < 0
}
func (h *readyHeap) Swap(i, j int) { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *readyHeap) Push(v any)    { h.idx = append(h.idx, v.(int)) }
func (h *readyHeap) Pop() any {
	v := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return v
}

// touchOp records that memories were recalled: access count, and the
// activity tick from which their decay counts.
func (s *Self) touchOp(rs []*Recalled) Op {
	cids := make([]cid.Cid, len(rs))
	for i, r := range rs {
		cids[i] = r.CID
	}
	return s.metaOp(cids, func(meta *messages.MemoryMeta, _ cid.Cid) {
		meta.AccessCount++
		if len(meta.Sonas) > 0 {
			if _, activity, ok := s.sonaSnapshot(meta.Sonas[0]); ok {
				meta.LastAccessTick = max(meta.LastAccessTick, activity)
			}
		}
	})
}

// metaOp applies fn to the metadata of each memory that still exists.
func (s *Self) metaOp(cids []cid.Cid, fn func(*messages.MemoryMeta, cid.Cid)) Op {
	return func(tx *Tx) error {
		for _, c := range cids {
			raw, err := tx.Get(metaKey(c))
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			meta := &messages.MemoryMeta{}
			if err := proto.Unmarshal(raw, meta); err != nil {
				return fmt.Errorf("%w: metadata of %s: %v", ErrCorrupt, c, err)
			}
			fn(meta, c)
			out, err := proto.Marshal(meta)
			if err != nil {
				return err
			}
			tx.Set(metaKey(c), out)
		}
		return nil
	}
}

// Reinforce raises the importance of the memories a response used: each
// takes an EWMA step toward its signal, its score relative to the best
// score of the recall (so the strongest support moves most), and the rise
// propagates along its edges with the configured per-hop decay and depth.
// Importance only rises here: a signal below a memory's importance leaves
// it as it is.
func (s *Self) Reinforce(used []*Recalled) *Pending {
	rc := s.cfg.Recall
	best := 0.0
	for _, r := range used {
		best = math.Max(best, r.Score)
	}
	seeds := map[cid.Cid]float64{}
	if best > 0 {
		for _, r := range used {
			seeds[r.CID] = math.Max(seeds[r.CID], r.Score/best)
		}
	}
	return s.store.Submit(func(tx *Tx) error {
		signal := map[cid.Cid]float64{}
		type visit struct {
			c        cid.Cid
			strength float64
			depth    int
		}
		var queue []visit
		for c, v := range seeds {
			queue = append(queue, visit{c, v, 0})
		}
		slices.SortFunc(queue, func(a, b visit) int { return bytes.Compare(a.c.Bytes(), b.c.Bytes()) })
		for len(queue) > 0 {
			v := queue[0]
			queue = queue[1:]
			if v.strength < rc.ImportanceFloor || signal[v.c] >= v.strength {
				continue
			}
			signal[v.c] = v.strength
			if v.depth == rc.ImportanceDepth {
				continue
			}
			m, err := s.memoryIn(tx, v.c)
			if err != nil {
				continue // not a memory (or gone): nothing to propagate
			}
			for _, e := range m.Edges {
				queue = append(queue, visit{e.Target, v.strength * rc.ImportanceHopDecay, v.depth + 1})
			}
		}
		cids := make([]cid.Cid, 0, len(signal))
		for c := range signal {
			cids = append(cids, c)
		}
		slices.SortFunc(cids, func(a, b cid.Cid) int { return bytes.Compare(a.Bytes(), b.Bytes()) })
		return s.metaOp(cids, func(meta *messages.MemoryMeta, c cid.Cid) {
			if target := signal[c]; target > meta.Importance {
				meta.Importance += rc.ImportanceAlpha * (target - meta.Importance)
			}
		})(tx)
	})
}

// memoryIn returns a decoded memory as seen by a store operation.
func (s *Self) memoryIn(tx *Tx, c cid.Cid) (*Memory, error) {
	if m, ok := s.cache.get(c); ok {
		return m, nil
	}
	b, err := tx.Get(blockKey(c))
	if err != nil {
		return nil, err
	}
	if err := verifyBlock(c, b); err != nil {
		return nil, err
	}
	m, err := DecodeMemory(b)
	if err != nil {
		return nil, err
	}
	s.cache.put(c, m)
	return m, nil
}
