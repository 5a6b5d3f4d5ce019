package assoc

import "math/bits"

// targetIndex finds a target among a list's few dozen by a hash of its
// CID's last eight bytes (a digest's: random), in a small open-addressed
// table, then checks the whole CID. Merging a list's buffered
// strengthening into it (buffer.merged) and applying it in a flush
// (List.each) compared each partner with every link by its CID's string:
// at 100k memories under 16 clients' recalls, 2–3% of the CPU (issue 15,
// stop 57).
//
// Positions are the caller's (its list's indexes), and so is the check
// of the CID at one (same). A target added twice keeps its first
// position, where a scan from the front finds it.
type targetIndex struct {
	slots []indexSlot
	shift uint
	n     int
}

type indexSlot struct {
	hash uint64
	at   int32 // the position + 1; 0: empty
}

// indexRoom is the table a targetIndex of a list of MaxLinks and
// maxDeltas new partners needs (half full at most), for the caller's
// stack.
type indexRoom [256]indexSlot

// newTargetIndex is an empty index for up to n targets, in room when it
// is large enough (a value, so that room may stay on the caller's stack).
func newTargetIndex(n int, room *indexRoom) targetIndex {
	size := 16
	for size < 2*n {
		size *= 2
	}
	if size <= len(room) {
		return emptyIndex(room[:size])
	}
	return emptyIndex(make([]indexSlot, size))
}

// emptyIndex is an index in slots, whose size is a power of two.
func emptyIndex(slots []indexSlot) targetIndex {
	clear(slots)
	return targetIndex{slots: slots, shift: uint(64 - bits.TrailingZeros(uint(len(slots))))}
}

// targetHash is the hash of a CID's binary form: its last eight bytes
// (all of a short one's) spread over the table's bits.
func targetHash[C string | []byte](c C) uint64 {
	var h uint64
	for i := max(0, len(c)-8); i < len(c); i++ {
		h = h<<8 | uint64(c[i])
	}
	return (h ^ uint64(len(c))) * 0x9e3779b97f4a7c15
}

// findOrAdd returns the position of the target of hash h (same: whether
// the one at a position is it), or records it at position next when x
// has none and returns next, added — one walk of the table for both,
// growing it past half full.
func (x *targetIndex) findOrAdd(h uint64, next int, same func(at int) bool) (at int, added bool) {
	at, free := x.probe(h, same)
	if at >= 0 {
		return at, false
	}
	if 2*(x.n+1) > len(x.slots) {
		old := x.slots // maybe the caller's room: the new table is not
		*x = emptyIndex(make([]indexSlot, 2*len(old)))
		for _, s := range old {
			if s.at != 0 {
				x.slots[x.freeSlot(s.hash)] = s
				x.n++
			}
		}
		free = x.freeSlot(h)
	}
	x.slots[free] = indexSlot{h, int32(next + 1)}
	x.n++
	return next, true
}

// probe walks the table from h's slot: the position of the target of
// hash h (same: whether the one at a position is it), or -1 and the empty
// slot where the walk ended.
func (x *targetIndex) probe(h uint64, same func(at int) bool) (at int, free uint64) {
	for i := h >> x.shift; ; i = (i + 1) & uint64(len(x.slots)-1) {
		s := x.slots[i]
		if s.at == 0 {
			return -1, i
		}
		if s.hash == h && same(int(s.at-1)) {
			return int(s.at - 1), i
		}
	}
}

// freeSlot is the first empty slot from h's.
func (x *targetIndex) freeSlot(h uint64) uint64 {
	i := h >> x.shift
	for x.slots[i].at != 0 {
		i = (i + 1) & uint64(len(x.slots)-1)
	}
	return i
}
