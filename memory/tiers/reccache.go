package tiers

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// recCacheSize is how many tier records the cache keeps: a sona's STM
// state and its pages (stm_pages, 7, of ~400 bytes each: since stop 83,
// records of their own, where the state held them inline, ~2.9 KB), MTM
// state, persona and counters (8 bytes each) — some 13 a sona, so that
// 10,000 sonas' fit as their states did in 65,536 before.
const recCacheSize = 1 << 17

// record reads the tier record at key (one of cachedTierRecord's) through the
// cache of the records read or written lately (store.Records): every
// advance's STM step read the STM state twice — once in the view that
// runs the model, once more in the committer, to check its version —,
// took the next numbers of two counters there, and its tier retrieval
// read the state a third time, each a lookup in Badger that falls to the
// tree's deeper levels as the store grows (issue 15). nil
// (base.ErrNotFound) when there is none. The record is shared: do not
// modify it.
func (s *Store) record(r store.Reader, key []byte) ([]byte, error) { return s.recs.Get(r, key) }

// cachedTierRecord reports whether key is one of the tier records the
// cache keeps: an STM state (s) or page (S), an MTM state (m), a persona
// (l), a counter (n).
func cachedTierRecord(key string) bool {
	_, part, _, ok := tierKey(key)
	return ok && (part == 's' || part == 'S' || part == 'm' || part == 'l' || part == 'n')
}

// getProto reads the tier record at key into m through the cache (record);
// false when there is none. One that does not decode is base.ErrCorrupt.
func (s *Store) getProto(r store.Reader, key []byte, m proto.Message) (bool, error) {
	return s.recs.GetProto(r, key, m)
}

// CacheStats are the reads of the cache of tier records (none without one).
func (s *Store) CacheStats() store.CacheStats { return s.recs.Stats() }

// cachedInbox is a tier's inbox as committed: its entries' sequence
// numbers and stored values, oldest first, decoded when read. Shared:
// never modified (a commit's patch makes another).
type cachedInbox struct {
	seqs []uint64
	raws [][]byte
}

// inboxCacheSize is how many inboxes the cache keeps (three a sona,
// mostly of one or two entries).
const inboxCacheSize = 1 << 15

// cachedInboxOf returns the inbox of sona's tier as r sees it through the
// cache, and whether the cache could tell: every STM, MTM and LPM step
// read its inbox's oldest entries, and every tier retrieval the STM's
// and the LPM's, each through a Badger iterator whose seek into the tree
// was a fortieth of an advance's CPU (issue 15). An operation's reads (r
// a store.Tx) go to the store: they see their batch's writes.
func (s *Store) cachedInboxOf(r store.Reader, sona, tier string) (*cachedInbox, bool) {
	if s.inboxes == nil {
		return nil, false
	}
	if _, op := r.(store.Tx); op {
		return nil, false
	}
	in, ok := s.inboxes.In(string(inboxPrefix(sona, tier)), r)
	if ok && len(in.seqs) > 0 {
		s.starts.seen(sona, tier, in.seqs[0]) // for the reads the cache will not answer
	}
	return in, ok
}

// inboxCommitted patches the cached inboxes with a commit's writes of
// their entries (inboxKey: a new entry, or a consumed one deleted).
func (s *Store) inboxCommitted(ev store.Event) {
	type entry struct {
		seq uint64
		raw []byte
	}
	var changes []store.CacheChange[*cachedInbox]
	var entries []entry // each change's
	for i, k := range ev.Keys {
		sona, part, rest, ok := tierKey(k)
		if !ok || part != 'i' || len(rest) < 9 || rest[len(rest)-9] != 0 {
			continue
		}
		tier := rest[:len(rest)-9]
		changes = append(changes, store.CacheChange[*cachedInbox]{Key: string(inboxPrefix(sona, tier)), Op: store.CachePatch})
		entries = append(entries, entry{base.DecodeU64([]byte(rest[len(rest)-8:])), ev.Values[i]})
	}
	s.inboxes.Apply(ev.Told, changes, func(i int, in *cachedInbox) *cachedInbox {
		return in.with(entries[i].seq, entries[i].raw)
	})
}

// with is in with entry seq written as raw, or deleted (raw nil).
func (in *cachedInbox) with(seq uint64, raw []byte) *cachedInbox {
	i, found := slices.BinarySearch(in.seqs, seq)
	out := &cachedInbox{seqs: slices.Clone(in.seqs), raws: slices.Clone(in.raws)}
	switch {
	case raw == nil && found:
		out.seqs, out.raws = slices.Delete(out.seqs, i, i+1), slices.Delete(out.raws, i, i+1)
	case raw == nil:
	case found:
		out.raws[i] = raw
	default:
		out.seqs, out.raws = slices.Insert(out.seqs, i, seq), slices.Insert(out.raws, i, raw)
	}
	return out
}

// works decodes the first limit entries (0: all).
func (in *cachedInbox) works(sona, tier string, limit int) ([]*messages.TierWork, error) {
	n := len(in.raws)
	if limit > 0 {
		n = min(n, limit)
	}
	return decodeWorks(sona, tier, in.raws[:n])
}

// decodeWorks decodes the stored values of an inbox's entries.
func decodeWorks(sona, tier string, raws [][]byte) ([]*messages.TierWork, error) {
	out := make([]*messages.TierWork, len(raws))
	for i := range out {
		out[i] = &messages.TierWork{}
		if err := proto.Unmarshal(raws[i], out[i]); err != nil {
			return nil, fmt.Errorf("%w: %s inbox of %s: %v", base.ErrCorrupt, tier, sona, err)
		}
	}
	return out, nil
}
