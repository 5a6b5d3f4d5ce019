package base

import "hash/maphash"

// KeyHash is a key as a cache holds it in place of the string: its
// hashes under two seeds (KeyHasher). A string is an object and a pointer
// an entry for the collector to mark at every cycle, and the caches hold
// hundreds of thousands of them; a map keyed by KeyHash whose values hold
// no pointer is nothing the collector scans.
//
// Two keys share a KeyHash with a chance of 2⁻¹²⁸ a pair, under seeds
// drawn for each process that no caller can choose keys against: a cache
// of a million entries read a trillion times answers for another key with
// a chance under 2⁻⁶⁸, far below a disk's undetected errors.
type KeyHash [2]uint64

// KeyHasher hashes keys under its two seeds.
type KeyHasher [2]maphash.Seed

// NewKeyHasher draws the seeds.
func NewKeyHasher() KeyHasher { return KeyHasher{maphash.MakeSeed(), maphash.MakeSeed()} }

// Of is key's hash.
func (h KeyHasher) Of(key string) KeyHash {
	return KeyHash{maphash.String(h[0], key), maphash.String(h[1], key)}
}

// OfBytes is the hash of key's bytes: Of(string(key)).
func (h KeyHasher) OfBytes(key []byte) KeyHash {
	return KeyHash{maphash.Bytes(h[0], key), maphash.Bytes(h[1], key)}
}
