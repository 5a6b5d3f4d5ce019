package tiers

import (
	"bytes"
	"sync"

	"github.com/memoria-ai/memoria/memory/store"
)

// segmentCache keeps the decoded MTM segments of the sonas read lately,
// as committed. Every retrieval and MTM step reads all of a sona's
// segments (up to tiers.mtm_segments, 200, each with its embedding):
// decoded afresh each time, that read was a fifth of an advance's CPU
// in a sona with a long history, and grew with it.
//
// A commit that writes a sona's segment keys drops its entry (the store's
// commit events) and moves its generation; a read fills the entry only
// if the generation it took before its view began is still the sona's —
// so a view older than a commit never fills the cache with what the
// commit replaced. Cached segments are shared: callers must not modify
// them (clone one to change it).
type segmentCache struct {
	mu    sync.Mutex
	sonas map[string]*cachedSegments
	held  int // entries holding segments
}

type cachedSegments struct {
	gen  uint64
	segs []*Segment // nil: not cached
}

// maxCachedSonas bounds the sonas whose segments are kept (200 segments
// of 384 dimensions are about 0.5 MB).
const maxCachedSonas = 256

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

// put caches segs, read in a view begun at generation gen, unless a
// commit changed sona's segments since.
func (c *segmentCache) put(sona string, segs []*Segment, gen uint64) {
	if segs == nil {
		segs = []*Segment{} // cached: none
	}
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
	if e.gen != gen || e.segs != nil {
		return
	}
	if c.held >= maxCachedSonas {
		for _, other := range c.sonas { // drop an arbitrary one
			if other.segs != nil {
				other.segs = nil
				c.held--
				break
			}
		}
	}
	e.segs = segs
	c.held++
}

// invalidate drops sona's segments and moves its generation.
func (c *segmentCache) invalidate(sona string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.sonas[sona]
	if e == nil {
		e = &cachedSegments{}
		c.sonas[sona] = e
	}
	if e.segs != nil {
		e.segs = nil
		c.held--
	}
	e.gen++
}

// committed follows the store's commits: a write of a key under a sona's
// segment prefix (t/ uuid 0x00 "g") invalidates its segments.
func (c *segmentCache) committed(e store.Event) {
	for _, k := range e.Keys {
		key := []byte(k)
		if !bytes.HasPrefix(key, KeyPrefix) {
			continue
		}
		rest := key[len(KeyPrefix):]
		i := bytes.IndexByte(rest, 0)
		if i < 0 || i+1 >= len(rest) || rest[i+1] != 'g' {
			continue
		}
		c.invalidate(string(rest[:i]))
	}
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
		s.segs.put(sona, segs, gen)
	}
	return segs, err
}
