package vector

import (
	"math/rand"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
)

// spillBlocks is the bytes of disk the spill file of x takes.
func spillBlocks(t *testing.T, x *Index) int64 {
	t.Helper()
	x.kmu.RLock()
	f := x.vecs.spill
	x.kmu.RUnlock()
	if f == nil {
		return 0
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

// An index whose heap holds two chunks of vectors moves the older ones to
// its spill file once the graph holds them, and goes on as one that keeps
// them all in the heap: the same searches (a small set's exact scan too),
// vectors, graph and snapshots, through removals of vectors in the heap
// and in the spill, searches meanwhile; a snapshot's adoption frees the
// spill's blocks of the vectors it holds, and spilling goes on past it.
// While SpillRoom refuses, the heap keeps them.
func TestSpilledFloatsLikeHeap(t *testing.T) {
	const n, dims = 2100, 32 // 8 whole chunks and a partial one
	cb := int64(dims) << chunkBits * 4
	vecs := clustered(rand.New(rand.NewSource(31)), n+700, dims, 10)
	for i := 40; i < 60; i++ {
		vecs[i] = vecs[30] // aliases of 30
	}
	var room atomic.Bool
	o := Options{Dims: dims, M: 6, EfConstruction: 20, Seed: 1}
	x := New(o)
	defer x.Close()
	o.HeapVectors, o.SpillDir = 2*cb, t.TempDir()
	o.SpillRoom = func(n int64) bool { return n == cb && room.Load() }
	y := New(o)
	defer y.Close()
	queries := clustered(rand.New(rand.NewSource(32)), 40, dims, 10)
	queries = append(queries, vecs[30], vecs[1000], vecs[2099])
	small := []uint64{2, 5, 300, 301, 1500, 2050} // an exact scan's set, mostly spilled

	add := func(from, to int) {
		for _, z := range []*Index{x, y} {
			for i := from; i < to; i++ {
				z.Add(key(i), vecs[i])
			}
			z.WaitBuilt()
			for i := from; i < to; i += 97 {
				z.Remove(key(i / 2)) // in the heap or out of it
			}
		}
	}
	check := func(keys int) {
		t.Helper()
		alike(t, x, y, queries, keys)
		for _, q := range queries {
			if a, b := x.SearchAmong(q, Unnamed(small), 3), y.SearchAmong(q, Unnamed(small), 3); !slices.Equal(a, b) {
				t.Fatalf("SearchAmong a small set differs:\n%v\n%v", a, b)
			}
		}
	}

	add(0, 1000)
	if heap, spilled, err := y.FloatBytes(); heap != 4*cb || spilled != 0 || err != nil {
		t.Fatalf("refused room: %d bytes in the heap, %d spilled (%v); want all 4 chunks in the heap", heap, spilled, err)
	}
	room.Store(true)

	stop := searchWhile(func(c int) { // while chunks leave the heap
		y.Search(queries[c%len(queries)], 10)
		y.SearchAmong(queries[c%len(queries)], Unnamed(small[:4]), 3) // ids added so far
		y.Vector(uint64(c%1000), nil)
	})
	add(1000, n)
	stop()
	// 9 chunks: the last (partial) and the one before stay.
	if heap, spilled, err := y.FloatBytes(); heap != 2*cb || spilled != 7*cb || err != nil {
		t.Fatalf("%d bytes in the heap, %d spilled (%v); want 2 and 7 chunks", heap, spilled, err)
	}
	if b := spillBlocks(t, y); b < 7*cb {
		t.Fatalf("the spill file takes %d bytes of disk, want at least 7 chunks' %d", b, 7*cb)
	}
	check(n)
	// LookupInto reads one out of the heap into the buffer given, and gives
	// one in the heap as it is.
	buf := make([]float32, dims)
	for _, i := range []int{7, n - 1} {
		want, _ := x.Lookup(key(i))
		got, ok := y.LookupInto(key(i), buf)
		if inBuf := &got[0] == &buf[0]; !ok || !slices.Equal(got, want) || inBuf != (i < 7<<chunkBits) {
			t.Fatalf("LookupInto of %d: %v, in the buffer %v", i, ok, inBuf)
		}
	}

	// A snapshot of every id: its file holds the 8 whole chunks; the
	// spill is emptied.
	if _, freed := adopt(t, y); freed != cb {
		t.Fatalf("the adoption freed %d bytes of heap, want the one whole chunk in it", freed)
	}
	if heap, spilled, _ := y.FloatBytes(); heap != cb || spilled != 0 || spillBlocks(t, y) != 0 {
		t.Fatalf("after the adoption: %d bytes in the heap, %d spilled, %d on disk; want the partial chunk in the heap", heap, spilled, spillBlocks(t, y))
	}
	check(n)

	add(n, n+700) // 11 chunks: the file's 8, then the spill's 1
	if heap, spilled, err := y.FloatBytes(); heap != 2*cb || spilled != cb || err != nil {
		t.Fatalf("after the adoption, %d bytes in the heap, %d spilled (%v); want 2 chunks and 1", heap, spilled, err)
	}
	check(n + 700)
}

// A spill that cannot be written leaves the vectors in the heap and says
// why; the index goes on.
func TestSpillFailure(t *testing.T) {
	const n, dims = 1100, 16
	cb := int64(dims) << chunkBits * 4
	vecs := clustered(rand.New(rand.NewSource(41)), n, dims, 5)
	x := New(Options{Dims: dims, M: 6, EfConstruction: 20, Seed: 1, HeapVectors: cb,
		SpillDir: filepath.Join(t.TempDir(), "gone")})
	defer x.Close()
	for i, v := range vecs {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	heap, spilled, err := x.FloatBytes()
	if heap != 5*cb || spilled != 0 || err == nil {
		t.Fatalf("%d bytes in the heap, %d spilled, error %v; want every chunk in the heap and an error", heap, spilled, err)
	}
	if hits := x.Search(vecs[7], 1); len(hits) != 1 || hits[0].Key != key(7) {
		t.Fatalf("search after the failure: %v", hits)
	}
}
