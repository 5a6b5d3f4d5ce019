package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// HotPrefix: o/ memory CID → Hot (hotSize bytes), a memory's hot state
// once its use first changed it.
var HotPrefix = []byte("o/")

// HotKey is the key of c's hot state.
func HotKey(c cid.Cid) []byte { return base.Join(HotPrefix, c.Bytes()) }

// Hot is what a memory's use changes: its importance (an EWMA that
// Reinforce raises), how often it was recalled and the activity tick from
// which it decays (Touch). A recall changes it for every memory it
// returns, and an advance for every memory its response drew on: kept in
// its own small record (o/), these writes no longer rewrite — nor make
// every cache and reader decode again — the whole metadata record, with
// its sonas, labels and evaluation. The record's fields hold the values a
// memory was stored with, until its first such change; from then on the
// o/ record's are the memory's. Read merges them (readers of metadata see
// one record); Write and Update keep them in step.
type Hot struct {
	Importance     float64
	AccessCount    int64
	LastAccessTick int64
}

// hotSize is the bytes of a stored Hot: three 8-byte big-endian fields.
const hotSize = 24

// HotAbsent reports whether r certainly holds no record of c's hot state
// (false when unsure: before the open's scan of them, LoadHot).
func (m *Store) HotAbsent(r store.Reader, c cid.Cid) bool {
	var buf [80]byte
	return m.hotKeys.Absent(append(append(buf[:0], HotPrefix...), c.KeyString()...), r)
}

// HotOf is the hot state a metadata record holds.
func HotOf(m *messages.MemoryMeta) Hot {
	return Hot{Importance: m.GetImportance(), AccessCount: m.GetAccessCount(), LastAccessTick: m.GetLastAccessTick()}
}

// into sets m's hot fields to h.
func (h Hot) into(m *messages.MemoryMeta) {
	m.Importance, m.AccessCount, m.LastAccessTick = h.Importance, h.AccessCount, h.LastAccessTick
}

func (h Hot) encode() []byte {
	b := make([]byte, hotSize)
	binary.BigEndian.PutUint64(b[0:], math.Float64bits(h.Importance))
	binary.BigEndian.PutUint64(b[8:], uint64(h.AccessCount))
	binary.BigEndian.PutUint64(b[16:], uint64(h.LastAccessTick))
	return b
}

// decodeHot reads a stored Hot of c.
func decodeHot(c cid.Cid, b []byte) (Hot, error) {
	h, ok := HotValue(b)
	if !ok {
		return Hot{}, fmt.Errorf("%w: hot state of %s: %d bytes, want %d", base.ErrCorrupt, c, len(b), hotSize)
	}
	return h, nil
}

// HotValue is the Hot a stored o/ value holds (a commit event's value of
// a HotPrefix key); ok false when b is not one.
func HotValue(b []byte) (Hot, bool) {
	if len(b) != hotSize {
		return Hot{}, false
	}
	return Hot{
		Importance:     math.Float64frombits(binary.BigEndian.Uint64(b[0:])),
		AccessCount:    int64(binary.BigEndian.Uint64(b[8:])),
		LastAccessTick: int64(binary.BigEndian.Uint64(b[16:])),
	}, true
}

// storedHot reads c's o/ record; ok is false when there is none.
func storedHot(r store.Reader, c cid.Cid) (h Hot, ok bool, err error) {
	return hotIn(r, c, nil, nil)
}

// hotAt reads c's o/ record, under key (HotKey(c)), from r.
func hotAt(r store.Reader, c cid.Cid, key []byte) (h Hot, ok bool, err error) {
	raw, err := r.Get(key)
	if errors.Is(err, base.ErrNotFound) {
		return Hot{}, false, nil
	}
	if err != nil {
		return Hot{}, false, err
	}
	h, err = decodeHot(c, raw)
	return h, err == nil, err
}

// hotEntry is a memory's hot state in the cache of them (Store.hots): ok
// false when it has no o/ record.
type hotEntry struct {
	h  Hot
	ok bool
}

// hotCacheScale is how many more hot states the cache of them holds than
// the metadata cache holds records (store.memory_cache): an entry is a
// tenth of a decoded record's bytes, and where the records read are too
// many for that cache — a recall at 1M memories misses 85% of them — the
// hot state was a second read from Badger for each miss, 9% of a recall's
// CPU there (issue 15, stop 81).
const hotCacheScale = 4

// hotIn is c's hot state in r (storedHot's), answered from known (when
// not nil) when it is sure c has no o/ record — most memories have none
// (1,210 of the bench's 1M store), and each read of an absent key looked
// into every table that may hold it —, and read through hots when it is
// not nil: a view's read, which fills it (store.Cache). A state known
// absent is not cached: known says so without Badger.
func hotIn(r store.Reader, c cid.Cid, known *store.KeySet, hots *store.Cache[hotEntry]) (Hot, bool, error) {
	hk := HotKey(c)
	if known != nil && known.Absent(hk, r) {
		return Hot{}, false, nil
	}
	if hots == nil {
		return hotAt(r, c, hk)
	}
	key := c.KeyString()
	if e, ok := hots.In(key, r); ok {
		return e.h, e.ok, nil
	}
	h, ok, err := hotAt(r, c, hk)
	if err == nil {
		hots.Fill(key, hotEntry{h: h, ok: ok}, r)
	}
	return h, ok, err
}

// MergeHot sets m's hot fields, read with it in r, to the memory's: its
// o/ record's, when it has one.
func MergeHot(r store.Reader, c cid.Cid, m *messages.MemoryMeta) error {
	h, ok, err := storedHot(r, c)
	if ok {
		h.into(m)
	}
	return err
}

// Write stores m as c's metadata in tx. When the memory's hot state has
// its own record, m's hot fields go there if they changed (m read with
// Read holds the current ones), so a writer that changes only other
// fields leaves the hot state as it is.
func Write(tx store.Tx, c cid.Cid, m *messages.MemoryMeta) error {
	if err := Put(tx, c, m); err != nil {
		return err
	}
	h, ok, err := storedHot(tx, c)
	if err != nil || !ok {
		return err
	}
	if n := HotOf(m); n != h {
		tx.Set(HotKey(c), n.encode())
	}
	return nil
}

// UpdateHot is the operation that changes the hot state of each of cids
// with fn, writing only its o/ record (its metadata record is read, and
// not written, the first time). Memories not stored are passed over.
func UpdateHot(cids []cid.Cid, fn func(*Hot, cid.Cid)) store.Op { return updateHot(cids, fn, nil, nil) }

// UpdateHot is the package's UpdateHot, reading the hot state of a memory
// whose records the batch has not written from the caches, as the last
// commit left it: a recall's trace touches a dozen memories, an advance's
// reinforcement more, and each read o/ from Badger in the committer (6–7%
// of a recall's and of a long sona's advance's CPU).
func (m *Store) UpdateHot(cids []cid.Cid, fn func(*Hot, cid.Cid)) store.Op {
	return updateHot(cids, fn, m.committedHot, m.hotKeys)
}

// committedHot is c's hot state as the last commit left it, from the
// metadata cache or the hot states' (which holds four times as many: the
// memories the touches' write takes are those recalls returned within
// recall.touch_flush, most of which the metadata cache no longer holds at
// 1M memories); false when the op's batch wrote c's records or neither
// cache holds its o/ record.
func (m *Store) committedHot(tx store.Tx, c cid.Cid) (Hot, bool) {
	hk := HotKey(c)
	if !tx.Committed(hk) {
		return Hot{}, false
	}
	key := c.KeyString()
	if e, ok := m.metas.Lookup(key, Key(c), tx); ok {
		h, err := e.hotState(c)
		return h, err == nil
	}
	e, ok := m.hots.Lookup(key, hk, tx)
	return e.h, ok && e.ok
}

// hotIn is c's hot state in r, a view: its cached entry's when r sees
// it, else as stored; false when c is not stored there.
func (m *Store) hotIn(r store.Reader, c cid.Cid) (Hot, bool, error) {
	if e, ok := m.metas.In(c.KeyString(), r); ok {
		h, err := e.hotState(c)
		return h, err == nil, err
	}
	h, _, found, err := hotStored(r, c, m.hotKeys)
	return h, found, err
}

func updateHot(cids []cid.Cid, fn func(*Hot, cid.Cid), committed func(store.Tx, cid.Cid) (Hot, bool), known *store.KeySet) store.Op {
	return func(tx store.Tx) error {
		for _, c := range cids {
			h, create, found, err := hotToUpdate(tx, c, committed, known)
			if err != nil {
				return err
			}
			if !found {
				continue
			}
			before := h
			if fn(&h, c); h != before || create {
				tx.Set(HotKey(c), h.encode())
			}
		}
		return nil
	}
}

// hotToUpdate is c's hot state for updateHot: committed's when it answers,
// else tx's. create is set when c has no o/ record yet (read from tx: its
// first change writes one even if it changes nothing); found is false
// when c is not stored.
func hotToUpdate(tx store.Tx, c cid.Cid, committed func(store.Tx, cid.Cid) (Hot, bool), known *store.KeySet) (h Hot, create, found bool, err error) {
	if committed != nil {
		if h, ok := committed(tx, c); ok {
			return h, false, true, nil
		}
	}
	return hotStored(tx, c, known)
}

// hotStored is c's hot state as r holds it: its o/ record's, else its
// metadata record's (create: it has no o/ record yet); found is false when
// c is not stored.
func hotStored(r store.Reader, c cid.Cid, known *store.KeySet) (h Hot, create, found bool, err error) {
	if h, ok, err := hotIn(r, c, known, nil); err != nil || ok {
		return h, false, ok, err
	}
	m, err := read(r, c, known)
	if errors.Is(err, base.ErrNotFound) || errors.Is(err, base.ErrForgotten) {
		return Hot{}, false, false, nil
	}
	if err != nil {
		return Hot{}, false, false, err
	}
	return HotOf(m), true, true, nil
}
