package tiers

import (
	"encoding/binary"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// segmentCache keeps the decoded MTM segments of the sonas read lately,
// as committed. Every retrieval and MTM step reads all of a sona's
// segments (up to tiers.mtm_segments, 200, each with its embedding):
// decoded afresh each time, that read was a fifth of an advance's CPU in
// a sona with a long history, and grew with it.
//
// The cache follows the store's commit events: a commit that writes
// some of a sona's segments patches its entry with the segments written
// (decoded once each) or deleted, so that the steps, which write a
// segment or two each, do not make the next read decode all of them. A
// read that misses decodes them and fills the entry only if no commit
// touched the sona's segments since the generation it took before its
// view began — so a view older than a commit never fills the cache with
// what the commit replaced. Cached segments are shared: callers must not
// modify them (clone one to change it).
type segmentCache struct {
	mu    sync.Mutex
	sonas map[string]*cachedSegments
	bytes int // what the entries holding segments hold (segmentBytes)
}

type cachedSegments struct {
	gen   uint64
	segs  []*Segment // by ID; nil: not cached
	bytes int        // segs' segmentBytes
}

// maxCachedBytes bounds what the cached segments hold in the heap
// (segmentBytes: 200 segments of 384 dimensions are about 0.5 MB, a
// young sona's one or two some 3 KB). It was a count, 256 sonas: every
// sona past the 256th read all its segments from Badger and decoded them
// at each retrieval and step — at 1,000 sonas over 120 s of advances
// 3.7% of the CPU —, where 64 MiB holds the segments of every sona of
// those runs (issue 15, stop 109).
const maxCachedBytes = 64 << 20

// segmentBytes estimates what seg holds in the heap: its embedding, its
// texts, its weighted terms and its scoring's keyword hashes, and the
// headers of all of them.
func segmentBytes(seg *Segment) int {
	n := 256 + 4*len(seg.Embedding) + len(seg.Summary)
	for _, k := range seg.Keywords {
		n += 16 + len(k) + 8
	}
	for _, w := range seg.Weights {
		n += 24 + len(w.Term)
	}
	return n
}

// sizeIn is what the segment of key id in segs (by ID) holds with its
// place in the slice (0 when none).
func sizeIn(segs []*Segment, id []byte) int {
	if len(id) != 8 {
		return 0
	}
	if i, ok := slices.BinarySearchFunc(segs, binary.BigEndian.Uint64(id), bySegmentID); ok {
		return 8 + segmentBytes(segs[i])
	}
	return 0
}

func segmentsBytes(segs []*Segment) int {
	n := 0
	for _, seg := range segs {
		n += 8 + segmentBytes(seg)
	}
	return n
}

func newSegmentCache() *segmentCache {
	return &segmentCache{sonas: map[string]*cachedSegments{}}
}

// begin returns sona's generation, to give to put: take it before the view
// that reads the segments begins.
func (c *segmentCache) begin(sona string) uint64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.sonas[sona]; e != nil {
		return e.gen
	}
	return 0
}

// get returns sona's cached segments (shared), or nil.
func (c *segmentCache) get(sona string) []*Segment {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.sonas[sona]; e != nil {
		return e.segs
	}
	return nil
}

// put caches segs (by ID), read in a view begun at generation gen, unless
// a commit changed sona's segments since.
func (c *segmentCache) put(sona string, segs []*Segment, gen uint64) {
	if segs == nil {
		segs = []*Segment{} // cached: none
	}
	size := segmentsBytes(segs) // outside the lock the commits' patches wait on
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.sonas[sona]
	if e == nil {
		if gen != 0 {
			return
		}
		e = &cachedSegments{}
		c.sonas[sona] = e
	}
	if e.gen != gen || e.segs != nil || size > maxCachedBytes {
		return
	}
	for _, other := range c.sonas { // drop arbitrary ones until it fits
		if c.bytes+size <= maxCachedBytes {
			break
		}
		c.drop(other)
	}
	e.segs, e.bytes = segs, size
	c.bytes += size
}

// drop lets e's segments go.
func (c *segmentCache) drop(e *cachedSegments) {
	c.bytes -= e.bytes
	e.segs, e.bytes = nil, 0
}

// committed follows the store's commits: the writes of a sona's segment
// keys and visit records (t/ uuid 0x00 "g" or "v" id) move its
// generation and patch its entry.
func (c *segmentCache) committed(ev store.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range ev.Keys {
		sona, part, id, ok := tierKey(k)
		if !ok || part != 'g' && part != 'v' {
			continue
		}
		e := c.sonas[sona]
		if e == nil {
			e = &cachedSegments{}
			c.sonas[sona] = e
		}
		e.gen++
		if e.segs == nil {
			continue
		}
		if part == 'v' { // the visits change no size
			e.segs, ok = visited(e.segs, []byte(id), ev.Values[i])
		} else {
			before := sizeIn(e.segs, []byte(id))
			e.segs, ok = patched(e.segs, []byte(id), ev.Values[i])
			// Held as patched, over the bound until a put makes room.
			grown := sizeIn(e.segs, []byte(id)) - before
			e.bytes += grown
			c.bytes += grown
		}
		if !ok {
			c.drop(e)
		}
	}
}

// visited is segs (by ID) with the visit record of key id written as
// value taken into its segment (a new slice and segment; a deleted
// record goes with its segment, whose deletion patches it).
func visited(segs []*Segment, id, value []byte) (_ []*Segment, ok bool) {
	if len(id) != 8 {
		return nil, false
	}
	i, found := slices.BinarySearchFunc(segs, binary.BigEndian.Uint64(id), bySegmentID)
	if !found || value == nil {
		return segs, true
	}
	seg := *segs[i] // its slices stay shared: cached segments are never modified
	if seg.addVisits(value) != nil {
		return nil, false
	}
	out := slices.Clone(segs)
	out[i] = &seg
	return out, true
}

// patched is segs (by ID) with the segment of key id written as value
// (nil: deleted): a new slice, segs left as they are. ok is false (and
// the result nil) when the key or value cannot be read: the entry goes.
func patched(segs []*Segment, id, value []byte) (_ []*Segment, ok bool) {
	if len(id) != 8 {
		return nil, false
	}
	n := binary.BigEndian.Uint64(id)
	i, found := slices.BinarySearchFunc(segs, n, bySegmentID)
	out := slices.Clone(segs)
	if value == nil {
		if found {
			out = slices.Delete(out, i, i+1)
		}
		return out, true
	}
	rec := &messages.Segment{}
	if err := proto.Unmarshal(value, rec); err != nil {
		return nil, false
	}
	seg, err := SegmentOf(rec)
	if err != nil || seg.ID != n {
		return nil, false
	}
	seg.scoring = scoringOf(seg)
	if found { // the header keeps its last write's visits: the record may hold later ones
		seg.takeVisits(out[i].NVisit, out[i].LastAccess)
		out[i] = seg
	} else {
		out = slices.Insert(out, i, seg)
	}
	return out, true
}

// readSegments reads sona's segments through the cache; gen is the
// generation begin gave before txn's view began. The result is shared:
// do not modify it.
func (s *Store) readSegments(txn store.Reader, sona string, gen uint64) ([]*Segment, error) {
	if _, op := txn.(store.Tx); op || s.segs == nil {
		return segments(txn, sona) // an op sees its batch's writes
	}
	if segs := s.segs.get(sona); segs != nil {
		return segs, nil
	}
	segs, err := segments(txn, sona)
	if err == nil {
		for _, seg := range segs {
			seg.scoring = scoringOf(seg)
		}
		s.segs.put(sona, segs, gen)
	}
	return segs, err
}
