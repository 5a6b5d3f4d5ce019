package recall

import "sync"

// evidenceScratch is what a scorer fills for the context, time and
// speaker evidence — the candidates by key, the memories around them, the
// chains and bodies read — kept from one recall to the next: made anew,
// they were a tenth of the bytes a recall allocated at 100,000 memories
// (a recall places some 350 neighbours), and so of the collector's work.
// Nothing a recall returns points into it: the neighbours are the
// scorer's own, and the candidates the maps hold are let go of, not
// cleared.
type evidenceScratch struct {
	cands      map[string]*Recalled
	neighbours map[uint64]*neighbour
	chains     map[string]chainView
	bodies     map[string]body
	used, free [][]neighbour // the chunks of neighbours handed out, and those cleared
}

var evidenceScratches = sync.Pool{New: func() any {
	return &evidenceScratch{cands: map[string]*Recalled{}, neighbours: map[uint64]*neighbour{},
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

// release clears s and gives it to the next recall.
func (s *evidenceScratch) release() {
	for _, c := range s.used {
		clear(c)
	}
	s.free, s.used = append(s.free, s.used...), s.used[:0]
	if len(s.cands) > maxScratchEntries || len(s.neighbours) > maxScratchEntries || len(s.free) > maxScratchEntries/neighbourChunk {
		return // the pool makes another
	}
	clear(s.cands)
	clear(s.neighbours)
	clear(s.chains)
	clear(s.bodies)
	evidenceScratches.Put(s)
}
