package vector

import "unsafe"

// keyTable holds an index's keys by id, their bytes packed in chunks: no
// string of its own for each key, and no pointer to one for the collector
// to follow at every cycle. As a slice of strings, the keys were an
// object and a pointer a memory — at a million memories a million of the
// heap's 7.4 million live objects (issue 15), each marked again by every
// collection.
//
// A key's bytes never change once written, and a chunk is never moved or
// reused: the strings at gives alias them, and stay valid for as long as
// their holders keep them (a chunk outlives the table while one does).
// A removed key's bytes stay in its chunk until the index is rebuilt, as
// its node stays in the graph.
//
// The index's kmu guards it. A copy (frozen) reads the keys under n that
// the table held when it was made: add writes past every copy's keys
// (new bytes in a chunk, new ids), so a copy may be read while keys are
// added; clear changes a key a copy holds, and the snapshot that reads one
// holds the index's gmu, which Remove takes.
type keyTable struct {
	chunks [][]byte // each keyChunk bytes (or a longer key's own), full length
	used   int      // bytes of the last chunk taken
	locs   []keyLoc // by id
}

// keyLoc is where a key's bytes are; n 0 for a cleared key (removed).
type keyLoc struct{ chunk, off, n uint32 }

// keyChunk is the size of the chunks of keys: a 550th of a million CID
// keys' 36 MB, so that a string held after the table is gone keeps a
// little of it alive, not all of it.
const keyChunk = 64 << 10

// len is the number of ids given out.
func (t *keyTable) len() int { return len(t.locs) }

// at is id's key ("" once cleared), aliasing the table's bytes.
func (t *keyTable) at(id uint32) string {
	l := t.locs[id]
	if l.n == 0 {
		return ""
	}
	return unsafe.String(&t.chunks[l.chunk][l.off], int(l.n))
}

// add gives key the next id (an empty one reads as cleared: a removed
// key's, as a snapshot writes it).
func (t *keyTable) add(key string) {
	n := len(key)
	if len(t.chunks) == 0 || t.used+n > len(t.chunks[len(t.chunks)-1]) {
		t.chunks = append(t.chunks, make([]byte, max(keyChunk, n)))
		t.used = 0
	}
	c := len(t.chunks) - 1
	copy(t.chunks[c][t.used:], key)
	t.locs = append(t.locs, keyLoc{chunk: uint32(c), off: uint32(t.used), n: uint32(n)})
	t.used += n
}

// clear forgets id's key (a removed one): at gives "" for it from now on.
func (t *keyTable) clear(id uint32) { t.locs[id].n = 0 }

// frozen is a copy of t that reads the keys it holds now (see keyTable);
// nothing is added to it.
func (t *keyTable) frozen() keyTable {
	return keyTable{chunks: t.chunks[:len(t.chunks):len(t.chunks)], locs: t.locs[:len(t.locs):len(t.locs)]}
}
