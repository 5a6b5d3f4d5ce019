package vector

import "unsafe"

// keyList holds the index's keys by id: their bytes in chunks, and where
// each is, with no pointer a key for the collector to follow — a []string
// of a million keys held a million (README, issue 15, stop 52). A key's
// bytes never move or change: a copy of the list (view) stays valid while
// keys are added, and a key read (at) is a string over its chunk.
type keyList struct {
	chunks [][]byte // filled in turn; a key lies in one
	refs   []keyRef // by id
}

// keyRef is where a key's bytes are; n 0: none (removed).
type keyRef struct{ chunk, off, n uint32 }

// keyChunk is the size of a chunk of keys (a longer key has its own).
const keyChunk = 1 << 20

// len is the number of ids.
func (l *keyList) len() int { return len(l.refs) }

// add appends k as the next id's key.
func (l *keyList) add(k string) { copy(l.reserve(len(k)), k) }

// reserve appends the next id's key as n bytes to be filled in at once
// (a restore reads them into place); n 0 is an id without a key.
func (l *keyList) reserve(n int) []byte {
	if n == 0 {
		l.refs = append(l.refs, keyRef{})
		return nil
	}
	if len(l.chunks) == 0 || len(l.chunks[len(l.chunks)-1])+n > cap(l.chunks[len(l.chunks)-1]) {
		l.chunks = append(l.chunks, make([]byte, 0, max(n, keyChunk)))
	}
	c := len(l.chunks) - 1
	off := len(l.chunks[c])
	l.refs = append(l.refs, keyRef{chunk: uint32(c), off: uint32(off), n: uint32(n)})
	l.chunks[c] = l.chunks[c][:off+n]
	return l.chunks[c][off : off+n]
}

// at is id's key, "" when removed.
func (l *keyList) at(id uint32) string {
	r := l.refs[id]
	if r.n == 0 {
		return ""
	}
	return unsafe.String(&l.chunks[r.chunk][r.off], r.n)
}

// clear removes id's key (its bytes stay, unreferenced).
func (l *keyList) clear(id uint32) { l.refs[id].n = 0 }

// view is the list of the first n ids as it is now, for a reader outside
// the index's lock: later adds do not change it.
func (l *keyList) view(n int) keyList {
	return keyList{chunks: l.chunks[:len(l.chunks):len(l.chunks)], refs: l.refs[:n:n]}
}
