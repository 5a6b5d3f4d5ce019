package meta

import (
	"hash/maphash"
	"sync"

	"github.com/memoria-ai/memoria/messages"
)

// metaCache keeps recently read memory metadata. Metadata is mutable, so
// every committed write of a metadata key invalidates its entry (the store
// reports them as commit events, see store.Event), and a read that raced with an
// invalidation does not fill the cache. Cached metadata is shared: callers
// must not modify it.
type metaCache struct {
	shards [16]metaShard
	seed   maphash.Seed
	per    int
}

type metaShard struct {
	mu  sync.Mutex
	m   map[string]*messages.MemoryMeta
	gen uint64 // bumped on every invalidation in the shard
}

func newMetaCache(size int) *metaCache {
	c := &metaCache{seed: maphash.MakeSeed(), per: max(1, size/16)}
	for i := range c.shards {
		c.shards[i].m = map[string]*messages.MemoryMeta{}
	}
	return c
}

func (c *metaCache) shard(key string) *metaShard {
	return &c.shards[maphash.String(c.seed, key)%uint64(len(c.shards))]
}

// get returns the cached metadata, or the shard's generation to pass to put.
func (c *metaCache) get(key string) (*messages.MemoryMeta, uint64) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key], s.gen
}

// put caches meta read at generation gen, unless the shard saw an
// invalidation since.
func (c *metaCache) put(key string, meta *messages.MemoryMeta, gen uint64) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return
	}
	if len(s.m) >= c.per {
		for k := range s.m { // evict an arbitrary entry
			delete(s.m, k)
			break
		}
	}
	s.m[key] = meta
}

func (c *metaCache) invalidate(key string) {
	s := c.shard(key)
	s.mu.Lock()
	delete(s.m, key)
	s.gen++
	s.mu.Unlock()
}
