package tiers

import "github.com/memoria-ai/memoria/memory/store"

// CachedSegments is what the segment cache holds of sona (nil: nothing).
func (s *Store) CachedSegments(sona string) []*Segment { return s.segs.get(sona) }

// StoredSegments are sona's segments as stored, read past the cache.
func (s *Store) StoredSegments(sona string) ([]*Segment, error) {
	var segs []*Segment
	err := s.view.View(func(txn store.Reader) error {
		var err error
		segs, err = segments(txn, sona)
		return err
	})
	return segs, err
}

// InboxStart is where reads of sona's tier inbox begin.
func (s *Store) InboxStart(sona, tier string) uint64 { return s.starts.get(sona, tier) }
