package meta

import (
	"hash/maphash"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/messages"
)

// metaCache keeps recently read memory metadata. Metadata is mutable, so
// every committed write of a metadata key invalidates its entry, and one
// of a hot state key (o/) patches it (the store reports them as commit
// events, see store.Event); a read that raced with either does not fill
// the cache. Cached metadata is shared: callers
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

// patchHot gives the cached metadata of key (if any) the hot state h: a
// copy with h's values replaces it (cached values are shared). A read
// that raced with it does not fill the cache.
func (c *metaCache) patchHot(key string, h Hot) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	if old := s.m[key]; old != nil {
		m := proto.Clone(old).(*messages.MemoryMeta)
		h.into(m)
		s.m[key] = m
	}
}
