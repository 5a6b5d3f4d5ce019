package base

import "unsafe"

// KeyTable holds keys by number (an id), their bytes packed in chunks: no
// string of its own for each key, and no pointer to one for the collector
// to follow at every cycle. As a slice of strings, a vector index's keys
// were an object and a pointer a memory — at a million memories a million
// of the heap's 7.4 million live objects (issue 15), each marked again by
// every collection.
//
// A key's bytes never change once written, and a chunk is never moved or
// reused: the strings At gives alias them, and stay valid for as long as
// their holders keep them (a chunk outlives the table while one does).
// A cleared key's bytes stay in its chunk until the table is dropped.
//
// Its owner's lock guards it. A copy (Frozen) reads the keys that the
// table held when it was made: Add writes past every copy's keys (new
// bytes in a chunk, new ids), so a copy may be read while keys are added;
// Clear changes a key a copy holds.
type KeyTable struct {
	chunks [][]byte // each KeyChunk bytes (or a longer key's own), full length
	used   int      // bytes of the last chunk taken
	locs   []keyLoc // by id
}

// keyLoc is where a key's bytes are; n 0 for a cleared key (removed).
type keyLoc struct{ chunk, off, n uint32 }

// KeyChunk is the size of the chunks of keys: a 550th of a million CID
// keys' 36 MB, so that a string held after the table is gone keeps a
// little of it alive, not all of it.
const KeyChunk = 64 << 10

// Len is the number of ids given out.
func (t *KeyTable) Len() int { return len(t.locs) }

// At is id's key ("" once cleared), aliasing the table's bytes.
func (t *KeyTable) At(id uint32) string {
	l := t.locs[id]
	if l.n == 0 {
		return ""
	}
	return unsafe.String(&t.chunks[l.chunk][l.off], int(l.n))
}

// Add gives key the next id (an empty one reads as cleared).
func (t *KeyTable) Add(key string) {
	n := len(key)
	if len(t.chunks) == 0 || t.used+n > len(t.chunks[len(t.chunks)-1]) {
		t.chunks = append(t.chunks, make([]byte, max(KeyChunk, n)))
		t.used = 0
	}
	c := len(t.chunks) - 1
	copy(t.chunks[c][t.used:], key)
	t.locs = append(t.locs, keyLoc{chunk: uint32(c), off: uint32(t.used), n: uint32(n)})
	t.used += n
}

// Clear forgets id's key: At gives "" for it from now on.
func (t *KeyTable) Clear(id uint32) { t.locs[id].n = 0 }

// Frozen is a copy of t that reads the keys it holds now (see KeyTable);
// nothing is added to it.
func (t *KeyTable) Frozen() KeyTable {
	return KeyTable{chunks: t.chunks[:len(t.chunks):len(t.chunks)], locs: t.locs[:len(t.locs):len(t.locs)]}
}
