package recall

import (
	"strings"
	"sync"
)

// chainPositions finds a memory's place in its sona's chain, and its
// time, without reading the store: the context evidence walks a
// candidate's neighbours there (the memories appended to the sona before
// and after it) and stops at a session's end. The sona registry keeps
// each sona's members — their vector ids, in chain order, append only —
// in memory (Sonas.Members); this keeps, per sona a recall has asked
// about, the position of each member (a map, about 40 bytes a member,
// built on first use and extended as the chain grows) and each member's
// time once read (8 bytes a member): a memory's time never changes (its
// timestamp is part of its content, else when it was first stored).
// Until issue 17 the walk read each memory's associations (its
// `sequential` links), metadata and body from the store: the larger part
// of a recall's CPU with the context evidence on.
//
// It keeps the rest of what the evidence reads of a member's body too,
// once read (4 bytes a member): whether it asks a question and who
// speaks, its speaker's words kept once for all the chains. Those never
// change either, and a candidate's body and the one before it (reply)
// were read for every recall: at 1M memories, where the memory cache
// holds a tenth of them, these reads were a sixth of a recall's CPU
// (README, stop 53).
type chainPositions struct {
	mu       sync.Mutex
	sonas    map[string]*sonaChain
	speakers [][]string        // by speaker id: a speaker's words (body.speaker); 0 is none; at most maxSpeakers more
	named    map[string]uint32 // a speaker's words, joined, → its id
}

// sonaChain is what is kept of one sona's members slice: its first
// element's address identifies the slice (the registry only appends to a
// sona's members, and a forget, or a reload, builds a new slice), n is
// how much of it pos and times cover.
type sonaChain struct {
	c     *chainPositions // its mu guards what follows
	first *uint64
	n     int
	pos   map[uint64]int32 // position by vector id
	times []int64          // time by position; 0 = not read yet
	said  []uint32         // by position: saidKnown, saidQuestion and the speaker's id from bit 2
}

// maxSpeakers bounds the speakers the chains keep (chainPositions.speakers):
// a body of another speaker is not kept, and is read again at each recall
// as before — where every memory names a speaker of its own, the table
// would grow with the memories.
const maxSpeakers = 1 << 16

// The bits of sonaChain.said.
const (
	saidKnown    = 1 << 0
	saidQuestion = 1 << 1
	saidSpeaker  = 2 // the speaker's id is said >> saidSpeaker
)

func newChainPositions() *chainPositions {
	return &chainPositions{sonas: map[string]*sonaChain{}, speakers: [][]string{nil}, named: map[string]uint32{}}
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
	if len(members) > p.n {
		p.times = append(p.times, make([]int64, len(members)-p.n)...)
		p.said = append(p.said, make([]uint32, len(members)-p.n)...)
		p.n = len(members)
	}
	return p
}

// position is vid's place in the chain, and whether it is in it.
func (p *sonaChain) position(vid uint64) (int, bool) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	i, ok := p.pos[vid]
	return int(i), ok
}

// time is the time kept for the memory at position i, if any.
func (p *sonaChain) time(i int) (int64, bool) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	return p.times[i], p.times[i] != 0
}

// body is what is kept of the body of the memory at position i (its
// time, whether it asks, its speaker), if it was read before.
func (p *sonaChain) body(i int) (body, bool) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	t, said := p.times[i], p.said[i]
	if t == 0 || said&saidKnown == 0 {
		return body{}, false
	}
	return body{time: t, question: said&saidQuestion != 0, speaker: p.c.speakers[said>>saidSpeaker]}, true
}

// setBody keeps b, the body of the memory at position i.
func (p *sonaChain) setBody(i int, b body) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	said := uint32(saidKnown)
	if b.question {
		said |= saidQuestion
	}
	if len(b.speaker) > 0 {
		name := strings.Join(b.speaker, " ")
		id, ok := p.c.named[name]
		if !ok {
			if len(p.c.speakers) > maxSpeakers {
				return // not kept: its body is read again each time
			}
			id = uint32(len(p.c.speakers))
			p.c.named[name] = id
			p.c.speakers = append(p.c.speakers, b.speaker)
		}
		said |= id << saidSpeaker
	}
	p.times[i], p.said[i] = b.time, said
}
