package tiers

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

func segmentValue(t *testing.T, seg *Segment) []byte {
	t.Helper()
	b, err := proto.Marshal(seg.Record())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ids(segs []*Segment) []uint64 {
	var out []uint64
	for _, s := range segs {
		out = append(out, s.ID)
	}
	return out
}

// A read whose view began before a commit of the sona's segments never
// fills the cache with what the commit replaced; a commit patches the
// segments it writes or deletes into the entry, in a new slice; one it
// cannot read drops the entry; other keys and sonas leave it be; what
// the entries hold is counted, through patches, and bounded.
func TestSegmentCache(t *testing.T) {
	c := newSegmentCache()
	write := func(sona string, seg *Segment) store.Event {
		return store.Event{Keys: []string{string(segmentKey(sona, seg.ID))}, Values: [][]byte{segmentValue(t, seg)}}
	}
	segs := []*Segment{{ID: 1}, {ID: 3}}
	gen := c.begin("a")
	c.committed(write("a", &Segment{ID: 1, NVisit: 1}))
	c.put("a", segs, gen)
	if c.get("a") != nil {
		t.Fatal("a read from before a commit was cached")
	}
	gen = c.begin("a")
	c.committed(store.Event{Keys: []string{string(segmentKey("b", 1)), string(stmKey("a")), string(pageKey("a", 1, 2)), "m/x"},
		Values: [][]byte{segmentValue(t, &Segment{ID: 1}), {}, {}, {}}})
	c.put("a", segs, gen)
	if got := c.get("a"); len(got) != 2 || got[0] != segs[0] {
		t.Fatal("a read after the last commit of the sona's segments was not cached")
	}
	c.committed(write("a", &Segment{ID: 2, NVisit: 7}))
	c.committed(write("a", &Segment{ID: 3, NVisit: 5}))
	got := c.get("a")
	if !slices.Equal(ids(got), []uint64{1, 2, 3}) || got[1].NVisit != 7 || got[2].NVisit != 5 || segs[1].NVisit != 0 {
		t.Fatalf("patched: %v, the first read's %v", ids(got), segs[1])
	}
	c.committed(store.Event{Keys: []string{string(segmentKey("a", 1))}, Values: [][]byte{nil}})
	if got := c.get("a"); !slices.Equal(ids(got), []uint64{2, 3}) {
		t.Fatalf("after a deletion: %v", ids(got))
	}
	c.committed(store.Event{Keys: []string{string(segmentKey("a", 2))}, Values: [][]byte{{0xff}}})
	if c.get("a") != nil {
		t.Fatal("the entry kept after a write it cannot read")
	}
	c.put("b", nil, c.begin("b"))
	if got := c.get("b"); got == nil || len(got) != 0 {
		t.Fatalf("a sona without segments is not cached as such: %v", got)
	}
	checkBytes(t, c)
	big := []*Segment{{ID: 1, Summary: "big", Keywords: []string{"k"}, Embedding: make([]float32, 1<<20)}}
	for i := range maxCachedBytes / (4 << 20) * 2 {
		sona := fmt.Sprint("big", i)
		c.put(sona, big, c.begin(sona))
		if c.get(sona) == nil || c.bytes > maxCachedBytes {
			t.Fatalf("put %d: cached %v, %d bytes held of at most %d", i, c.get(sona) != nil, c.bytes, maxCachedBytes)
		}
	}
	checkBytes(t, c)
	grown := &Segment{ID: 1, Summary: "big", Keywords: []string{"k"}, Embedding: make([]float32, 1<<20+1)}
	for sona, e := range c.sonas {
		if e.segs != nil && sona != "b" {
			c.committed(write(sona, grown))
			break
		}
	}
	checkBytes(t, c)
	huge := []*Segment{{ID: 1, Embedding: make([]float32, maxCachedBytes/4)}}
	c.put("huge", huge, c.begin("huge"))
	if c.get("huge") != nil {
		t.Fatal("segments larger than the whole bound were cached")
	}
	checkBytes(t, c)
}

// checkBytes fails unless the bytes c counts are those its entries hold.
func checkBytes(t *testing.T, c *segmentCache) {
	t.Helper()
	sum := 0
	for sona, e := range c.sonas {
		if n := segmentsBytes(e.segs); e.bytes != n {
			t.Fatalf("%s counted as %d bytes, holds %d", sona, e.bytes, n)
		}
		sum += e.bytes
	}
	if c.bytes != sum {
		t.Fatalf("the cache counts %d bytes, its entries %d", c.bytes, sum)
	}
}

// segmentReads is a store whose views count the iterations of a sona's
// segments.
type segmentReads struct {
	*store.Store
	n atomic.Int64
}

func (c *segmentReads) View(fn func(store.Reader) error) error {
	return c.Store.View(func(r store.Reader) error { return fn(countingReader{r, &c.n}) })
}

type countingReader struct {
	store.Reader
	n *atomic.Int64
}

func (r countingReader) NewIterator(o store.IterOptions) store.Iterator {
	if bytes.HasSuffix(o.Prefix, []byte{0, 'g'}) {
		r.n.Add(1)
	}
	return r.Reader.NewIterator(o)
}

// A retrieval reads a sona's segments only once the mid-term memory has
// made one (most sonas of a store are young, and their retrievals found
// none to read); the keywords of the query, which only rank segments, are
// not weighed either.
func TestRecallReadsNoSegmentsBeforeTheFirst(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := &segmentReads{Store: st}
	s := &Store{store: st, view: c, cfg: Options{Tiers: config.Default().Tiers}, clock: clock.System}
	vec := []float32{1, 0, 0}
	r, err := s.Recall("a", "tomatoes in the garden", vec, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n := c.n.Load(); n != 0 || len(r.Segments) != 0 {
		t.Fatalf("a sona without segments: %d reads of them, %v recalled", n, r.Segments)
	}
	if err := st.Update(context.Background(), func(tx store.Tx) error {
		if err := store.SetProto(tx, mtmKey("a"), &messages.MtmState{NextSegment: 1, Pages: 1}); err != nil {
			return err
		}
		return store.SetProto(tx, segmentKey("a", 1), (&Segment{ID: 1, Embedding: vec}).Record())
	}); err != nil {
		t.Fatal(err)
	}
	if r, err = s.Recall("a", "tomatoes in the garden", vec, 3); err != nil {
		t.Fatal(err)
	}
	if n := c.n.Load(); n != 1 || !slices.Equal(r.Segments, []uint64{1}) {
		t.Fatalf("a sona with a segment: %d reads of them, %v recalled", n, r.Segments)
	}
}
