package meta

import (
	"container/list"
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
type memCache struct {
	shards [64]cacheShard // a hit moves its entry: 64 locks, for a recall's ~30 reads on each core
	seed   maphash.Seed
	stats  store.CacheCounts
}

type cacheShard struct {
	mu        sync.Mutex
	max       int
	order     *list.List // front = most recent
	items     map[string]*list.Element
	forgotten map[string]bool // removed in this process: never cached again
}

type cacheEntry struct {
	key string
	m   *model.Memory
}

func newMemCache(size int) *memCache {
	c := &memCache{seed: maphash.MakeSeed()}
	per := max(1, size/len(c.shards))
	for i := range c.shards {
		c.shards[i] = cacheShard{max: per, order: list.New(), items: map[string]*list.Element{}}
	}
	return c
}

func (c *memCache) shard(key string) *cacheShard {
	return &c.shards[maphash.String(c.seed, key)%uint64(len(c.shards))]
}

func (c *memCache) get(id cid.Cid) (*model.Memory, bool) {
	key := id.KeyString()
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[key]; ok {
		s.order.MoveToFront(e)
		c.stats.Count(true)
		return e.Value.(*cacheEntry).m, true
	}
	c.stats.Count(false)
	return nil, false
}

// Stats are c's reads so far and its entries now.
func (c *memCache) Stats() store.CacheStats {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += s.order.Len()
		s.mu.Unlock()
	}
	return c.stats.Stats(n)
}

func (c *memCache) put(id cid.Cid, m *model.Memory) {
	key := id.KeyString()
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[key]; ok {
		s.order.MoveToFront(e)
		return
	}
	if s.forgotten[key] {
		return
	}
	s.items[key] = s.order.PushFront(&cacheEntry{key, m})
	if s.order.Len() > s.max {
		old := s.order.Back()
		s.order.Remove(old)
		delete(s.items, old.Value.(*cacheEntry).key)
	}
}

func (c *memCache) remove(id cid.Cid) {
	key := id.KeyString()
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[key]; ok {
		s.order.Remove(e)
		delete(s.items, key)
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
