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
// events, see store.Event); a read from a view that may not see the
// latest of either in its shard (store.ToldBefore) does not fill the
// cache. Cached metadata is shared: callers must not modify it.
type metaCache struct {
	shards [64]metaShard
	seed   maphash.Seed
	per    int
}

type metaShard struct {
	mu sync.Mutex
	m  map[string]*messages.MemoryMeta
	// told is the commit (store.Event.Told) of the shard's latest
	// invalidation or patch.
	told uint64
}

func newMetaCache(size int) *metaCache {
	c := &metaCache{seed: maphash.MakeSeed(), per: max(1, size/64)}
	for i := range c.shards {
		c.shards[i].m = map[string]*messages.MemoryMeta{}
	}
	return c
}

func (c *metaCache) shard(key string) *metaShard {
	return &c.shards[maphash.String(c.seed, key)%uint64(len(c.shards))]
}

// get returns the cached metadata, or nil.
func (c *metaCache) get(key string) *messages.MemoryMeta {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}

// put caches meta read in a view that saw the commits told before told
// (store.ToldBefore), unless the shard was invalidated by a later one
// (or told is 0).
func (c *metaCache) put(key string, meta *messages.MemoryMeta, told uint64) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if told == 0 || s.told > told || s.m[key] != nil {
		return // (an entry there is as new: patched since, if at all)
	}
	if len(s.m) >= c.per {
		for k := range s.m { // evict an arbitrary entry
			delete(s.m, k)
			break
		}
	}
	s.m[key] = meta
}

// invalidate drops key's entry: commit told wrote it.
func (c *metaCache) invalidate(key string, told uint64) {
	s := c.shard(key)
	s.mu.Lock()
	delete(s.m, key)
	s.told = max(s.told, told)
	s.mu.Unlock()
}

// patchHot gives the cached metadata of key (if any) the hot state h that
// commit told wrote: a copy with h's values replaces it (cached values
// are shared).
func (c *metaCache) patchHot(key string, h Hot, told uint64) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.m[key]; old != nil {
		m := proto.Clone(old).(*messages.MemoryMeta)
		h.into(m)
		s.m[key] = m
	} else {
		s.told = max(s.told, told) // a view that does not see h does not fill it
	}
}
