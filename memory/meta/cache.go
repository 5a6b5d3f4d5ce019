package meta

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// memCache keeps recently used decoded memories. Memories are immutable
// and addressed by content, so a cached entry can never be stale — unless
// it is forgotten: remove takes it out for good, and a reader that read
// it from an older snapshot cannot put it back (a forgotten CID is never
// stored again). Entries enter only after their block was verified
// against the CID. Cached memories are shared: callers must not modify
// them.
//
// Each shard is a CLOCK cache: a hit sets its entry's reference bit under
// the shard's read lock, and a put that finds the shard full sweeps its
// ring for an entry not referenced since the hand last passed (clearing
// the bits it passes). An LRU list made every hit take the shard's lock
// exclusively and move its element — 3.5% of a recall's CPU at 100k
// memories with 16 clients — and kept a list element per entry for the
// collector to mark.
type memCache struct {
	shards [64]cacheShard
	seed   maphash.Seed
	stats  store.CacheCounts
}

type cacheShard struct {
	mu        sync.RWMutex
	max       int
	items     map[string]*cacheEntry
	ring      []*cacheEntry // the entries, in the hand's order
	hand      int
	forgotten map[string]bool // removed in this process: never cached again
}

type cacheEntry struct {
	key string
	m   *model.Memory
	at  int         // its place in the shard's ring
	ref atomic.Bool // used since the hand last passed
}

func newMemCache(size int) *memCache {
	c := &memCache{seed: maphash.MakeSeed()}
	per := max(1, size/len(c.shards))
	for i := range c.shards {
		c.shards[i] = cacheShard{max: per, items: map[string]*cacheEntry{}}
	}
	return c
}

func (c *memCache) shard(key string) *cacheShard {
	return &c.shards[maphash.String(c.seed, key)%uint64(len(c.shards))]
}

func (c *memCache) get(id cid.Cid) (*model.Memory, bool) {
	key := id.KeyString()
	s := c.shard(key)
	s.mu.RLock()
	e, ok := s.items[key]
	s.mu.RUnlock()
	c.stats.Count(ok)
	if !ok {
		return nil, false
	}
	if !e.ref.Load() { // a write only when the bit changes: hits share the line
		e.ref.Store(true)
	}
	return e.m, true
}

// Stats are c's reads so far and its entries now.
func (c *memCache) Stats() store.CacheStats {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.items)
		s.mu.RUnlock()
	}
	return c.stats.Stats(n)
}

func (c *memCache) put(id cid.Cid, m *model.Memory) {
	key := id.KeyString()
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[key]; ok {
		e.ref.Store(true)
		return
	}
	if s.forgotten[key] {
		return
	}
	e := &cacheEntry{key: key, m: m, at: len(s.ring)}
	s.items[key] = e
	if len(s.ring) < s.max {
		s.ring = append(s.ring, e)
		return
	}
	// Full: the first entry not read since the hand last passed gives way —
	// or, after two turns of the hand (reads set bits without the lock while
	// it clears them), the one under it.
	for step := 0; ; step++ {
		old := s.ring[s.hand]
		if old.ref.Load() && step < 2*len(s.ring) {
			old.ref.Store(false)
			s.hand = (s.hand + 1) % len(s.ring)
			continue
		}
		delete(s.items, old.key)
		e.at, s.ring[s.hand] = s.hand, e
		s.hand = (s.hand + 1) % len(s.ring)
		return
	}
}

func (c *memCache) remove(id cid.Cid) {
	key := id.KeyString()
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[key]; ok { // the ring's last entry takes its place
		delete(s.items, key)
		last := s.ring[len(s.ring)-1]
		last.at, s.ring[e.at] = e.at, last
		s.ring[len(s.ring)-1] = nil
		s.ring = s.ring[:len(s.ring)-1]
		if s.hand >= len(s.ring) {
			s.hand = 0
		}
	}
	if s.forgotten == nil {
		s.forgotten = map[string]bool{}
	}
	s.forgotten[key] = true
}

// metaEntry is a memory's metadata in the cache: a record read in a view,
// or one as a commit wrote it, decoded when first read, or the hot state
// a commit wrote after such a record (hot.go). Every writer of a record
// gives it the hot state current when it commits (Write), so the latest
// record and the hot state written after it are the memory's metadata.
type metaEntry struct {
	once sync.Once
	raw  []byte                    // a record as committed, until decoded
	prev atomic.Pointer[metaEntry] // the record the hot state follows, until decoded
	hot  *Hot
	meta *messages.MemoryMeta
	err  error
}

// decoded is the entry of a record read in a view.
func decoded(meta *messages.MemoryMeta) *metaEntry {
	e := &metaEntry{meta: meta}
	e.once.Do(func() {})
	return e
}

// withHot is the entry of e's memory once a commit wrote its hot state h.
func (e *metaEntry) withHot(h Hot) *metaEntry {
	rec := e
	if p := e.prev.Load(); p != nil { // e's own hot state gives way to h
		rec = p
	}
	n := &metaEntry{hot: &h}
	n.prev.Store(rec)
	return n
}

// hotState is the hot state of c that e holds: the one a commit patched
// in, without decoding the record.
func (e *metaEntry) hotState(c cid.Cid) (Hot, error) {
	if e.hot != nil {
		return *e.hot, nil
	}
	meta, err := e.get(c)
	if err != nil {
		return Hot{}, err
	}
	return HotOf(meta), nil
}

// withHot is rec with its hot fields set to h: a new record whose other
// fields share rec's (its sonas, labels, insight, evaluation, joins —
// cached records are never modified). A deep copy (proto.Clone) was 2.5%
// of a recall's CPU at 100k memories, and its copies a ninth of the
// objects the collector marked: every memory a recall returns gets a hot
// entry. Every field of MemoryMeta is named here (TestWithHotCopiesEveryField
// fails on one that is not).
func withHot(rec *messages.MemoryMeta, h Hot) *messages.MemoryMeta {
	m := &messages.MemoryMeta{Sonas: rec.Sonas, AgentId: rec.AgentId, Kind: rec.Kind, Backbone: rec.Backbone,
		Archived: rec.Archived, ExpiresAt: rec.ExpiresAt, CreatedAt: rec.CreatedAt, Labels: rec.Labels, Seq: rec.Seq,
		Insight: rec.Insight, Evaluation: rec.Evaluation, Joins: rec.Joins}
	h.into(m)
	if u := rec.ProtoReflect().GetUnknown(); len(u) > 0 {
		m.ProtoReflect().SetUnknown(u)
	}
	return m
}

// get returns the metadata of c that e holds (shared: do not modify it).
func (e *metaEntry) get(c cid.Cid) (*messages.MemoryMeta, error) {
	e.once.Do(func() {
		if e.hot == nil {
			e.meta, e.err = decodeMeta(e.raw, c)
			e.raw = nil
			return
		}
		rec := e.prev.Load()
		var meta *messages.MemoryMeta
		if meta, e.err = rec.get(c); e.err == nil {
			e.meta = withHot(meta, *e.hot)
		}
		e.prev.Store(nil)
	})
	return e.meta, e.err
}
