package recall

import "sync"

// evidenceScratch is what a scorer fills for the context, time and
// speaker evidence — the candidates by key, the memories around them, the
// chains and bodies read — kept from one recall to the next: made anew,
// they were a tenth of the bytes a recall allocated at 100,000 memories
// (a recall places some 350 neighbours), and so of the collector's work.
// Nothing a recall returns points into it: the neighbours are the
// scorer's own, and the candidates, made in its chunks too (recalled),
// are copied out of it (detach) before it is released.
type evidenceScratch struct {
	cands      map[string]*Recalled
	byID       map[uint64]*Recalled
	neighbours map[uint64]*neighbour
	chains     map[string]chainView
	bodies     map[string]body
	used, free [][]neighbour // the chunks of neighbours handed out, and those cleared

	spareR       []Recalled   // room for the next candidates
	usedR, freeR [][]Recalled // the chunks of candidates handed out, and those cleared
}

var evidenceScratches = sync.Pool{New: func() any {
	return &evidenceScratch{cands: map[string]*Recalled{}, byID: map[uint64]*Recalled{}, neighbours: map[uint64]*neighbour{},
		chains: map[string]chainView{}, bodies: map[string]body{}}
}}

// neighbourChunk is how many neighbours a chunk holds.
const neighbourChunk = 64

// maxScratchEntries bounds what a map of the scratch keeps for the next
// recall: one that grew past it (a recall with a huge k) is let go.
const maxScratchEntries = 4096

// chunk is room for the next neighbours.
func (s *evidenceScratch) chunk() []neighbour {
	var c []neighbour
	if n := len(s.free); n > 0 {
		c, s.free = s.free[n-1], s.free[:n-1]
	} else {
		c = make([]neighbour, neighbourChunk)
	}
	s.used = append(s.used, c)
	return c
}

// recalledChunk is how many candidates a chunk holds.
const recalledChunk = 32

// recalled is a zero candidate, made in s's chunks: made one by one, the
// candidates were an eighth of the bytes a recall allocated at 100,000
// memories (README, stop 56). What the recall returns is copied out
// (detach) before s is released.
func (s *evidenceScratch) recalled() *Recalled {
	if len(s.spareR) == 0 {
		if n := len(s.freeR); n > 0 {
			s.spareR, s.freeR = s.freeR[n-1], s.freeR[:n-1]
		} else {
			s.spareR = make([]Recalled, recalledChunk)
		}
		s.usedR = append(s.usedR, s.spareR)
	}
	r := &s.spareR[0]
	s.spareR = s.spareR[1:]
	return r
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

// release clears s and gives it to the next recall.
func (s *evidenceScratch) release() {
	for _, c := range s.used {
		clear(c)
	}
	s.free, s.used = append(s.free, s.used...), s.used[:0]
	for _, c := range s.usedR {
		clear(c)
	}
	s.freeR, s.usedR, s.spareR = append(s.freeR, s.usedR...), s.usedR[:0], nil
	if len(s.cands) > maxScratchEntries || len(s.neighbours) > maxScratchEntries || len(s.free) > maxScratchEntries/neighbourChunk ||
		len(s.freeR) > maxScratchEntries/recalledChunk {
		return // the pool makes another
	}
	clear(s.cands)
	clear(s.byID)
	clear(s.neighbours)
	clear(s.chains)
	clear(s.bodies)
	evidenceScratches.Put(s)
}
