package meta

import (
	"container/list"
	"hash/maphash"
	"sync"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/model"
)

// memCache keeps recently used decoded memories. Memories are immutable
// and addressed by content, so a cached entry can never be stale — unless
// it is forgotten: remove takes it out for good, and a reader that read
// it from an older snapshot cannot put it back (a forgotten CID is never
// stored again). Entries enter only after their block was verified
// against the CID. Cached memories are shared: callers must not modify
// them.
type memCache struct {
	shards [16]cacheShard
	seed   maphash.Seed
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
		return e.Value.(*cacheEntry).m, true
	}
	return nil, false
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
