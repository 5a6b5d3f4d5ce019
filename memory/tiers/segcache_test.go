package tiers

import (
	"testing"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// A read whose view began before a commit of the sona's segments never
// fills the cache with what the commit replaced; other sonas' commits
// leave it be; the number of sonas held is bounded.
func TestSegmentCacheGenerations(t *testing.T) {
	c := newSegmentCache()
	segs := []*Segment{{ID: 1}}
	gen := c.begin("a")
	c.committed(store.Event{Keys: []string{string(segmentKey("a", 1))}})
	c.put("a", segs, gen)
	if c.get("a") != nil {
		t.Fatal("a read from before a commit was cached")
	}
	gen = c.begin("a")
	c.committed(store.Event{Keys: []string{string(segmentKey("b", 1)), string(stmKey("a")), string(pageKey("a", 1, 2)), "m/x"}})
	c.put("a", segs, gen)
	if got := c.get("a"); len(got) != 1 || got[0] != segs[0] {
		t.Fatal("a read after the last commit of the sona's segments was not cached")
	}
	c.committed(store.Event{Keys: []string{string(base.Join(segmentPrefix("a"), []byte{9}))}})
	if c.get("a") != nil {
		t.Fatal("the sona's segments were kept after a commit of one")
	}
	c.put("b", nil, c.begin("b"))
	if got := c.get("b"); got == nil || len(got) != 0 {
		t.Fatalf("a sona without segments is not cached as such: %v", got)
	}
	for i := range 2 * maxCachedSonas {
		sona := string(rune('c' + i))
		c.put(sona, segs, c.begin(sona))
	}
	if c.held > maxCachedSonas {
		t.Fatalf("%d sonas held", c.held)
	}
}
