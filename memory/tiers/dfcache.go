package tiers

import (
	"errors"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// dfCacheSize is how many document frequencies the cache keeps (keyed by
// hashes, some 40 bytes each). At 10,000 sonas it holds 40% of what five
// minutes of advances read (13 Badger reads an advance for its misses);
// four times as many held 47% and made no difference to the rate (stop
// 84): the words of all the sonas are far more than a cache holds.
const dfCacheSize = 1 << 16

// docFreq is how many of a sona's mid-term pages hold the term of df key
// key (docFreqIn) through the cache of the counts read lately: every MTM step reads the
// count of each word of its page twice (to weigh its keywords, then to
// add the page) and every tier retrieval the counts of the query's
// words — from Badger, a lookup each that falls to the tree's deeper
// levels as a sona's history grows (a twentieth of a long-lived sona's
// advance at 12,000 memories, issue 15). An operation (r a store.Tx)
// reads the cached count only when its batch has not written the key;
// a view, only one that sees it; only a view's read fills it
// (store.Cache).
func (s *Store) docFreq(r store.Reader, key []byte) (uint64, error) {
	if s.dfs == nil {
		return docFreqIn(r, key)
	}
	if n, ok := s.dfs.Lookup(string(key), key, r); ok {
		return n, nil
	}
	n, err := docFreqIn(r, key)
	if err == nil {
		s.dfs.Fill(string(key), n, r)
	}
	return n, err
}

// docFreqIn reads the count of df key key in r: at most the MTM state's
// Pages (both count the pages added, less those forgotten), so while that
// is 0 the callers read none.
func docFreqIn(r store.Reader, key []byte) (uint64, error) {
	v, err := r.Get(key)
	if errors.Is(err, base.ErrNotFound) {
		return 0, nil
	}
	return base.DecodeU64(v), err
}

// dfCommitted keeps the cached counts current with a commit's writes.
func (s *Store) dfCommitted(ev store.Event) {
	var changes []store.CacheChange[uint64]
	for i, k := range ev.Keys {
		if _, part, _, ok := tierKey(k); !ok || part != 'f' {
			continue // not a dfKey
		}
		ch := store.CacheChange[uint64]{Key: k, Op: store.CacheInvalidate}
		if v := ev.Values[i]; v != nil {
			ch.Op, ch.V = store.CacheSet, base.DecodeU64(v)
		}
		changes = append(changes, ch)
	}
	s.dfs.Apply(ev.Told, changes, nil)
}

// TermCacheStats are the reads of the cache of document frequencies
// (none without one).
func (s *Store) TermCacheStats() store.CacheStats { return s.dfs.Stats() }
