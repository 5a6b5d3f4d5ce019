package text

import "unsafe"

// pool holds runs of values in chunks that never move, each run named by
// a ref: its chunk (the high 16 bits) and its place there (the low 16). A
// slot refers to its id, sonas, terms and frequencies by refs, so that
// the slots hold no pointer: at 1M documents their slices and strings
// made a slot 104 bytes, 104 MB the collector marked at every cycle (a
// slot is 32 bytes now, which it does not look into). A run's values are never changed once added; a
// run replaced (a slot's sonas) or dropped (a removed document) is left
// in its chunk until the slots are compacted (compactSlots), which adds
// the live runs to new pools.
type pool[T any] struct {
	chunks [][]T
}

// chunkLen is a chunk's length: a run longer than it has a chunk of its
// own.
const chunkLen = 1 << 16

// add adds vals as one run and returns its ref.
func (p *pool[T]) add(vals []T) uint32 {
	ref, run := p.grow(len(vals))
	copy(run, vals)
	return ref
}

// grow adds a run of n zero values and returns its ref and the run, for
// the caller to fill before it is read.
func (p *pool[T]) grow(n int) (uint32, []T) {
	last := len(p.chunks)
	if last == 0 || len(p.chunks[last-1])+n > cap(p.chunks[last-1]) {
		if last == 1<<16 {
			panic("text: a pool of 65,536 chunks is full") // 4G values: past any memory here
		}
		p.chunks = append(p.chunks, make([]T, 0, max(chunkLen, n)))
		last++
	}
	c := &p.chunks[last-1]
	at := len(*c)
	*c = (*c)[:at+n]
	return uint32(last-1)<<16 | uint32(at), (*c)[at : at+n : at+n]
}

// get is the run of n values at ref, with no room past its end.
func (p *pool[T]) get(ref uint32, n uint32) []T {
	c := p.chunks[ref>>16]
	at := ref & (chunkLen - 1)
	return c[at : at+n : at+n]
}

// str is the run of n bytes at ref as a string, sharing its bytes (which
// never change).
func str(p *pool[byte], ref, n uint32) string {
	if n == 0 {
		return ""
	}
	b := p.get(ref, n)
	return unsafe.String(unsafe.SliceData(b), n)
}
