package meta

import (
	"hash/maphash"
	"sync"
)

// floors keeps, for memories Reinforce reached lately, an importance each
// is known to hold at least, so that its walk need not read a hot state
// to learn that a signal would not raise it. A long-lived sona's response
// reaches ~700 memories within two hops and raises ~20 of them: the reads
// of the other hot states through the metadata cache, each a few misses
// of the processor's caches, were 3.8–4.5% of the CPU at two busy sonas
// over three to five minutes (issue 15, stops 105 and 106).
//
// A slot holds one memory's floor, by a 64-bit hash of its CID (seeded
// per process), and the commit that last wrote that memory's hot state or
// record, or forgot it, among those of any memory hashed to the slot
// (cleared, a Told). Importance only rises while a memory is stored
// (Reinforce, ReinforceDuplicate and the evaluator raise it), so a value
// read in a view stays a floor — unless a later commit wrote the memory's
// hot state or record (an import restores a record as it was exported)
// or forgot it (its content stored again starts afresh). So:
//   - a commit that writes a memory's hot state sets its slot to the
//     importance written, if the slot holds it, and a commit that writes
//     or deletes its record, or its hot state, or forgets it, empties the
//     slot if it holds it; either marks the slot cleared at the commit;
//   - a view fills a slot only if it saw the commit that last cleared it
//     (a view older than that read what the commit replaced).
//
// Reads and fills never wait for a commit: each slot has a lock of one of
// floorStripes, held for a few loads and stores.
type floors struct {
	seed  maphash.Seed
	locks [floorStripes]sync.Mutex
	slots []floorSlot // floorSlots of them
}

type floorSlot struct {
	key     uint64  // the memory's hash; 0: empty
	floor   float64 // an importance it holds at least
	cleared uint64  // the Told of the last commit that set or emptied the slot
}

const (
	floorSlots   = 1 << 16 // 1.5 MB: a few sonas' walks, more than a thousand short ones'
	floorStripes = 256
)

func newFloors() *floors {
	return &floors{seed: maphash.MakeSeed(), slots: make([]floorSlot, floorSlots)}
}

// hash is the slot key of the memory whose CID key (cid.Cid.KeyString) is
// key: never 0.
func (f *floors) hash(key string) uint64 { return max(maphash.String(f.seed, key), 1) }

func (f *floors) lock(h uint64) (*floorSlot, *sync.Mutex) {
	i := h & (floorSlots - 1)
	mu := &f.locks[i&(floorStripes-1)]
	mu.Lock()
	return &f.slots[i], mu
}

// atLeast reports whether the memory hashed to h is known to hold an
// importance of at least v.
func (f *floors) atLeast(h uint64, v float64) bool {
	s, mu := f.lock(h)
	ok := s.key == h && s.floor >= v
	mu.Unlock()
	return ok
}

// fill records v, the importance of the memory hashed to h in a view that
// saw the commits told before told, unless a commit after those cleared
// its slot (or told is unknown: 0).
func (f *floors) fill(h uint64, v float64, told uint64) {
	if told == 0 {
		return
	}
	s, mu := f.lock(h)
	if told >= s.cleared {
		s.key, s.floor = h, v
	}
	mu.Unlock()
}

// wrote follows a commit told as told that wrote the hot state of the
// memory hashed to h, of importance v.
func (f *floors) wrote(h uint64, v float64, told uint64) {
	s, mu := f.lock(h)
	if s.key == h {
		s.floor = v
	}
	s.cleared = max(s.cleared, told)
	mu.Unlock()
}

// empty follows a commit told as told that wrote or deleted the record or
// the hot state of the memory hashed to h, or forgot it.
func (f *floors) empty(h uint64, told uint64) {
	s, mu := f.lock(h)
	if s.key == h {
		s.key = 0
	}
	s.cleared = max(s.cleared, told)
	mu.Unlock()
}
