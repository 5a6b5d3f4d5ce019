package store

import "time"

// SetPause has the committer call pause instead of time.Sleep for its
// commit interval's wait. Call it before the first write: the write's
// submission orders it before the committer's reads.
func SetPause(s *Store, pause func(time.Duration)) { s.pause = pause }

// SetBeforeMark has the acknowledger call fn with the commit count of
// each mark before it records it. Call it before the first write.
func SetBeforeMark(s *Store, fn func(commits uint64)) { s.beforeMark = fn }
