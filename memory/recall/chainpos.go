package recall

import (
	"slices"
	"sync"
)

// chainPositions finds a memory's place in its sona's chain without
// reading the store: the context evidence walks a candidate's neighbours
// there (the memories appended to the sona before and after it) and stops
// at a session's end. The sona registry keeps each sona's members — their
// vector ids, in chain order, append only — in memory (Sonas.Members);
// this finds, per sona a recall has asked about, the position of each
// member (sonaChain: in the members themselves while their ids ascend,
// else in a map built on first use and extended as the chain grows).
// What the walk reads of each member's body — its time, whether it asks,
// who speaks — bodyFacts keeps by vector id. Until issue 17 the walk read
// each memory's associations (its `sequential` links), metadata and body
// from the store: the larger part of a recall's CPU with the context
// evidence on.
type chainPositions struct {
	mu    sync.Mutex
	sonas map[string]*sonaChain
}

// sonaChain is what is kept of one sona's members slice: its first
// element's address identifies the slice (the registry only appends to a
// sona's members, and a forget, or a reload, builds a new slice), n is
// how much of it is covered.
//
// While the members' ids ascend — a sona whose memories were appended as
// they were inserted, each given the next vector id —, a member's position
// is found by a binary search in the slice itself, and nothing more is
// kept; once they do not (a memory of another sona's, an id given again),
// pos holds them all. The map took 26 MB of the heap at 1M memories under
// recalls (README, stop 107).
type sonaChain struct {
	c       *chainPositions // its mu guards what follows
	first   *uint64
	n       int
	members []uint64         // the slice, while its ids ascend (pos nil)
	pos     map[uint64]int32 // position by vector id, once they do not
}

func newChainPositions() *chainPositions {
	return &chainPositions{sonas: map[string]*sonaChain{}}
}

// chain is what is kept of sona's chain, covering members (sona's
// members as the registry holds them now); nil for no members.
func (c *chainPositions) chain(sona string, members []uint64) *sonaChain {
	if len(members) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.sonas[sona]
	if p == nil || p.first != &members[0] { // (first keeps the old slice alive: its address is not reused)
		p = &sonaChain{c: c, first: &members[0]}
		c.sonas[sona] = p
	}
	if len(members) <= p.n {
		return p
	}
	if p.pos == nil {
		if ascending(members, p.n) {
			p.members, p.n = members, len(members)
			return p
		}
		p.members, p.n = nil, 0
		p.pos = make(map[uint64]int32, len(members))
	}
	for i := p.n; i < len(members); i++ {
		if _, dup := p.pos[members[i]]; !dup { // a memory appended again keeps its first place
			p.pos[members[i]] = int32(i)
		}
	}
	p.n = len(members)
	return p
}

// ascending reports whether ids ascend from from on, given that they do
// up to from.
func ascending(ids []uint64, from int) bool {
	for i := max(from, 1); i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return false
		}
	}
	return true
}

// position is vid's place in the chain, and whether it is in it.
func (p *sonaChain) position(vid uint64) (int, bool) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if p.pos == nil {
		return slices.BinarySearch(p.members[:p.n], vid)
	}
	i, ok := p.pos[vid]
	return int(i), ok
}
