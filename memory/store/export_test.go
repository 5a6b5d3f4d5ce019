package store

import "time"

// SetPause has the committer call pause instead of time.Sleep for its
// commit interval's wait. Call it before the first write: the write's
// submission orders it before the committer's reads.
func SetPause(s *Store, pause func(time.Duration)) { s.pause = pause }
