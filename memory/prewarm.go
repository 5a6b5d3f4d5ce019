package memory

import (
	"errors"
	"fmt"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/store"
)

// prewarmChunk is how many memories the caches' warming reads in one
// view (a view's snapshot is held no longer than that).
const prewarmChunk = 256

// Warmed is closed once the caches have been warmed after the open
// (Options.Prewarm), or warming them stopped; at once without it.
func (s *Self) Warmed() <-chan struct{} { return s.warmed }

// prewarm reads the metadata record and the block of the newest memories
// — as many as the caches keep (store.memory_cache) — into the caches (the
// vector index's ids count the memories in the order they were stored),
// the oldest of them first, so that where a cache's shard overflows it is
// the newest that stay; a chunk to a view. After a restart the caches are
// empty, and each record a recall scored was read from Badger and decoded
// by that recall: at 100,000 memories one client's recalls over the first
// 15 s had a server p99 of 6.6 ms against 3.6 ms once the caches held the
// store (README, "Caches warmed at the start").
func (s *Self) prewarm() {
	defer s.bgWG.Done()
	defer close(s.warmed)
	start := s.clock.Now()
	want := min(s.cfg.Store.MemoryCache, s.index.Len())
	ids := make([]uint64, 0, want)
	for id := uint64(s.index.IDs()); id > 0 && len(ids) < want; {
		id--
		if s.index.Live(id) {
			ids = append(ids, id)
		}
	}
	done := 0
	for len(ids) > 0 {
		select {
		case <-s.stopping:
			return
		default:
		}
		err := s.store.View(func(r store.Reader) error {
			for n := 0; n < prewarmChunk && len(ids) > 0; n++ {
				ok, err := s.warm(r, ids[len(ids)-1])
				if err != nil {
					return err
				}
				ids = ids[:len(ids)-1]
				if ok {
					done++
				}
			}
			return nil
		})
		if errors.Is(err, base.ErrClosed) {
			return
		}
		if err != nil {
			s.log.Warn("warming the caches stopped", "warmed", done, "err", err)
			return
		}
	}
	s.log.Info("caches warmed", "memories", done, "took", s.clock.Now().Sub(start))
}

// warm reads the metadata and the block of the memory of vector id into
// their caches; false when there is none (forgotten meanwhile).
func (s *Self) warm(r store.Reader, id uint64) (bool, error) {
	key, ok := s.index.Key(id)
	if !ok {
		return false, nil
	}
	c, err := base.CID(key)
	if err != nil {
		return false, fmt.Errorf("%w: vector index key: %v", base.ErrCorrupt, err)
	}
	if _, err := s.Memories.MetaIn(r, c); errors.Is(err, base.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if _, err := s.Memories.MemoryIn(r, c); errors.Is(err, base.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, nil
}

// loadKeys has the links read which co-access lists the store holds
// (assoc.Graph.LoadKeys), and the metadata which memories have a record
// of their hot state (meta.Store.LoadHot), in the background: until
// then a read of one the store does not hold goes to Badger, as it did
// before. Recall takes those records' values into the scores the open's
// scan kept from the metadata records (Recaller.KnowHot).
func (s *Self) loadKeys() {
	defer s.bgWG.Done()
	start := s.clock.Now()
	n, err := s.Assoc.LoadKeys()
	switch {
	case errors.Is(err, base.ErrClosed):
		return
	case err != nil:
		s.log.Warn("reading which co-access lists the store holds failed: every read of one goes to the store", "err", err)
	default:
		s.log.Info("co-access lists known", "lists", n, "took", s.clock.Now().Sub(start))
	}
	start = s.clock.Now()
	gen := s.Recaller.PlainGeneration()
	n, err = s.Memories.LoadHot(func(key []byte, h meta.Hot) { s.Recaller.KnowHot(key, h, gen) })
	switch {
	case errors.Is(err, base.ErrClosed):
	case err != nil:
		s.log.Warn("reading which memories have a hot state's record failed: every read of metadata looks for one in the store", "err", err)
	default:
		s.log.Info("hot states' records known", "records", n, "took", s.clock.Now().Sub(start))
	}
}
