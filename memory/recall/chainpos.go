package recall

import "sync"

// chainPositions finds a memory's place in its sona's chain without
// reading the store: the context evidence walks a candidate's neighbours
// there (the memories appended to the sona before and after it) and stops
// at a session's end. The sona registry keeps each sona's members — their
// vector ids, in chain order, append only — in memory (Sonas.Members);
// this keeps, per sona a recall has asked about, the position of each
// member (a map, about 40 bytes a member, built on first use and extended
// as the chain grows). What the walk reads of each member's body — its
// time, whether it asks, who speaks — bodyFacts keeps by vector id. Until
// issue 17 the walk read each memory's associations (its `sequential`
// links), metadata and body from the store: the larger part of a
// recall's CPU with the context evidence on.
type chainPositions struct {
	mu    sync.Mutex
	sonas map[string]*sonaChain
}

// sonaChain is what is kept of one sona's members slice: its first
// element's address identifies the slice (the registry only appends to a
// sona's members, and a forget, or a reload, builds a new slice), n is
// how much of it pos covers.
type sonaChain struct {
	c     *chainPositions // its mu guards what follows
	first *uint64
	n     int
	pos   map[uint64]int32 // position by vector id
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
		p = &sonaChain{c: c, first: &members[0], pos: make(map[uint64]int32, len(members))}
		c.sonas[sona] = p
	}
	for i := p.n; i < len(members); i++ {
		if _, dup := p.pos[members[i]]; !dup { // a memory appended again keeps its first place
			p.pos[members[i]] = int32(i)
		}
	}
	p.n = max(p.n, len(members))
	return p
}

// position is vid's place in the chain, and whether it is in it.
func (p *sonaChain) position(vid uint64) (int, bool) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	i, ok := p.pos[vid]
	return int(i), ok
}
