package recall

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"

	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// plainMemories remembers, by vector id, the memories whose metadata a
// recall last read as plain — not archived, not expiring, not an insight,
// so visible to every recall that may see their sona — and which sona
// they were read a member of, so that the context evidence (place) can
// tell a neighbour visible without reading and decoding its metadata:
// with its time kept by chainPositions, a warm recall reads nothing of
// the memories around its candidates. (Those reads were the larger part
// of a recall's CPU over HTTP at 100k memories, issue 15: about 190 a
// recall, each a Badger lookup and a protobuf decode, half of them missing
// the metadata cache.) 16 bytes a memory, never evicted.
//
// Metadata is mutable: every committed write of a memory's metadata key
// forgets what is kept of it (Recaller.Committed, from the store's commit
// events), and a read that raced with a forget does not record (the
// generation, as in meta's cache).
type plainMemories struct {
	mu    sync.Mutex
	seed  maphash.Seed
	gen   uint64
	facts []plainFact // by vector id
}

// plainFact is what is kept of one memory; the zero value knows nothing.
type plainFact struct {
	plain    bool
	backbone bool
	sona     uint64 // hash of the sona it was read a member of (0: none)
}

func newPlainMemories() *plainMemories { return &plainMemories{seed: maphash.MakeSeed()} }

func (p *plainMemories) hash(sona string) uint64 {
	if sona == "" {
		return 0
	}
	return maphash.String(p.seed, sona) | 1 // never 0
}

// generation is to be taken before the view that reads a memory's
// metadata begins, and given to record.
func (p *plainMemories) generation() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen
}

// record keeps what m, the metadata of vector id read at generation gen,
// says, unless a write of some memory's metadata was committed since; sona
// is the recalling sona.
func (p *plainMemories) record(id uint64, m *messages.MemoryMeta, sona string, gen uint64) {
	f := plainFact{plain: !m.Archived && m.ExpiresAt == 0 && m.Insight == nil, backbone: m.Backbone}
	if slices.Contains(m.Sonas, sona) {
		f.sona = p.hash(sona)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen != gen {
		return
	}
	if id >= uint64(len(p.facts)) {
		p.facts = append(p.facts, make([]plainFact, id+1-uint64(len(p.facts)))...)
	}
	p.facts[id] = f
}

// visible reports whether vector id is known plain and visible in a
// recall of sona: in sona scope (sonaScope) it must have been read a
// member of sona, or be the backbone's.
func (p *plainMemories) visible(id uint64, sona string, sonaScope bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id >= uint64(len(p.facts)) {
		return false
	}
	f := p.facts[id]
	return f.plain && (!sonaScope || f.backbone || f.sona == p.hash(sona))
}

// forget drops what is kept of vector id.
func (p *plainMemories) forget(id uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	if id < uint64(len(p.facts)) {
		p.facts[id] = plainFact{}
	}
}

// Committed takes a commit's events (store.Store.Subscribe, before the
// store's first write): a memory whose metadata a commit wrote or deleted
// is no longer known plain.
func (s *Recaller) Committed(e store.Event) {
	for _, k := range e.Keys {
		if !strings.HasPrefix(k, string(meta.Prefix)) {
			continue
		}
		// (A memory without a vector id has nothing kept: ids are never
		// reused, and a forgotten memory's key no longer has one, which
		// knownVisible checks.)
		if id, ok := s.index.ID(k[len(meta.Prefix):]); ok {
			s.plain.forget(id)
		}
	}
}

// knownVisible is the time of n (the memory of CID key) when it is known
// visible in this recall without reading it: its time kept, and it known
// plain and in the recall's sona. Time travel and exclusions read.
func (sc *scorer) knownVisible(key string, n *neighbour) (int64, bool) {
	p := sc.self.plain
	if p == nil || sc.q.AsOf != nil || len(sc.excluded) > 0 {
		return 0, false
	}
	t, ok := n.chain.time(n.at)
	if !ok {
		return 0, false
	}
	id, ok := sc.self.index.ID(key)
	if !ok || !p.visible(id, sc.q.Sona, sc.q.Scope == ScopeSona) {
		return 0, false
	}
	return t, true
}

// remember keeps what m, the metadata of the memory of CID key read in
// the recall's view, says. The generation is the one before the view
// began (scorer.plainGen): a commit's events come after its writes are
// visible to new views, so any write the view may not see forbids it.
func (sc *scorer) remember(key string, m *messages.MemoryMeta) {
	if sc.self.plain == nil {
		return
	}
	if id, ok := sc.self.index.ID(key); ok {
		sc.self.plain.record(id, m, sc.q.Sona, sc.plainGen)
	}
}
