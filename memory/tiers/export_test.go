package tiers

// CachedSegments is what the segment cache holds of sona (nil: nothing).
func (s *Store) CachedSegments(sona string) []*Segment { return s.segs.get(sona) }
