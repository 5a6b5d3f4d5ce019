package meta

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/memory/model"
)

// sameShard are n CIDs that c keeps in one shard, and that shard.
func sameShard(t *testing.T, c *memCache, n int) ([]cid.Cid, *cacheShard) {
	t.Helper()
	var out []cid.Cid
	var s *cacheShard
	for i := 0; len(out) < n; i++ {
		mh, err := multihash.Sum(fmt.Appendf(nil, "memory %d", i), multihash.SHA2_256, -1)
		if err != nil {
			t.Fatal(err)
		}
		id := cid.NewCidV1(cid.DagCBOR, mh)
		if sh := c.shard(c.keyOf(id)); s == nil || sh == s {
			s = sh
			out = append(out, id)
		}
	}
	return out, s
}

// holds is which of ids c holds, checking the shard's ring against its map.
func holds(t *testing.T, c *memCache, s *cacheShard, ids []cid.Cid) []int {
	t.Helper()
	if len(s.ring) != len(s.items) || len(s.ring) > s.max {
		t.Fatalf("ring of %d, map of %d, bound %d", len(s.ring), len(s.items), s.max)
	}
	for i := range s.ring {
		if at, ok := s.items[s.ring[i].key]; !ok || int(at) != i {
			t.Fatalf("ring place %d holds an entry the map places at %d (%v)", i, at, ok)
		}
	}
	var in []int
	for i, id := range ids {
		if _, ok := s.items[c.keyOf(id)]; ok {
			in = append(in, i)
		}
	}
	return in
}

// The memory cache is bounded a shard, and a full shard lets go of an
// entry not read since its hand last passed: entries read meanwhile stay.
// A forgotten memory leaves it and never enters again.
func TestMemoryCacheKeepsWhatIsRead(t *testing.T) {
	c := newMemCache(4 * 64) // 4 a shard
	ids, s := sameShard(t, c, 8)
	mem := &model.Memory{}
	for _, id := range ids[:4] {
		c.put(id, mem)
	}
	if got := holds(t, c, s, ids); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("after four puts the shard holds %v", got)
	}
	for _, i := range []int{0, 2} {
		if _, ok := c.get(ids[i]); !ok {
			t.Fatalf("memory %d not cached", i)
		}
	}
	c.put(ids[4], mem) // 0 was read: 1 gives way
	if got := holds(t, c, s, ids); !slices.Equal(got, []int{0, 2, 3, 4}) {
		t.Fatalf("after the fifth put the shard holds %v, want 0 2 3 4", got)
	}
	c.put(ids[5], mem) // 2's bit was cleared passing, then 3, unread, gives way
	if got := holds(t, c, s, ids); !slices.Equal(got, []int{0, 2, 4, 5}) {
		t.Fatalf("after the sixth put the shard holds %v, want 0 2 4 5", got)
	}

	c.remove(ids[2])
	c.put(ids[2], mem)
	if got := holds(t, c, s, ids); !slices.Equal(got, []int{0, 4, 5}) {
		t.Fatalf("after forgetting 2 and putting it again the shard holds %v, want 0 4 5", got)
	}
	if _, ok := c.get(ids[2]); ok {
		t.Fatal("a forgotten memory was read from the cache")
	}
	c.put(ids[6], mem)
	c.put(ids[7], mem)
	if got := holds(t, c, s, ids); len(got) != 4 || slices.Contains(got, 2) {
		t.Fatalf("after two more puts the shard holds %v: want 4 entries, not 2", got)
	}
	if st := c.Stats(); st.Entries != 4 {
		t.Fatalf("stats: %d entries, want 4", st.Entries)
	}
}

// Reads, puts and removals from many goroutines leave every shard's ring
// and map in step, within the bound (run with -race).
func TestMemoryCacheConcurrent(t *testing.T) {
	c := newMemCache(2 * 64)
	ids, s := sameShard(t, c, 16)
	mem := &model.Memory{}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				id := ids[(i*7+g)%len(ids)]
				switch i % 5 {
				case 0, 1:
					c.put(id, mem)
				case 4:
					if i%400 == 4 && g == 0 {
						c.remove(id)
					}
				default:
					if m, ok := c.get(id); ok && m != mem {
						t.Error("read another memory than was put")
					}
				}
			}
		})
	}
	wg.Wait()
	holds(t, c, s, ids)
}

// An entry of the memory cache is no object of its own: 50,000 memories
// cached add the shards' tables to the heap, not an object each (when the
// ring held pointers to entries, over 50,000 — and each kept its CID's
// string alive).
func TestMemoryCacheEntriesAreNotObjects(t *testing.T) {
	const n = 50_000
	ids := make([]cid.Cid, n)
	for i := range ids {
		mh, err := multihash.Sum(fmt.Appendf(nil, "memory %d", i), multihash.SHA2_256, -1)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = cid.NewCidV1(cid.DagCBOR, mh)
	}
	mem := &model.Memory{}
	before := testutil.HeapObjects()
	c := newMemCache(2 * n)
	for _, id := range ids {
		c.put(id, mem)
	}
	grew := int64(testutil.HeapObjects()) - int64(before)
	t.Logf("%d memories cached: %d more objects on the heap", n, grew)
	if st := c.Stats(); st.Entries != n {
		t.Fatalf("%d entries, want %d", st.Entries, n)
	}
	if grew > n/20 {
		t.Fatalf("%d memories cached added %d objects", n, grew)
	}
	runtime.KeepAlive(c)
	runtime.KeepAlive(ids)
}
