package tiers

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// recCacheSize is how many tier records the cache keeps: a sona's STM
// state (~2 KB), MTM state, persona and counters (8 bytes each).
const recCacheSize = 1 << 16

// cachedRecord reports whether tier key part is a record the cache keeps:
// the STM state (s), the MTM state (m), the persona (l), the counters (n).
func cachedRecord(part byte) bool {
	return part == 's' || part == 'm' || part == 'l' || part == 'n'
}

// record reads the tier record at key (one of cachedRecord's) through the
// cache of the records read or written lately: every advance's STM step
// read the STM state twice — once in the view that runs the model, once
// more in the committer, to check its version —, took the next numbers
// of two counters there, and its tier retrieval read the state a third
// time, each a lookup in Badger that falls to the tree's deeper levels as
// the store grows (issue 15). As with the document frequencies
// (docFreq): an operation (r a store.Tx) reads the cached record only
// when its batch has not written the key, a view only one that it sees;
// only a view's read fills the cache. nil (base.ErrNotFound) when there
// is none. The record is shared: do not modify it.
func (s *Store) record(r store.Reader, key []byte) ([]byte, error) {
	if s.recs == nil {
		return r.Get(key)
	}
	v, ok := s.recs.Lookup(string(key), key, r)
	if !ok {
		var err error
		if v, err = r.Get(key); errors.Is(err, base.ErrNotFound) {
			v = nil // cached: none
		} else if err != nil {
			return nil, err
		} else if v == nil {
			v = []byte{} // a record of no bytes
		}
		s.recs.Fill(string(key), v, r)
	}
	if v == nil {
		return nil, base.ErrNotFound
	}
	return v, nil
}

// getProto reads the tier record at key into m through the cache (record);
// false when there is none. One that does not decode is base.ErrCorrupt.
func (s *Store) getProto(r store.Reader, key []byte, m proto.Message) (bool, error) {
	v, err := s.record(r, key)
	if errors.Is(err, base.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := proto.Unmarshal(v, m); err != nil {
		return false, fmt.Errorf("%w: record %q: %v", base.ErrCorrupt, key, err)
	}
	return true, nil
}

// recCommitted keeps the cached records current with a commit's writes.
// The tiers hand every record they write to the store in a buffer of its
// own (a marshalled message, a counter's bytes), which the event shares.
func (s *Store) recCommitted(ev store.Event) {
	for i, k := range ev.Keys {
		if _, part, _, ok := tierKey(k); ok && cachedRecord(part) {
			s.recs.Set(k, ev.Told, ev.Values[i]) // nil: deleted
		}
	}
}
