package recall

import (
	"sync"

	"github.com/memoria-ai/memoria/messages"
)

// evidenceScratch is what a scorer fills for the context, time and
// speaker evidence — the candidates by key, the memories around them, the
// chains and bodies read — kept from one recall to the next: made anew,
// they were a tenth of the bytes a recall allocated at 100,000 memories
// (a recall places some 350 neighbours), and so of the collector's work.
// Nothing a recall returns points into it: the neighbours are the
// scorer's own, and the candidates, made in its chunks too, are copied out
// of it (detach) before it is released.
type evidenceScratch struct {
	cands      map[string]*Recalled
	byID       map[uint64]*Recalled
	neighbours map[uint64]*neighbour
	chains     map[string]chainView
	bodies     map[string]body
	reached    map[string]int32 // the affinity walk's (reached.at)
	// The affinity walk's hits (reached.hits), cleared: a long-lived sona's
	// walk reaches a couple of thousand memories, and growing their slice
	// anew was a fourteenth of the bytes its advance allocated (issue 15,
	// stop 105).
	hits   []pathHit
	places chunks[neighbour] // the neighbours'
	// The candidates': made one by one, they were an eighth of the bytes a
	// recall allocated at 100,000 memories (README, stop 56).
	recalled chunks[Recalled]
	// The metadata of the candidates scored from what was known of them
	// (knownCandidate): those returned have their records read (complete).
	metas chunks[messages.MemoryMeta]
}

var evidenceScratches = sync.Pool{New: func() any {
	return &evidenceScratch{cands: map[string]*Recalled{}, byID: map[uint64]*Recalled{}, neighbours: map[uint64]*neighbour{},
		chains: map[string]chainView{}, bodies: map[string]body{}, reached: make(map[string]int32, 256)}
}}

// chunkSize is how many values a chunk holds.
const chunkSize = 32

// maxScratchEntries bounds what a map of the scratch keeps for the next
// recall: one that grew past it (a recall with a huge k) is let go.
const maxScratchEntries = 4096

// chunks hands out zero values of T from chunks of chunkSize, kept, once
// cleared, for the next recall.
type chunks[T any] struct {
	spare      []T   // room for the next values
	used, free [][]T // the chunks handed out, and those cleared
}

// next is a zero T.
func (c *chunks[T]) next() *T {
	if len(c.spare) == 0 {
		if n := len(c.free); n > 0 {
			c.spare, c.free = c.free[n-1], c.free[:n-1]
		} else {
			c.spare = make([]T, chunkSize)
		}
		c.used = append(c.used, c.spare)
	}
	v := &c.spare[0]
	c.spare = c.spare[1:]
	return v
}

// clear zeroes what was handed out, for the next recall; false when c
// grew past what a scratch keeps.
func (c *chunks[T]) clear() bool {
	for _, ch := range c.used {
		clear(ch)
	}
	c.free, c.used, c.spare = append(c.free, c.used...), c.used[:0], nil
	return len(c.free) <= maxScratchEntries/chunkSize
}

// detach copies rs, candidates made in a scratch, out of it: one
// allocation for all.
func detach(rs []*Recalled) []*Recalled {
	copies := make([]Recalled, len(rs))
	for i, r := range rs {
		copies[i] = *r
		rs[i] = &copies[i]
	}
	return rs
}

// keepHits keeps the room of an affinity walk's hits for the next recall
// (when it is not too large), cleared: their keys point into the walk's
// blocks of keys, which the scratch must not keep.
func (s *evidenceScratch) keepHits(hits []pathHit) {
	if s == nil || cap(hits) > maxScratchEntries {
		return
	}
	clear(hits) // past its length, what the last clear left: appends write no further
	s.hits = hits[:0]
}

// release clears s and gives it to the next recall.
func (s *evidenceScratch) release() {
	placesKept, recalledKept, metasKept := s.places.clear(), s.recalled.clear(), s.metas.clear()
	if !placesKept || !recalledKept || !metasKept || len(s.cands) > maxScratchEntries || len(s.neighbours) > maxScratchEntries ||
		len(s.reached) > maxScratchEntries {
		return // the pool makes another
	}
	clear(s.cands)
	clear(s.byID)
	clear(s.neighbours)
	clear(s.chains)
	clear(s.bodies)
	clear(s.reached)
	evidenceScratches.Put(s)
}
