package recall

import (
	"cmp"
	"container/heap"
	"math"
	"unsafe"

	"github.com/memoria-ai/memoria/memory/assoc"
)

// reached is what the affinity walk reached: each memory's best score,
// hits in the order first reached. A long-lived sona's walk meets
// hundreds of links a recall, most of them causal links from the
// responses that drew on a memory (issue 15): a score is found with one
// lookup, and the keys of the memories reached are cut from a few shared
// blocks rather than made one string each. A key that outlives the
// recall must be taken out of its block (scorer.candidate does).
type reached struct {
	at    map[string]int32 // key → index in hits
	hits  []pathHit
	arena []byte // the keys' bytes; a full block is left to the keys in it
}

// newReached is an empty reached in at (the recall's scratch map, empty)
// and the room of hits, or in a map of its own when at is nil.
func newReached(at map[string]int32, hits []pathHit) *reached {
	if at == nil {
		at = make(map[string]int32, 256)
	}
	return &reached{at: at, hits: hits[:0]}
}

// score is key's best score so far, 0 when it was not reached.
func (r *reached) score(key []byte) float64 {
	if i, ok := r.at[string(key)]; ok {
		return r.hits[i].score
	}
	return 0
}

// set makes v key's score, and returns key as a string.
func (r *reached) set(key []byte, v float64) string {
	if i, ok := r.at[string(key)]; ok {
		r.hits[i].score = v
		return r.hits[i].key
	}
	if cap(r.arena)-len(r.arena) < len(key) {
		r.arena = make([]byte, 0, max(4096, len(key)))
	}
	r.arena = append(r.arena, key...)
	k := unsafe.String(&r.arena[len(r.arena)-len(key)], len(key)) // never written again
	r.at[k] = int32(len(r.hits))
	r.hits = append(r.hits, pathHit{key: k, score: v})
	return k
}

// of is key's score, 0 when it was not reached (tests).
func (r *reached) of(key string) float64 { return r.score([]byte(key)) }

// affinity scores what the seeds reach through associations (breadth
// first, up to the configured depth) and co-access partners (one hop).
func (sc *scorer) affinity(seeds []*Recalled) (*reached, error) {
	rc := sc.self.cfg.Recall
	top := seeds[0].Explain.Fused.Relevance
	var (
		at   map[string]int32
		hits []pathHit
	)
	if sc.scratch != nil {
		at, hits = sc.scratch.reached, sc.scratch.hits
	}
	affinity := newReached(at, hits)
	type step struct {
		target string // the CID's bytes
		score  float64
		depth  int
	}
	var (
		listKey []byte
		queue   []step // each seed's walk, breadth first, in the room of the one before
	)
	for _, seed := range seeds {
		start := 1.0
		if top > 0 {
			start = seed.Explain.Fused.Relevance / top
		}
		var partners []assoc.Link
		if rc.AffinityLinks.CoAccess > 0 {
			var err error
			if partners, err = sc.coAccess(seed.CID); err != nil {
				return nil, err
			}
		}
		for _, l := range partners {
			k := []byte(l.Target.KeyString())
			affinity.set(k, math.Max(affinity.score(k), start*l.Strength*rc.AffinityLinks.CoAccess))
		}
		// The lists are walked as stored, not decoded into links: a
		// target's bytes are its key here, and the few that join are
		// made CIDs then (add). What the last hop reaches is scored, not
		// walked from.
		from := seed.CID.KeyString()
		queue = append(queue[:0], step{from, start, 0})
		for i := 0; i < len(queue); i++ {
			cur := queue[i]
			listKey = append(append(listKey[:0], assoc.KeyAssoc...), cur.target...)
			err := sc.self.links.Walk(sc.txn, listKey, func(l assoc.Entry) bool {
				w := linkWeight(rc.AffinityLinks, l.Type)
				if w == 0 || string(l.Target) == from {
					return true
				}
				v := cur.score * l.Strength * w
				if cur.depth > 0 {
					v *= rc.ExpandDecay
				}
				if v <= affinity.score(l.Target) {
					return true
				}
				k := affinity.set(l.Target, v)
				if cur.depth+1 < rc.AffinityDepth {
					queue = append(queue, step{k, v, cur.depth + 1})
				}
				return true
			})
			if err != nil {
				return nil, err
			}
		}
	}
	return affinity, nil
}

// bestFirst orders hits best first — by score, then key — as they are
// taken (heap.Pop): a recall takes the best few of the hundreds its
// affinity walk reached (the first n that join), and sorting them all was
// a twelfth of a long-lived sona's recall (issue 15). It reorders hits.
func bestFirst(hits []pathHit) *hitHeap {
	h := hitHeap(hits)
	heap.Init(&h)
	return &h
}

// hitHeap is a heap of path hits, the best at the top.
type hitHeap []pathHit

func (h hitHeap) Len() int { return len(h) }

// Less orders the higher score first (cmp.Compare's order, NaN last),
// then the lower key.
func (h hitHeap) Less(i, j int) bool {
	if c := cmp.Compare(h[j].score, h[i].score); c != 0 {
		return c < 0
	}
	return h[i].key < h[j].key
}
func (h hitHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *hitHeap) Push(v any)   { *h = append(*h, v.(pathHit)) }
func (h *hitHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// pop takes the best hit; h must not be empty.
func (h *hitHeap) pop() pathHit { return heap.Pop(h).(pathHit) }
