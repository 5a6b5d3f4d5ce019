package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/testutil"
)

// Set, Patch and Invalidate make one change of commit told (Apply of it
// alone), as an owner's subscription does for a commit of one key.
func (c *Cache[V]) Set(key string, told uint64, v V) {
	c.Apply(told, []CacheChange[V]{{Key: key, Op: CacheSet, V: v}}, nil)
}

func (c *Cache[V]) Patch(key string, told uint64, fn func(V) V) {
	c.Apply(told, []CacheChange[V]{{Key: key, Op: CachePatch}}, func(_ int, v V) V { return fn(v) })
}

func (c *Cache[V]) Invalidate(key string, told uint64) {
	c.Apply(told, []CacheChange[V]{{Key: key, Op: CacheInvalidate}}, nil)
}

// shardFor is key's shard.
func (c *Cache[V]) shardFor(key string) *cacheShard[V] { return c.shard(c.keyOf(key)) }

// Get returns key's cached value, whichever commit wrote it.
func (c *Cache[V]) Get(key string) (V, bool) {
	e, ok := c.get(key)
	return e.v, ok
}

// A value read in a view older than a write the cache was told of does
// not enter it; one read in a view that sees every write does; a fill
// never replaces an entry; an operation's read never fills.
func TestCacheFillsOnlyFromViewsThatSeeTheWrites(t *testing.T) {
	c := NewCache[int](64 * 4)
	c.Invalidate("k", 5) // a write committed (told 5) while a view of told 4 read
	c.fill("k", 1, 4)
	if v, ok := c.Get("k"); ok {
		t.Fatalf("stale read cached: %v", v)
	}
	c.fill("k", 2, 0) // an operation's read
	if v, ok := c.Get("k"); ok {
		t.Fatalf("an operation's read cached: %v", v)
	}
	c.fill("k", 3, 5)
	if v, ok := c.Get("k"); !ok || v != 3 {
		t.Fatalf("fresh read not cached: %v %v", v, ok)
	}
	c.fill("k", 4, 6)
	if v, _ := c.Get("k"); v != 3 {
		t.Fatalf("a fill replaced an entry: %v", v)
	}
	c.Patch("k", 7, func(v int) int { return v * 10 })
	if v, _ := c.Get("k"); v != 30 {
		t.Fatalf("patched entry: %v", v)
	}
	// A patch of what is not cached keeps older views from filling it —
	// only it: the other keys of its shard fill from those views.
	c.Patch("p", 8, func(v int) int { return v + 1 })
	c.fill("p", 1, 7)
	if v, ok := c.Get("p"); ok {
		t.Fatalf("a view older than the patch filled: %v", v)
	}
	for i := range 200 {
		k := fmt.Sprint("q", i)
		if c.shardFor(k) != c.shardFor("p") {
			continue
		}
		c.fill(k, i, 7)
		if _, ok := c.Get(k); !ok {
			t.Fatalf("%s, of p's shard, not filled from a view that sees its writes", k)
		}
		break
	}
}

// Reads count as hits or misses — a view's read of an entry a commit
// wrote after its snapshot is a miss —, and the entries are counted.
func TestCacheStats(t *testing.T) {
	st, err := OpenMemory(OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var last uint64
	st.Subscribe(func(e Event) { last = e.Told })
	c := NewCache[int](64 * 4)
	write := func() {
		if err := st.Update(context.Background(), func(tx Tx) error { tx.Set([]byte("x"), []byte("v")); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	write()
	err = st.View(func(r Reader) error {
		c.Fill("a", 1, r)
		c.Fill("b", 2, r)
		write()
		c.Set("b", last, 3) // written after r's snapshot
		c.In("a", r)        // hit
		c.In("b", r)        // miss: r reads what the commit replaced
		c.In("c", r)        // miss
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Latest("b") // hit
	c.Latest("d") // miss
	if got, want := c.Stats(), (CacheStats{Hits: 2, Misses: 3, Entries: 2}); got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	var none *Cache[int] // a store configured without the cache
	if got := none.Stats(); got != (CacheStats{}) {
		t.Fatalf("stats of no cache %+v, want none", got)
	}
}

// The writes the cache remembers for keys it does not hold are bounded:
// past the bound it forgets them, and no view older than the latest it
// forgot fills the shard.
func TestCacheForgetsWritesBounded(t *testing.T) {
	c := NewCache[int](64 * 2) // two entries a shard
	var keys []string
	for i := 0; len(keys) < 3; i++ {
		if k := fmt.Sprint("k", i); c.shardFor(k) == c.shardFor("k0") {
			keys = append(keys, k)
		}
	}
	c.Invalidate(keys[0], 3)
	c.Invalidate(keys[1], 4)
	if n := len(c.shardFor(keys[0]).written); n != 2 {
		t.Fatalf("%d writes remembered, want 2", n)
	}
	c.Invalidate(keys[2], 5) // over the bound: 3 and 4 forgotten into told
	if s := c.shardFor(keys[0]); len(s.written) != 1 || s.told != 4 {
		t.Fatalf("after the bound: %d remembered, told %d; want 1, 4", len(s.written), s.told)
	}
	c.fill(keys[0], 1, 3)
	if _, ok := c.Get(keys[0]); ok {
		t.Fatal("a view older than a forgotten write filled")
	}
	c.fill(keys[0], 1, 4)
	if _, ok := c.Get(keys[0]); !ok {
		t.Fatal("a view that sees every forgotten write did not fill")
	}
}

// evictByFill fills another key of key's shard of c (one entry a shard)
// from a view of told, which evicts key.
func evictByFill(t *testing.T, c *Cache[int], key string, told uint64) {
	t.Helper()
	for i := 0; ; i++ {
		if other := fmt.Sprint("o", i); c.shardFor(other) == c.shardFor(key) {
			c.fill(other, i, told)
			break
		}
	}
	if _, ok := c.Get(key); ok {
		t.Fatalf("%s not evicted", key)
	}
}

// An evicted entry that a commit had patched does not come back from a
// view older than that commit: the eviction keeps what it knew.
func TestCacheEvictionRemembersPatches(t *testing.T) {
	c := NewCache[int](1) // one entry a shard
	c.fill("k", 1, 1)
	c.Patch("k", 9, func(int) int { return 2 })
	evictByFill(t, c, "k", 9)
	c.fill("k", 1, 8) // read before the patch's commit
	if v, ok := c.Get("k"); ok {
		t.Fatalf("a view older than the evicted patch filled: %v", v)
	}
}

// A value a commit wrote enters the cache, replacing what it held; no
// older view's read replaces it, and evicted, it is remembered as that
// commit's write.
func TestCacheSetIsTheCommittedValue(t *testing.T) {
	c := NewCache[int](1) // one entry a shard
	c.fill("k", 1, 1)
	c.Set("k", 4, 2)
	if v, ok := c.Get("k"); !ok || v != 2 {
		t.Fatalf("after Set: %v %v, want the value set", v, ok)
	}
	c.Set("new", 5, 7)
	if v, ok := c.Get("new"); !ok || v != 7 {
		t.Fatalf("a key not cached before: %v %v, want the value set", v, ok)
	}
	evictByFill(t, c, "k", 9)
	c.fill("k", 1, 3) // read before the Set's commit
	if v, ok := c.Get("k"); ok {
		t.Fatalf("a view older than the evicted Set filled: %v", v)
	}
}

// Views count the commits told before them: a view taken after a commit
// was told has a ToldBefore at least its Event.Told, one taken before,
// less; an operation's reader has 0.
func TestViewsKnowTheCommitsToldBeforeThem(t *testing.T) { onBothEngines(t, testToldBefore) }

// onBothEngines runs test on a Badger store and on an in-memory one, each
// at the defaults.
func onBothEngines(t *testing.T, test func(*testing.T, *Store)) {
	o := OptionsOf(config.Default().Store)
	t.Run("badger", func(t *testing.T) {
		st, err := Open(t.TempDir(), o)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		test(t, st)
	})
	t.Run("memory", func(t *testing.T) {
		st, err := OpenMemory(o)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		test(t, st)
	})
}

func testToldBefore(t *testing.T, st *Store) {
	var last uint64
	st.Subscribe(func(e Event) { last = e.Told })
	ctx := context.Background()
	var before uint64
	err := st.View(func(r Reader) error {
		before = ToldBefore(r)
		return st.Update(ctx, func(tx Tx) error {
			if ToldBefore(tx) != 0 {
				t.Errorf("an operation's reader has ToldBefore %d", ToldBefore(tx))
			}
			tx.Set([]byte("k"), []byte("v"))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if before == 0 || before >= last {
		t.Fatalf("a view taken before commit %d has ToldBefore %d", last, before)
	}
	err = st.View(func(r Reader) error {
		if got := ToldBefore(r); got < last {
			t.Errorf("a view taken after commit %d was told has ToldBefore %d", last, got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A commit's changes applied together (Apply, a shard at a time) leave the
// cache as Set, Patch and Invalidate applied one by one in their order do:
// a key changed twice in a commit takes both, in order.
func TestCacheApplyIsOneByOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	together, alone := NewCache[int](64*64), NewCache[int](64*64) // nothing evicted
	keys := make([]string, 300)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	for told := uint64(1); told <= 200; told++ {
		changes := make([]CacheChange[int], rng.IntN(120))
		for i := range changes {
			changes[i] = CacheChange[int]{Key: keys[rng.IntN(len(keys))], Op: CacheOp(rng.IntN(3)), V: rng.IntN(1000)}
		}
		together.Apply(told, changes, func(i int, v int) int { return v*7 + i })
		for i, ch := range changes {
			switch ch.Op {
			case CacheSet:
				alone.Set(ch.Key, told, ch.V)
			case CachePatch:
				alone.Patch(ch.Key, told, func(v int) int { return v*7 + i })
			case CacheInvalidate:
				alone.Invalidate(ch.Key, told)
			}
		}
		for _, k := range keys {
			a, b := together.shardFor(k), alone.shardFor(k)
			ka, kb := together.keyOf(k), alone.keyOf(k)
			ea, oka := a.m[ka]
			eb, okb := b.m[kb]
			if oka != okb || ea != eb || a.written[ka] != b.written[kb] {
				t.Fatalf("commit %d, %s: applied together %v %v (written %d), one by one %v %v (written %d)",
					told, k, ea, oka, a.written[ka], eb, okb, b.written[kb])
			}
		}
	}
	if s := together.Stats(); s.Entries == 0 {
		t.Fatal("nothing cached: the test tested nothing")
	}
}

// A weighed cache over its budget drops heavy entries before light ones:
// a read that misses costs the same whatever the entry's size, so the
// light ones are the cheaper to keep. Dropped arbitrarily, fewer than
// half of the light ones stayed here (298–314 of 640); the heaviest of a
// sample dropped, more than nine in ten (589–592 in 200 runs).
func TestWeighedCacheDropsTheHeavyFirst(t *testing.T) {
	const shards, perShard = 64, 20
	// Each shard's budget holds its ~10 light entries (10 each) and ~4
	// of its ~10 heavy ones (1,000 each).
	c := NewWeighedCache[[]byte](1000*shards, 5000*shards, func(v []byte) int { return len(v) })
	told := uint64(0)
	for i := range shards * perShard {
		told++
		size := 10
		if i%2 == 1 {
			size = 1000
		}
		c.Set(fmt.Sprint("k", i), told, make([]byte, size))
	}
	light, heavy := 0, 0
	for i := range shards * perShard {
		if _, ok := c.Get(fmt.Sprint("k", i)); ok {
			if i%2 == 1 {
				heavy++
			} else {
				light++
			}
		}
	}
	if n := shards * perShard / 2; light < n*3/4 || heavy == 0 {
		t.Fatalf("%d of %d light entries and %d heavy ones stayed: want at least three quarters of the light, and heavy ones in the room left", light, n, heavy)
	}
}

// A weighed cache holds entries up to its budget whatever their number:
// a heavy value makes room by dropping others; its weight follows what
// replaces, patches and drops its entries.
func TestWeighedCacheKeepsItsBudget(t *testing.T) {
	const shards = 64
	c := NewWeighedCache[[]byte](1000*shards, 100*shards, func(v []byte) int { return len(v) }) // 100 bytes a shard
	weights := func() (total int, most int) {
		for i := range c.shards {
			s := &c.shards[i]
			w := 0
			for _, e := range s.m {
				w += len(e.v)
			}
			if w != s.weight {
				t.Fatalf("shard %d weighs %d, counts %d", i, w, s.weight)
			}
			total, most = total+w, max(most, w)
		}
		return total, most
	}
	told := uint64(0)
	for i := range 2000 {
		told++
		c.Set(fmt.Sprint("k", i), told, make([]byte, 10+i%40))
	}
	if total, most := weights(); most > 100 || total < 50*shards {
		t.Fatalf("after 2,000 sets: %d bytes in all, %d in the heaviest shard, want at most 100 a shard and about its budget", total, most)
	}
	// A value heavier than its shard's budget stays alone in it.
	told++
	c.Set("heavy", told, make([]byte, 300))
	if v, ok := c.Get("heavy"); !ok || len(v) != 300 {
		t.Fatalf("the heavy value: %d bytes, %v", len(v), ok)
	}
	if s := c.shardFor("heavy"); len(s.m) != 1 {
		t.Fatalf("the heavy value's shard holds %d entries, want it alone", len(s.m))
	}
	// Replaced by a light one, patched, invalidated: the weight follows.
	told++
	c.Set("heavy", told, make([]byte, 5))
	told++
	c.Patch("heavy", told, func([]byte) []byte { return make([]byte, 7) })
	weights()
	told++
	c.Invalidate("heavy", told)
	weights()
	if _, ok := c.Get("heavy"); ok {
		t.Fatal("an invalidated entry is still held")
	}
	// A count-bounded cache keeps its bound as before.
	n := NewCache[int](shards)
	for i := range 1000 {
		n.fill(fmt.Sprint(i), i, 1)
	}
	for i := range n.shards {
		if len(n.shards[i].m) > 1 {
			t.Fatalf("shard %d of a cache of one entry a shard holds %d", i, len(n.shards[i].m))
		}
	}
}

// A cache holds its keys as hashes, not as strings: filled with 100,000
// entries whose values hold no pointer, it adds a few map tables to the
// heap, not an object an entry (a string a key: over 100,000), and the
// collector does not scan them.
func TestCacheKeysAreNotAnObjectEach(t *testing.T) {
	const n = 100_000
	before := testutil.HeapObjects()
	c := NewCache[uint64](n)
	for i := range n {
		c.fill(fmt.Sprintf("o/%036d", i), uint64(i), 1)
	}
	grew := int64(testutil.HeapObjects()) - int64(before)
	t.Logf("%d entries: %d more objects on the heap", n, grew)
	if s := c.Stats(); s.Entries < n*9/10 {
		t.Fatalf("%d entries cached of %d", s.Entries, n)
	}
	if grew > n/20 {
		t.Fatalf("%d entries added %d objects to the heap", n, grew)
	}
	for _, i := range []int{0, 4242, n - 1} {
		if v, ok := c.Get(fmt.Sprintf("o/%036d", i)); ok && v != uint64(i) {
			t.Fatalf("entry %d reads %d", i, v)
		}
	}
	runtime.KeepAlive(c)
}

// A view taken while a commit is told to the subscribers — its number
// counted or not, the caches changed or not — reads the cache and the
// store alike: it sees the commit in neither until the subscribers have
// made its changes, and a follower, told after them, reads it in a view.
func TestAViewNeverMixesACommitWithWhatItReplaced(t *testing.T) {
	onBothEngines(t, testViewDuringTell)
}

func testViewDuringTell(t *testing.T, st *Store) {
	ctx := context.Background()
	key := []byte("k")
	c := NewCache[string](64)
	blocked, release := make(chan struct{}), make(chan struct{})
	wrote := func(e Event, v string) bool {
		for i, k := range e.Keys {
			if k == string(key) && string(e.Values[i]) == v {
				return true
			}
		}
		return false
	}
	// Told first, it holds the committer while the commit of "b" is
	// being told, before the cache below has made it.
	st.Subscribe(func(e Event) {
		if wrote(e, "b") {
			close(blocked)
			<-release
		}
	})
	st.Subscribe(func(e Event) {
		for i, k := range e.Keys {
			c.Set(k, e.Told, string(e.Values[i]))
		}
	})
	followed := make(chan string, 1)
	st.Follow(func(e Event) {
		if wrote(e, "b") {
			_ = st.View(func(r Reader) error {
				v, err := r.Get(key)
				followed <- string(v)
				return err
			})
		}
	})
	set := func(v string) Op {
		return func(tx Tx) error { tx.Set(key, []byte(v)); return nil }
	}
	// read is what a view reads of key through the cache (filling it on a
	// miss, as the caches' owners do) and from the store.
	read := func() (cached string, hit bool, stored string) {
		err := st.View(func(r Reader) error {
			v, err := r.Get(key)
			stored = string(v)
			if cached, hit = c.In(string(key), r); !hit && err == nil {
				c.Fill(string(key), stored, r)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return cached, hit, stored
	}
	if err := st.Update(ctx, set("a")); err != nil {
		t.Fatal(err)
	}
	if cached, hit, stored := read(); stored != "a" || hit && cached != "a" {
		t.Fatalf("after a: cached %q (%v), stored %q", cached, hit, stored)
	}
	p := st.Submit(set("b"))
	<-blocked
	for range 2 { // the first read may fill the cache, the second reads it
		if cached, hit, stored := read(); stored != "a" || hit && cached != stored {
			close(release)
			t.Fatalf("a view while b is told: cached %q (hit %v), stored %q", cached, hit, stored)
		}
	}
	close(release)
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if v := <-followed; v != "b" {
		t.Fatalf("the follower's view read %q, not the commit it was told", v)
	}
	if cached, hit, stored := read(); stored != "b" || hit && cached != "b" {
		t.Fatalf("after b: cached %q (%v), stored %q", cached, hit, stored)
	}
}
