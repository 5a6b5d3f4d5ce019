package tiers

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync/atomic"
	"unsafe"

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

// personas keeps the personas decoded from the records the cache of tier
// records holds, for the tier retrievals that read them: every advance's
// retrieval decoded its sona's whole persona — up to tiers.kb_size facts
// and agent traits, each with its embedding — to rank them and keep the
// best lpm_top_k (a long-lived sona's ~50 KB a retrieval, a twentieth of
// the bytes its advance allocated; issue 15, stop 105). A slot holds the
// last persona decoded of the sonas whose names hash to it, with the
// record it was decoded from: a read that gets that very record from the
// cache (the same bytes, which a commit replaces, never changes) gets the
// persona decoded. The personas are shared: never modified. A commit that
// rewrites a persona empties its slot (committed), so that what a forget
// took out of it (the facts its memories stated) is not kept here — a
// view older than the commit may yet fill the slot with what it read,
// which no read of the new record is given, until that sona's next.
type personas struct {
	seed  maphash.Seed
	slots [personaSlots]atomic.Pointer[decodedPersona]
}

type decodedPersona struct {
	sona string
	raw  []byte // held: no other record can be at its address
	p    *Persona
}

// personaSlots is how many decoded personas are kept: a full one is
// ~150 KB with its record, and the sonas a retrieval reads over and over
// are the busy few.
const personaSlots = 64

func newPersonas() *personas { return &personas{seed: maphash.MakeSeed()} }

// slot is sona's slot.
func (ps *personas) slot(sona string) *atomic.Pointer[decodedPersona] {
	return &ps.slots[maphash.String(ps.seed, sona)%personaSlots]
}

// committed empties the slots of the personas a commit wrote or deleted.
func (ps *personas) committed(ev store.Event) {
	for _, k := range ev.Keys {
		if sona, part, rest, ok := tierKey(k); ok && part == 'l' && rest == "" {
			slot := ps.slot(sona)
			if e := slot.Load(); e != nil && e.sona == sona {
				slot.CompareAndSwap(e, nil)
			}
		}
	}
}

// sharedPersona is the persona of sona that r sees, shared (see personas):
// the caller must not modify it. A sona without one has an empty persona.
func (s *Store) sharedPersona(r store.Reader, sona string) (*Persona, error) {
	if s.personas == nil {
		return s.readPersona(r, sona)
	}
	key := personaKey(sona)
	raw, err := s.record(r, key)
	if errors.Is(err, base.ErrNotFound) {
		return PersonaOf(&messages.Persona{}), nil
	}
	if err != nil {
		return nil, err
	}
	slot := s.personas.slot(sona)
	if e := slot.Load(); e != nil && e.sona == sona && len(e.raw) == len(raw) && unsafe.SliceData(e.raw) == unsafe.SliceData(raw) {
		return e.p, nil
	}
	rec := &messages.Persona{}
	if err := store.UnmarshalRecord(key, raw, rec); err != nil {
		return nil, err
	}
	p := PersonaOf(rec)
	slot.Store(&decodedPersona{sona: sona, raw: raw, p: p})
	return p, nil
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
// their entries (inboxKey: a new entry, or a consumed one deleted), all
// of an inbox's at once: an STM step consumes up to tierBatch pages and
// hands as many on to the MTM, whose inbox a busy sona fills with
// thousands, and each entry copied the inbox.
func (s *Store) inboxCommitted(ev store.Event) {
	var changes []store.CacheChange[*cachedInbox]
	var entries [][]inboxEntry // each change's
	var at map[string]int      // a change's index by its key
	for i, k := range ev.Keys {
		sona, part, rest, ok := tierKey(k)
		if !ok || part != 'i' || len(rest) < 9 || rest[len(rest)-9] != 0 {
			continue
		}
		key := string(inboxPrefix(sona, rest[:len(rest)-9]))
		j, ok := at[key]
		if !ok {
			if at == nil {
				at = map[string]int{}
			}
			j, at[key] = len(changes), len(changes)
			changes = append(changes, store.CacheChange[*cachedInbox]{Key: key, Op: store.CachePatch})
			entries = append(entries, nil)
		}
		entries[j] = append(entries[j], inboxEntry{base.DecodeU64([]byte(rest[len(rest)-8:])), ev.Values[i]})
	}
	s.inboxes.Apply(ev.Told, changes, func(i int, in *cachedInbox) *cachedInbox {
		return in.with(entries[i])
	})
}

// inboxEntry is an entry of an inbox written (raw) or deleted (raw nil).
type inboxEntry struct {
	seq uint64
	raw []byte
}

// with is in with es written and deleted, the later of two of one entry
// taking effect, in one copy.
func (in *cachedInbox) with(es []inboxEntry) *cachedInbox {
	put := make(map[uint64][]byte, len(es))
	for _, e := range es {
		put[e.seq] = e.raw
	}
	out := &cachedInbox{seqs: make([]uint64, 0, len(in.seqs)+len(es)), raws: make([][]byte, 0, len(in.seqs)+len(es))}
	keep := func(seq uint64, raw []byte) {
		out.seqs, out.raws = append(out.seqs, seq), append(out.raws, raw)
	}
	var added []uint64 // written, not held before
	for seq, raw := range put {
		if _, held := slices.BinarySearch(in.seqs, seq); !held && raw != nil {
			added = append(added, seq)
		}
	}
	slices.Sort(added)
	for i, seq := range in.seqs {
		for len(added) > 0 && added[0] < seq {
			keep(added[0], put[added[0]])
			added = added[1:]
		}
		if raw, ok := put[seq]; !ok {
			keep(seq, in.raws[i])
		} else if raw != nil {
			keep(seq, raw)
		}
	}
	for _, seq := range added {
		keep(seq, put[seq])
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
