package base

import (
	"hash/maphash"
	"math"
)

// KeyIndex finds the number its owner gave a string key (a vector's id, a
// document's slot), in a table of the numbers and 32 bits of their keys'
// hashes: 8 bytes a slot, at most three quarters of the slots used, and no
// pointer for the collector to mark. A Go map of a million string keys
// took 55–58 MB and held a million pointers into the keys (README, issue
// 15, stop 52). The keys stay with the owner, which tells the key of a
// number (key): the index reads it only to tell apart keys whose hashes
// share their 32 bits. The owner must hold a key under a number before it
// puts it, and until the key is deleted or given another number. Not safe
// for concurrent use: the owner's lock covers it.
type KeyIndex struct {
	key   func(uint32) string
	seed  maphash.Seed
	slots []uint64 // the hash's high 32 bits, then number+1; 0 is empty
	n     int
}

// NewKeyIndex makes an index with room for size keys before it grows;
// key(v) is the key of number v.
func NewKeyIndex(size int, key func(uint32) string) *KeyIndex {
	x := &KeyIndex{key: key, seed: maphash.MakeSeed()}
	x.Reset(size)
	return x
}

// SetKey changes how x reads the key of a number: its owner moved them
// (the same keys under the same numbers).
func (x *KeyIndex) SetKey(key func(uint32) string) { x.key = key }

// Reset empties x, with room for size keys.
func (x *KeyIndex) Reset(size int) {
	n := 8
	for n*3 < size*4 {
		n <<= 1
	}
	x.slots, x.n = make([]uint64, n), 0
}

// Len is the number of keys.
func (x *KeyIndex) Len() int { return x.n }

// tag is k's hash's high 32 bits; a slot's home is the tag's low bits.
func (x *KeyIndex) tag(k string) uint64 { return maphash.String(x.seed, k) >> 32 }

// find returns k's slot, or the empty slot where it would go; t is k's
// tag.
func (x *KeyIndex) find(k string, t uint64) (int, bool) {
	mask := len(x.slots) - 1
	for i := int(t) & mask; ; i = (i + 1) & mask {
		s := x.slots[i]
		switch {
		case s == 0:
			return i, false
		case s>>32 == t && x.key(uint32(s)-1) == k:
			return i, true
		}
	}
}

// Get returns k's number.
func (x *KeyIndex) Get(k string) (uint32, bool) {
	i, ok := x.find(k, x.tag(k))
	if !ok {
		return 0, false
	}
	return uint32(x.slots[i]) - 1, true
}

// Put gives k the number v: the owner's key(v) is k.
func (x *KeyIndex) Put(k string, v uint32) { x.put(k, v, true) }

// Add gives k the number v unless k has one, reporting whether it did:
// one lookup where Get then Put are two.
func (x *KeyIndex) Add(k string, v uint32) bool { return x.put(k, v, false) }

func (x *KeyIndex) put(k string, v uint32, replace bool) bool {
	if v == math.MaxUint32 {
		panic("base: KeyIndex: number out of range")
	}
	t := x.tag(k)
	i, had := x.find(k, t)
	if had && !replace {
		return false
	}
	if !had {
		if (x.n+1)*4 > len(x.slots)*3 {
			x.grow()
			i, _ = x.find(k, t)
		}
		x.n++
	}
	x.slots[i] = t<<32 | uint64(v+1)
	return !had
}

// Delete takes k out, reporting whether it was in; the owner's key of its
// number must still be k.
func (x *KeyIndex) Delete(k string) bool {
	i, ok := x.find(k, x.tag(k))
	if !ok {
		return false
	}
	// The slots after it, up to an empty one, that probed past it move
	// back (linear probing without tombstones).
	mask := len(x.slots) - 1
	for j := (i + 1) & mask; x.slots[j] != 0; j = (j + 1) & mask {
		home := int(x.slots[j]>>32) & mask
		if j > i && (home <= i || home > j) || j < i && home <= i && home > j {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = 0
	x.n--
	return true
}

// grow doubles the slots, placing each by its tag.
func (x *KeyIndex) grow() {
	old := x.slots
	x.slots = make([]uint64, 2*len(old))
	mask := len(x.slots) - 1
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := int(s>>32) & mask
		for x.slots[i] != 0 {
			i = (i + 1) & mask
		}
		x.slots[i] = s
	}
}
