package store

import (
	"sync"
	"sync/atomic"

	"github.com/memoria-ai/memoria/memory/base"
)

// Cache keeps values derived from the store's keys (decoded records),
// bounded, and current by the store's commit events: its owner's
// subscription (Subscribe) invalidates, patches or sets (the value
// written) every key a commit writes, with the event's Told — all of a
// commit's with one Apply. A view
// reads an entry (In) only if it sees the commit that made it: an older
// one reads its snapshot. A value read in a view enters
// with Fill only if that view sees every write of the key that the cache
// was told of (ToldBefore) — a view taken before a commit that the cache
// has already been told of may have read what the commit replaced, and
// would keep it cached until the key's next write. It remembers the
// latest write of the keys it does not hold, a bounded number a shard;
// past that, a shard fills only from views that see every write it
// forgot. An operation's reads (a Tx) never fill it: they see writes not
// yet committed.
//
// Cached values are shared: callers must not modify them. It is safe for
// concurrent use.
//
// It holds a key as its 128-bit hash (base.KeyHash), not as a string: the
// hot states' cache alone holds 400,000 entries at the default
// store.memory_cache, and with pointer-free values it is nothing the
// collector scans.
type Cache[V any] struct {
	shards [64]cacheShard[V]
	hash   base.KeyHasher
	per    int // entries a shard holds at most
	stats  CacheCounts
	// weigh, when set, weighs an entry's value, and a shard holds at most
	// perWeight of them (NewWeighedCache).
	weigh     func(V) int
	perWeight int
}

// CacheCounts counts a cache's reads (In and Latest), for /metrics.
type CacheCounts struct{ hits, misses atomic.Uint64 }

// Count counts a read that found (hit) or did not find what it wanted.
func (c *CacheCounts) Count(hit bool) {
	if hit {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
}

// Stats are c's counts so far, with entries the cache holds.
func (c *CacheCounts) Stats(entries int) CacheStats {
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Entries: entries}
}

// CacheStats are a cache's reads that found what they wanted (Hits) and
// those that did not, since the process started, and its entries now.
type CacheStats struct {
	Hits, Misses uint64
	Entries      int
}

type cacheShard[V any] struct {
	mu sync.RWMutex // readers (In) share it
	m  map[base.KeyHash]cached[V]
	// written is, for keys not cached, the latest commit (Event.Told)
	// that wrote them since the shard last forgot: a view that does not
	// see it does not fill the key. Bounded like the entries; when it
	// forgets, told takes the latest of what it forgot, and a view that
	// does not see that fills nothing in the shard.
	written map[base.KeyHash]uint64
	told    uint64
	weight  int // of the entries, when the cache weighs them
}

type cached[V any] struct {
	v       V
	written uint64 // the latest commit known to have written it, 0 if none
}

// NewCache makes a cache of about size entries.
func NewCache[V any](size int) *Cache[V] {
	c := &Cache[V]{hash: base.NewKeyHasher()}
	c.per = max(1, size/len(c.shards))
	for i := range c.shards {
		c.shards[i].m = map[base.KeyHash]cached[V]{}
		c.shards[i].written = map[base.KeyHash]uint64{}
	}
	return c
}

// NewWeighedCache makes a cache of at most about size entries whose
// values weigh at most about budget in all (weigh: a value's weight, its
// bytes for one), for values of very different sizes.
func NewWeighedCache[V any](size, budget int, weigh func(V) int) *Cache[V] {
	c := NewCache[V](size)
	c.weigh, c.perWeight = weigh, max(1, budget/len(c.shards))
	return c
}

// keyOf is key as c holds it.
func (c *Cache[V]) keyOf(key string) base.KeyHash { return c.hash.Of(key) }

// shard is k's shard: by its first hash, as in Apply.
func (c *Cache[V]) shard(k base.KeyHash) *cacheShard[V] { return &c.shards[k[0]%uint64(len(c.shards))] }

// In returns key's cached value if r, a view, sees it: a value a commit
// told after r's snapshot (CacheSet, CachePatch) is newer than what r
// reads.
func (c *Cache[V]) In(key string, r Reader) (V, bool) {
	e, ok := c.get(key)
	if told := ToldBefore(r); !ok || told == 0 || e.written > told {
		c.stats.Count(false)
		var none V
		return none, false
	}
	c.stats.Count(true)
	return e.v, true
}

// Lookup returns key's cached value for r, a view or an operation: a
// view's only if it sees it (In); an operation's (a Tx) as the last
// commit left it (Latest), unless its batch wrote stored, the store key
// the value derives from — its batch's write is what it must read.
func (c *Cache[V]) Lookup(key string, stored []byte, r Reader) (V, bool) {
	if tx, op := r.(Tx); op {
		if !tx.Committed(stored) {
			var none V
			return none, false
		}
		return c.Latest(key)
	}
	return c.In(key, r)
}

// Latest returns key's cached value for an operation that reads key as
// the last commit left it (Tx.Committed): an entry is always the value of
// the latest commit the cache was told of that wrote key, or of a view
// that saw every such commit (Fill), and the committer tells every commit
// before it runs the next batch.
func (c *Cache[V]) Latest(key string) (V, bool) {
	e, ok := c.get(key)
	c.stats.Count(ok)
	return e.v, ok
}

// Stats are c's reads so far and its entries now (none for a nil c).
func (c *Cache[V]) Stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return c.stats.Stats(n)
}

func (c *Cache[V]) get(key string) (cached[V], bool) {
	k := c.keyOf(key)
	s := c.shard(k)
	s.mu.RLock()
	e, ok := s.m[k]
	s.mu.RUnlock()
	return e, ok
}

// Fill caches v, read through r, unless r may not see the latest write
// of the shard or is not a view. An entry there stays: it is as new.
func (c *Cache[V]) Fill(key string, v V, r Reader) { c.fill(key, v, ToldBefore(r)) }

func (c *Cache[V]) fill(key string, v V, told uint64) {
	k := c.keyOf(key)
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if told == 0 || s.told > told || s.written[k] > told {
		return
	}
	if _, ok := s.m[k]; ok {
		return
	}
	c.put(s, k, cached[V]{v: v, written: s.written[k]}) // an eviction remembers it again
	delete(s.written, k)
}

// CacheOp is what a commit did to a key of a Cache (Apply).
type CacheOp uint8

const (
	// CacheSet: the key's value is the change's V, a value read from the
	// commit's Event, whose writes the cache is told of in order.
	CacheSet CacheOp = iota
	// CachePatch: an entry cached takes the value Apply's patch makes of
	// it; a key not cached is remembered as written.
	CachePatch
	// CacheInvalidate: the entry is dropped, and the key remembered as
	// written.
	CacheInvalidate
)

// CacheChange is what a commit did to one key (Apply).
type CacheChange[V any] struct {
	Key string
	Op  CacheOp
	V   V // CacheSet's value
}

// Apply makes the changes of commit told, in their order within a key's
// shard (patch(i, v) is the new value of changes[i]'s entry v), taking
// each shard's lock once. The committer tells a
// commit of thousands of keys (recalls' touches) to every cache before
// its next batch; taken per key, a lock the recalls' reads share had it
// wait for the readers of the shard, and then for a core, thousands of
// times a commit (README, "a commit's changes told to the caches a shard
// at a time"). patch runs under a shard's lock: keep it short.
func (c *Cache[V]) Apply(told uint64, changes []CacheChange[V], patch func(i int, v V) V) {
	const n = uint64(len(c.shards))
	var start [n + 1]int32
	keys := make([]base.KeyHash, len(changes))
	for i := range changes {
		keys[i] = c.keyOf(changes[i].Key)
		start[keys[i][0]%n+1]++
	}
	for s := range n {
		start[s+1] += start[s]
	}
	next := start
	order := make([]int32, len(changes)) // by shard, in order within one
	for i, k := range keys {
		s := k[0] % n
		order[next[s]] = int32(i)
		next[s]++
	}
	for s := range n {
		if start[s] == start[s+1] {
			continue
		}
		sh := &c.shards[s]
		sh.mu.Lock()
		for _, i := range order[start[s]:start[s+1]] {
			c.change(sh, told, keys[i], changes, int(i), patch)
		}
		sh.mu.Unlock()
	}
}

// change makes changes[i], whose key c holds as k, of commit told in s,
// locked.
func (c *Cache[V]) change(s *cacheShard[V], told uint64, k base.KeyHash, changes []CacheChange[V], i int, patch func(int, V) V) {
	ch := &changes[i]
	switch ch.Op {
	case CacheSet:
		c.put(s, k, cached[V]{v: ch.V, written: told})
		delete(s.written, k)
	case CachePatch:
		if e, ok := s.m[k]; ok {
			c.put(s, k, cached[V]{v: patch(i, e.v), written: told})
		} else {
			c.wrote(s, k, told)
		}
	case CacheInvalidate:
		c.drop(s, k)
		c.wrote(s, k, told)
	}
}

// put sets key's entry in s (locked), first making room for it by
// dropping arbitrary others: one when s holds as many entries as it may
// and key is new, and as many as its weight needs when c weighs them.
func (c *Cache[V]) put(s *cacheShard[V], key base.KeyHash, e cached[V]) {
	old, had := s.m[key]
	if !had && len(s.m) >= c.per {
		c.evictOther(s, key)
	}
	s.m[key] = e
	if c.weigh == nil {
		return
	}
	if had {
		s.weight -= c.weigh(old.v)
	}
	s.weight += c.weigh(e.v)
	for s.weight > c.perWeight && len(s.m) > 1 {
		c.evictOther(s, key)
	}
}

// evictOther drops an entry of s (locked) other than key, remembering it
// as written when a commit wrote it: an arbitrary one, or in a weighed
// cache the heaviest of evictSample arbitrary ones. A weighed cache's
// entries differ by tens of times (link lists: a new memory's typed
// links a few hundred bytes, an aged memory's 32 co-access partners 1.9
// KB), and a read that misses costs the same whatever the size; dropped
// at random, the heavy ones kept the light ones out in proportion to
// their bytes, and a store of 100k memories aged by recalls hit a third
// of its link lists in the cache, against nearly half with the heaviest
// of five dropped (issue 15, stop 78).
func (c *Cache[V]) evictOther(s *cacheShard[V], key base.KeyHash) {
	var (
		victim base.KeyHash
		e      cached[V]
		found  bool
		heavy  int
		seen   int
	)
	for k, v := range s.m {
		if k == key {
			continue
		}
		if c.weigh == nil {
			victim, e, found = k, v, true
			break
		}
		if w := c.weigh(v.v); !found || w > heavy {
			victim, e, heavy, found = k, v, w, true
		}
		if seen++; seen == evictSample {
			break
		}
	}
	if !found {
		return
	}
	if e.written > 0 {
		c.wrote(s, victim, e.written)
	}
	c.drop(s, victim)
}

// evictSample is how many entries a weighed cache weighs to drop one: a
// map's iteration begins at a random place, so they are a sample. Five
// found the heaviest as well as sixteen (stop 78).
const evictSample = 5

// drop removes key's entry from s (locked), if it has one.
func (c *Cache[V]) drop(s *cacheShard[V], key base.KeyHash) {
	e, ok := s.m[key]
	if !ok {
		return
	}
	delete(s.m, key)
	if c.weigh != nil {
		s.weight -= c.weigh(e.v)
	}
}

// wrote records that commit told wrote key, not cached, in s (locked).
func (c *Cache[V]) wrote(s *cacheShard[V], key base.KeyHash, told uint64) {
	if len(s.written) >= c.per {
		for _, w := range s.written {
			s.told = max(s.told, w)
		}
		clear(s.written)
	}
	s.written[key] = max(s.written[key], told)
}
