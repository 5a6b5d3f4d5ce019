package meta

import (
	"sync"
	"sync/atomic"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
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
// collector to mark. The ring holds the entries themselves and the map
// their places, by the key's hash (base.KeyHash): an entry is no object of
// its own, and its one pointer is to its memory.
type memCache struct {
	shards [64]cacheShard
	hash   base.KeyHasher
	stats  store.CacheCounts
}

type cacheShard struct {
	mu        sync.RWMutex
	max       int
	items     map[base.KeyHash]int32 // each entry's place in the ring
	ring      []cacheEntry           // the entries, in the hand's order
	hand      int
	forgotten map[base.KeyHash]struct{} // removed in this process: never cached again
}

type cacheEntry struct {
	key base.KeyHash
	m   *model.Memory
	ref atomic.Bool // used since the hand last passed
}

func newMemCache(size int) *memCache {
	c := &memCache{hash: base.NewKeyHasher()}
	per := max(1, size/len(c.shards))
	for i := range c.shards {
		c.shards[i] = cacheShard{max: per, items: map[base.KeyHash]int32{}}
	}
	return c
}

// keyOf is id as c holds it.
func (c *memCache) keyOf(id cid.Cid) base.KeyHash { return c.hash.Of(id.KeyString()) }

func (c *memCache) shard(k base.KeyHash) *cacheShard {
	return &c.shards[k[0]%uint64(len(c.shards))]
}

func (c *memCache) get(id cid.Cid) (*model.Memory, bool) {
	k := c.keyOf(id)
	s := c.shard(k)
	s.mu.RLock()
	var m *model.Memory
	i, ok := s.items[k]
	if ok {
		e := &s.ring[i]
		m = e.m
		if !e.ref.Load() { // a write only when the bit changes: hits share the line
			e.ref.Store(true)
		}
	}
	s.mu.RUnlock()
	c.stats.Count(ok)
	return m, ok
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
	k := c.keyOf(id)
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.items[k]; ok {
		s.ring[i].ref.Store(true)
		return
	}
	if _, ok := s.forgotten[k]; ok {
		return
	}
	if len(s.ring) < s.max {
		s.items[k] = int32(len(s.ring))
		s.ring = append(s.ring, cacheEntry{key: k, m: m})
		return
	}
	// Full: the first entry not read since the hand last passed gives way —
	// or, after two turns of the hand (reads set bits without the lock while
	// it clears them), the one under it.
	for step := 0; ; step++ {
		old := &s.ring[s.hand]
		if old.ref.Load() && step < 2*len(s.ring) {
			old.ref.Store(false)
			s.hand = (s.hand + 1) % len(s.ring)
			continue
		}
		delete(s.items, old.key)
		s.items[k] = int32(s.hand)
		old.key, old.m = k, m
		old.ref.Store(false)
		s.hand = (s.hand + 1) % len(s.ring)
		return
	}
}

func (c *memCache) remove(id cid.Cid) {
	k := c.keyOf(id)
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.items[k]; ok { // the ring's last entry takes its place
		delete(s.items, k)
		last, e := &s.ring[len(s.ring)-1], &s.ring[i]
		if e != last {
			e.key, e.m = last.key, last.m
			e.ref.Store(last.ref.Load())
			s.items[e.key] = i
		}
		last.m = nil
		s.ring = s.ring[:len(s.ring)-1]
		if s.hand >= len(s.ring) {
			s.hand = 0
		}
	}
	if s.forgotten == nil {
		s.forgotten = map[base.KeyHash]struct{}{}
	}
	s.forgotten[k] = struct{}{}
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
	// hot is the hot state a commit wrote after prev's record, when hasHot
	// (in the entry, not an object of its own).
	hot    Hot
	hasHot bool
	meta   *messages.MemoryMeta
	err    error
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
	n := &metaEntry{hot: h, hasHot: true}
	n.prev.Store(rec)
	return n
}

// hotState is the hot state of c that e holds: the one a commit patched
// in, without decoding the record.
func (e *metaEntry) hotState(c cid.Cid) (Hot, error) {
	if e.hasHot {
		return e.hot, nil
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
		if !e.hasHot {
			e.meta, e.err = decodeMeta(e.raw, c)
			e.raw = nil
			return
		}
		rec := e.prev.Load()
		var meta *messages.MemoryMeta
		if meta, e.err = rec.get(c); e.err == nil {
			e.meta = withHot(meta, e.hot)
		}
		e.prev.Store(nil)
	})
	return e.meta, e.err
}
