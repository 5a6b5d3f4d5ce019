package text

import (
	"slices"
	"testing"
	"unsafe"
)

// used is how many values a pool's chunks hold.
func used[T any](p *pool[T]) int {
	n := 0
	for _, c := range p.chunks {
		n += len(c)
	}
	return n
}

// Runs come back as added, with no room past them, as more are added —
// one longer than a chunk in a chunk of its own, a run that does not fit
// in what a chunk has left in the next —, and their chunks never move.
func TestPoolRuns(t *testing.T) {
	var p pool[uint32]
	type run struct {
		ref  uint32
		vals []uint32
	}
	var runs []run
	next := uint32(0)
	add := func(n int) {
		vals := make([]uint32, n)
		for i := range vals {
			vals[i] = next
			next++
		}
		runs = append(runs, run{p.add(vals), vals})
	}
	for _, n := range []int{3, 0, chunkLen - 4, 2, chunkLen + 5, 1, 7} {
		add(n)
	}
	first := &p.get(runs[0].ref, 3)[0]
	for i := range 1000 {
		add(i % 50)
	}
	for i, r := range runs {
		got := p.get(r.ref, uint32(len(r.vals)))
		if !slices.Equal(got, r.vals) || cap(got) != len(got) {
			t.Fatalf("run %d at %#x: %d values (room for %d), want %d", i, r.ref, len(got), cap(got), len(r.vals))
		}
	}
	if &p.get(runs[0].ref, 3)[0] != first {
		t.Fatal("a chunk moved")
	}
	if got := runs[4].ref; got&(chunkLen-1) != 0 {
		t.Fatalf("a run longer than a chunk at %#x, not at the start of its own", got)
	}
	var s pool[byte]
	ref := s.add([]byte("bafy-document"))
	if got := str(&s, ref, 13); got != "bafy-document" || unsafe.StringData(got) != &s.chunks[0][0] || str(&s, ref, 0) != "" {
		t.Fatalf("str: %q", got)
	}
}
