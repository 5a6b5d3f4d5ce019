package store

import (
	"bytes"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

// KeySet is the set of the keys under a prefix that the store may hold,
// as hashes, kept current by the commits its owner's subscription tells
// it (Told), so that a read of a key the store does not hold is answered
// without Badger: a key it lacks is certainly absent. A read of an absent
// key looks into every table that may hold it (the memtables, each level
// 0 table, a table a level below, their Bloom filters first) and
// allocates as it goes. A key a commit deletes stays in the set — a hash
// may stand for two keys — and is read as before.
//
// It answers nothing until Load has added every key the store held: the
// owner subscribes before the store's first write, so that the commits
// after Load's view are told to it. It is safe for concurrent use.
type KeySet struct {
	prefix []byte
	seed   maphash.Seed
	shards [16]keyShard
	told   atomic.Uint64 // the latest commit whose keys are in the set (Event.Told)
	ready  atomic.Bool   // Load has added every key of its view
}

// keyShard is an open-addressing table of hashes (linear probing, 0
// empty, at most three quarters full): 15–17 bytes a key measured, where
// a Go map of them took 33–38.
type keyShard struct {
	mu    sync.RWMutex
	slots []uint64
	n     int
	_     [8]byte // 64 bytes, a cache line of its own: readers share the lock
}

// NewKeySet makes the set of the keys under prefix, empty.
func NewKeySet(prefix []byte) *KeySet {
	return &KeySet{prefix: prefix, seed: maphash.MakeSeed()}
}

// hashOf is key's hash in s, never 0 (an empty slot).
func (s *KeySet) hashOf(key []byte) uint64 { return maphash.Bytes(s.seed, key) | 1 }

// shard is h's shard, by its high bits (the table takes the low ones).
func (s *KeySet) shard(h uint64) *keyShard { return &s.shards[h>>60] }

// has reports whether the shard holds h. The caller holds mu.
func (sh *keyShard) has(h uint64) bool {
	if len(sh.slots) == 0 {
		return false
	}
	mask := uint64(len(sh.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch sh.slots[i] {
		case 0:
			return false
		case h:
			return true
		}
	}
}

// insert adds h, if new. The caller holds mu.
func (sh *keyShard) insert(h uint64) {
	if 4*(sh.n+1) > 3*len(sh.slots) {
		old := sh.slots
		sh.slots, sh.n = make([]uint64, max(64, 2*len(old))), 0
		for _, o := range old {
			if o != 0 {
				sh.insert(o)
			}
		}
	}
	mask := uint64(len(sh.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch sh.slots[i] {
		case 0:
			sh.slots[i] = h
			sh.n++
			return
		case h:
			return
		}
	}
}

// Told adds the keys under the prefix that e's commit wrote; call it from
// the store's subscription (Store.Subscribe), for every commit.
func (s *KeySet) Told(e Event) {
	for i, k := range e.Keys {
		if e.Values[i] != nil && strings.HasPrefix(k, string(s.prefix)) {
			s.add(maphash.String(s.seed, k) | 1)
		}
	}
	// e is the latest commit told: commits are told in order, and a
	// Load's view sees every commit told before it.
	s.told.Store(e.Told)
}

func (s *KeySet) add(h uint64) {
	sh := s.shard(h)
	sh.mu.RLock()
	ok := sh.has(h)
	sh.mu.RUnlock()
	if ok {
		return
	}
	sh.mu.Lock()
	sh.insert(h)
	sh.mu.Unlock()
}

// Load adds every key under the prefix that a view of v holds, after which
// the set answers (Absent); it returns how many the set holds.
func (s *KeySet) Load(v Viewer) (int, error) { return s.LoadEach(v, nil) }

// LoadEach is Load that gives each, when not nil, every key and its
// value as the view reads them (valid only during the call).
func (s *KeySet) LoadEach(v Viewer, each func(k, v []byte)) (int, error) {
	err := v.View(func(r Reader) error {
		var err error
		if each == nil {
			err = Keys(r, s.prefix, func(k []byte) { s.add(s.hashOf(k)) })
		} else {
			err = Scan(r, s.prefix, func(k, v []byte) error {
				s.add(s.hashOf(k))
				each(k, v)
				return nil
			})
		}
		if err != nil {
			return err
		}
		// The view sees every commit told before it: the set has their keys.
		for told := ToldBefore(r); ; {
			was := s.told.Load()
			if was >= told || s.told.CompareAndSwap(was, told) {
				break
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.ready.Store(true)
	return s.Len(), nil
}

// Len is how many keys the set holds.
func (s *KeySet) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		n += sh.n
		sh.mu.RUnlock()
	}
	return n
}

// Absent reports whether r certainly reads no value under key: key is
// under the prefix, the set is loaded, the key is not in it, and r is a view
// that sees no commit the set was not told of, or an operation that
// reads key as the last commit left it (Tx.Committed) — every commit is
// told before the committer runs the next batch. False when unsure.
func (s *KeySet) Absent(key []byte, r Reader) bool {
	if !s.ready.Load() || !bytes.HasPrefix(key, s.prefix) {
		return false
	}
	if tx, op := r.(Tx); op {
		if !tx.Committed(key) {
			return false
		}
	} else if told := ToldBefore(r); told == 0 || told > s.told.Load() {
		return false
	}
	h := s.hashOf(key)
	sh := s.shard(h)
	sh.mu.RLock()
	ok := sh.has(h)
	sh.mu.RUnlock()
	return !ok
}
