package vector

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/viterin/vek/vek32"
)

func anyTag([]byte) error { return nil }

// snapIndex is an index of n clustered vectors, some of them removed and
// the last ones still pending when pendingFrom < n.
func snapIndex(t *testing.T, o Options, vecs [][]float32, built int) *Index {
	t.Helper()
	x := New(o)
	t.Cleanup(x.Close)
	for i, v := range vecs[:built] {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	for i := 0; i < built; i += 17 {
		x.Remove(key(i))
	}
	return x
}

// pendingIndex is snapIndex of vecs[:built] with vecs[built:upto] added
// after its builder stopped: pending.
func pendingIndex(t *testing.T, o Options, vecs [][]float32, built, upto int) *Index {
	t.Helper()
	x := snapIndex(t, o, vecs, built)
	x.Close()
	for i := built; i < upto; i++ {
		x.Add(key(i), vecs[i])
	}
	return x
}

// A restored index answers every search as the one it was taken of, holds
// the same keys (removed ones removed), the same graph, and builds what
// was pending; adds after the restore work as before it.
func TestSnapshotRoundTrip(t *testing.T) {
	const n, dims = 3000, 32
	rng := rand.New(rand.NewSource(3))
	vecs := clustered(rng, n, dims, 20)
	o := Options{Dims: dims, M: 8, EfSearch: 40, EfConstruction: 32, Seed: 7}
	x := pendingIndex(t, o, vecs, 2500, 2800) // the last 300 stay pending
	var buf bytes.Buffer
	info, err := x.Snapshot(&buf, []byte("tag-1"))
	if err != nil {
		t.Fatal(err)
	}
	if info.IDs != 2800 || info.Pending != 300 || info.Removed != 148 || info.Changes != 2800+148 {
		t.Fatalf("snapshot info %+v", info)
	}

	// y's builder is stopped, to compare the graph as restored.
	y := New(o)
	y.Close()
	var tag []byte
	rinfo, err := y.Restore(bytes.NewReader(buf.Bytes()), int64(buf.Len()), func(b []byte) error { tag = b; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if string(tag) != "tag-1" || rinfo != info {
		t.Fatalf("tag %q info %+v, want tag-1 %+v", tag, rinfo, info)
	}
	if y.Len() != x.Len() || y.Changes() != x.Changes() {
		t.Fatalf("Len %d Changes %d, want %d %d", y.Len(), y.Changes(), x.Len(), x.Changes())
	}
	for i := range 2800 {
		xid, xok := x.ID(key(i))
		yid, yok := y.ID(key(i))
		if xid != yid || xok != yok {
			t.Fatalf("key %d: id %d %v, want %d %v", i, yid, yok, xid, xok)
		}
	}
	if !sameGraph(x.graph, y.graph) || y.Pending() != 300 {
		t.Fatal("the restored graph differs")
	}
	// The pending set is scanned exactly by both: the same answers.
	queries := clustered(rng, 50, dims, 20)
	for _, q := range queries {
		if a, b := x.Search(q, 10), y.Search(q, 10); !slices.Equal(a, b) {
			t.Fatalf("search differs:\n%v\n%v", a, b)
		}
	}

	// Restored with its builder running, the pending ids join the graph,
	// and adds go on.
	z := New(o)
	defer z.Close()
	if _, err := z.Restore(bytes.NewReader(buf.Bytes()), int64(buf.Len()), anyTag); err != nil {
		t.Fatal(err)
	}
	z.WaitBuilt()
	for i := 2800; i < n; i++ {
		z.Add(key(i), vecs[i])
	}
	z.WaitBuilt()
	// The graph is the one the same adds and removals give unrestored:
	// the level source goes on where the snapshot left it.
	w := snapIndex(t, o, vecs, 2500)
	for i := 2500; i < n; i++ {
		w.Add(key(i), vecs[i])
	}
	w.WaitBuilt()
	w.gmu.RLock()
	z.gmu.RLock()
	same := sameGraph(z.graph, w.graph)
	z.gmu.RUnlock()
	w.gmu.RUnlock()
	if !same {
		t.Fatal("the restored index, built on, is not the index never restored")
	}
	for _, q := range queries {
		if a, b := z.Search(q, 10), w.Search(q, 10); !slices.Equal(a, b) {
			t.Fatalf("search differs from the index never restored:\n%v\n%v", a, b)
		}
	}
	if _, ok := z.ID(key(17)); ok {
		t.Fatal("a removed key came back")
	}
}

// Any damaged byte, a truncation, or other parameters make Restore refuse
// the snapshot with ErrSnapshot and leave the index empty and usable.
func TestSnapshotRefused(t *testing.T) {
	const dims = 16
	vecs := clustered(rand.New(rand.NewSource(4)), 400, dims, 5)
	o := Options{Dims: dims, M: 6, EfConstruction: 20, Seed: 1}
	x := snapIndex(t, o, vecs, 400)
	var buf bytes.Buffer
	if _, err := x.Snapshot(&buf, []byte("t")); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	try := func(name string, b []byte, o Options) {
		t.Helper()
		y := New(o)
		defer y.Close()
		if _, err := y.Restore(bytes.NewReader(b), int64(len(b)), anyTag); !errors.Is(err, ErrSnapshot) {
			t.Fatalf("%s: err %v, want ErrSnapshot", name, err)
		}
		if y.Len() != 0 || y.Pending() != 0 {
			t.Fatalf("%s: the index is not empty after a refused restore", name)
		}
		y.Add("a", vecs[0])
		if h := y.Search(vecs[0], 1); len(h) != 1 || h[0].Key != "a" {
			t.Fatalf("%s: the index is unusable after a refused restore: %v", name, h)
		}
	}
	rng := rand.New(rand.NewSource(9))
	for range 40 {
		b := slices.Clone(good)
		i := rng.Intn(len(b))
		b[i] ^= byte(1 + rng.Intn(255))
		try("a flipped byte", b, o)
	}
	for _, cut := range []int{0, 5, 40, len(good) / 2, len(good) - 1} {
		try("truncated", good[:cut], o)
	}
	try("a byte more", append(slices.Clone(good), 0), o)
	// A tag its caller refuses: its error, the index empty.
	y := New(o)
	defer y.Close()
	refuse := errors.New("another store")
	if _, err := y.Restore(bytes.NewReader(good), int64(len(good)), func([]byte) error { return refuse }); err != refuse || y.Len() != 0 {
		t.Fatalf("a refused tag: err %v, Len %d", err, y.Len())
	}
	for _, other := range []Options{
		{Dims: dims, M: 7, EfConstruction: 20, Seed: 1},
		{Dims: dims, M: 6, EfConstruction: 21, Seed: 1},
		{Dims: dims, M: 6, EfConstruction: 20, Seed: 2},
	} {
		try("other parameters", good, other)
	}
	// Into an index that is not empty: refused, the index untouched.
	if _, err := x.Restore(bytes.NewReader(good), int64(len(good)), anyTag); err == nil {
		t.Fatal("a restore into a full index")
	}
	if x.Len() != 400-24 {
		t.Fatalf("Len %d after a refused restore", x.Len())
	}
}

// A snapshot taken while adds, removes and the builder run holds every
// key added before it was called, and restores to a consistent graph.
func TestSnapshotDuringWrites(t *testing.T) {
	const n, dims = 3000, 16
	vecs := clustered(rand.New(rand.NewSource(6)), n, dims, 10)
	o := Options{Dims: dims, M: 6, EfConstruction: 20, Seed: 1}
	x := New(o)
	defer x.Close()
	for i := range 1000 {
		x.Add(key(i), vecs[i])
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1000; i < n; i++ {
			x.Add(key(i), vecs[i])
			if i%50 == 0 {
				x.Remove(key(i - 500))
			}
		}
	}()
	var buf bytes.Buffer
	if _, err := x.Snapshot(&buf, nil); err != nil {
		t.Fatal(err)
	}
	<-done
	y := New(o)
	defer y.Close()
	if _, err := y.Restore(bytes.NewReader(buf.Bytes()), int64(buf.Len()), anyTag); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if _, ok := y.ID(key(i)); !ok && i%50 != 0 {
			t.Fatalf("key %d, added before the snapshot, is missing", i)
		}
	}
	y.WaitBuilt()
	for _, v := range vecs[:20] {
		if len(y.Search(v, 5)) != 5 {
			t.Fatal("a search of the restored index came back short")
		}
	}
}

// snapFile writes x's snapshot (of the version given, with the packs of
// runs from version 4) to a file and returns its path.
func snapFile(t *testing.T, x *Index, version int, runs ...Run) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "index.snap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := x.snapshot(f, []byte("tag"), version, runs); err != nil {
		t.Fatal(err)
	}
	return path
}

// restoreFile restores the snapshot at path into a new index.
func restoreFile(t *testing.T, o Options, path string) (*Index, SnapshotInfo, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the mapping outlives the file
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	y := New(o)
	t.Cleanup(y.Close)
	info, err := y.Restore(f, fi.Size(), anyTag)
	return y, info, err
}

// Unmap stops the builder first: a restored index's builder inserting
// what the snapshot left pending never reads records Unmap has dropped
// (a caller that unmapped before Close crashed the builder, once in many
// runs, with an index out of range).
func TestUnmapWhileBuilding(t *testing.T) {
	const n, dims = 2000, 16
	rng := rand.New(rand.NewSource(5))
	vecs := clustered(rng, n, dims, 10)
	o := Options{Dims: dims, M: 8, EfSearch: 40, EfConstruction: 32, Seed: 7}
	path := snapFile(t, pendingIndex(t, o, vecs, 200, n), SnapshotVersion)
	for range 50 {
		y, info, err := restoreFile(t, o, path)
		if err != nil || info.Pending != n-200 {
			t.Fatalf("restore: %v, %d pending", err, info.Pending)
		}
		if err := y.Unmap(); err != nil || y.Len() != 0 {
			t.Fatalf("Unmap: %v, %d keys", err, y.Len())
		}
		if len(y.Search(vecs[0], 5)) != 0 || y.Pending() != 0 {
			t.Fatal("an unmapped index answered")
		}
	}
}

// Restored from a file, the quantised records are mapped and the float32
// vectors read from the file (the last, partial chunk of each copied): the index answers as the one it was taken of, removals and
// adds change the process's copy and never the file, and a snapshot of
// the restored index restores alike. Version 2 (no aliases) is still
// read, and version 1 (no padding either), into the heap.
func TestSnapshotMappedFromFile(t *testing.T) {
	const n, dims = 1000, 32 // 3 whole chunks and a partial one
	rng := rand.New(rand.NewSource(5))
	vecs := clustered(rng, n+100, dims, 10)
	o := Options{Dims: dims, M: 8, EfConstruction: 32, Seed: 3, HeapVectors: -1}
	x := snapIndex(t, o, vecs, n)
	queries := clustered(rng, 30, dims, 10)
	same := func(what string, a, b *Index) {
		t.Helper()
		for _, q := range queries {
			if ha, hb := a.Search(q, 10), b.Search(q, 10); !slices.Equal(ha, hb) {
				t.Fatalf("%s: search differs:\n%v\n%v", what, ha, hb)
			}
		}
	}
	for _, version := range []int{1, 2, 3} {
		path := snapFile(t, x, version)
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		y, info, err := restoreFile(t, o, path)
		if err != nil {
			t.Fatalf("version %d: %v", version, err)
		}
		if want := int64(n * (dims + scaleBytes)); version > 1 && info.Mapped != want || version == 1 && info.Mapped != 0 || info.Version != version {
			t.Fatalf("version %d: %d bytes mapped, want %d", version, info.Mapped, want)
		}
		same(fmt.Sprintf("version %d", version), x, y)

		// Removed, added to: the file stays as written.
		y.Remove(key(1))
		y.Remove(key(900))
		for i := n; i < n+100; i++ {
			y.Add(key(i), vecs[i])
		}
		y.WaitBuilt()
		if v, ok := y.Lookup(key(2)); !ok || !slices.Equal(v, vecs[2]) {
			t.Fatalf("version %d: key 2's vector %v", version, v)
		}
		if after, err := os.ReadFile(path); err != nil || !bytes.Equal(before, after) {
			t.Fatalf("version %d: the snapshot file changed under the restored index (%v)", version, err)
		}
		z, _, err := restoreFile(t, o, snapFile(t, y, SnapshotVersion))
		if err != nil {
			t.Fatalf("version %d, snapshot of the restored index: %v", version, err)
		}
		if _, ok := z.ID(key(900)); ok || z.Len() != y.Len() {
			t.Fatalf("version %d: the restored index's snapshot has %d keys (want %d), key 900 %v", version, z.Len(), y.Len(), ok)
		}
		same(fmt.Sprintf("version %d, its snapshot", version), y, z)
		// Unmapped (at close), a mapped index is empty, not a fault; one
		// read into the heap (version 1) is left as it is.
		y.Close()
		if err := y.Unmap(); err != nil || version > 1 && (y.Len() != 0 || len(y.Search(queries[0], 5)) != 0) {
			t.Fatalf("version %d: after Unmap: %v, %d keys", version, err, y.Len())
		}
	}
}

// A damaged byte anywhere in a file, the mapped vectors included (summed
// on another core), a truncated file or one with a byte more, makes the
// restore refuse it.
func TestSnapshotFileRefused(t *testing.T) {
	const dims = 16
	vecs := clustered(rand.New(rand.NewSource(8)), 600, dims, 5)
	o := Options{Dims: dims, M: 6, EfConstruction: 20, Seed: 1, HeapVectors: -1}
	for _, version := range []int{2, SnapshotVersion} {
		path := snapFile(t, snapIndex(t, o, vecs, 600), version)
		good, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewSource(2))
		for k := range 32 {
			b := slices.Clone(good)
			switch k {
			case 30:
				b = b[:len(b)-1-rng.Intn(5000)]
			case 31:
				b = append(b, 0)
			default:
				// Half of them in the vectors, the last two thirds of the file.
				i := rng.Intn(len(b))
				if rng.Intn(2) == 0 {
					i = len(b)/3 + rng.Intn(len(b)*2/3)
				}
				b[i] ^= byte(1 + rng.Intn(255))
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			y, _, err := restoreFile(t, o, path)
			if !errors.Is(err, ErrSnapshot) || y.Len() != 0 {
				t.Fatalf("version %d, case %d (%d of %d bytes): err %v, %d keys", version, k, len(b), len(good), err, y.Len())
			}
		}
	}
}

// Restored from a file, the float32 vectors are read from it when needed,
// never mapped (the quantised records are): after searches, exact scans
// and removals no part of the process's address space maps them, and the
// index goes on exactly as the one it was taken of given the same
// removals and adds — its searches, its graph (equal vectors as aliases,
// a removed representative's vector zero) and the snapshot it writes,
// byte for byte.
func TestRestoredFloatsAreReadNotMapped(t *testing.T) {
	const n, dims = 2100, 32 // 8 whole chunks (of 32 KB: 8 pages each) and a partial one
	vecs := clustered(rand.New(rand.NewSource(11)), n+200, dims, 10)
	for i := 40; i < 60; i++ {
		vecs[i] = vecs[30] // aliases of 30
	}
	for i := n; i < n+10; i++ {
		vecs[i] = vecs[1000] // aliases of a vector of the file, added after
	}
	for _, heap := range []int64{-1, 0} {
		t.Run(fmt.Sprintf("HeapVectors=%d", heap), func(t *testing.T) {
			restoredLikeBuilt(t, vecs, n, dims, Options{Dims: dims, M: 6, EfConstruction: 20, Seed: 1, HeapVectors: heap})
		})
	}
}

// restoredLikeBuilt builds an index of vecs[:n], restores its snapshot
// into another and checks that both go on alike (as above).
func restoredLikeBuilt(t *testing.T, vecs [][]float32, n, dims int, o Options) {
	rng := rand.New(rand.NewSource(12))
	x := New(o)
	defer x.Close()
	for i, v := range vecs[:n] {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	path := snapFile(t, x, SnapshotVersion)
	y, info, err := restoreFile(t, o, path)
	if err != nil || info.Mapped != int64(n*(dims+scaleBytes)) {
		t.Fatalf("restore: %v, %d bytes mapped", err, info.Mapped)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	qvAt := fi.Size() - 4 - int64(n*(dims+scaleBytes))
	vecsAt := qvAt - int64(n*dims*4+snapAlign-1)/snapAlign*snapAlign
	// The same removals and adds on both: a removed vector of the file
	// (0: two in a page; 700: alone in its page), one in the partial
	// chunk (2099), the representative of aliases (30), one of them (45),
	// and the representative of the vectors added after (1000).
	queries := clustered(rng, 40, dims, 10)
	queries = append(queries, vecs[30], vecs[1000], vecs[2099])
	for _, z := range []*Index{x, y} {
		for _, i := range []int{0, 1, 700, 2099, 30, 45, 1000} {
			if !z.Remove(key(i)) {
				t.Fatalf("key %d not removed", i)
			}
		}
		for i := n; i < n+200; i++ {
			z.Add(key(i), vecs[i])
		}
		z.WaitBuilt()
	}
	alike(t, x, y, queries, n+200)
	// A vector of the file is read into the scans' scratch, not copied: a
	// copy is an allocation a call. Under the race detector sync.Pool drops
	// a quarter of what it is given, so one call in four makes a new
	// scratch (two allocations: half one a call, measured), and other
	// goroutines' allocations count too: over 100 calls they reached one a
	// call now and then (CI, stop 96); over 10,000 they stay far under it.
	k3 := key(3)
	if allocs := testing.AllocsPerRun(10_000, func() { y.Dot(k3, queries[0]) }); allocs != 0 {
		t.Fatalf("Dot with a vector of the file: %v allocations", allocs)
	}

	// Nothing maps the float32 vectors (where /proc tells).
	for _, r := range fileMappings(t, path) {
		if r[0] < vecsAt+int64(n*dims*4) && vecsAt < r[1] {
			t.Fatalf("bytes %d–%d of the snapshot mapped; its float32 vectors are %d–%d", r[0], r[1], vecsAt, vecsAt+int64(n*dims*4))
		}
	}
	// The file's vectors are the open file's: replaced at its path (as
	// the next snapshot replaces it), the index reads the one it restored.
	if err := os.Rename(snapFile(t, x, 1), path); err != nil {
		t.Fatal(err)
	}
	for _, q := range queries {
		if a, b := x.Search(q, 10), y.Search(q, 10); !slices.Equal(a, b) {
			t.Fatalf("search differs after the file was replaced:\n%v\n%v", a, b)
		}
	}
	y.Close()
	if err := y.Unmap(); err != nil || y.Len() != 0 {
		t.Fatalf("Unmap: %v, %d keys", err, y.Len())
	}
}

// alike checks that x and y, whose keys are key(0)..key(keys-1), answer
// every query's searches (k 1, 10, 50; among every other id) alike, hold
// the same vectors and graph, and write the same snapshot.
func alike(t *testing.T, x, y *Index, queries [][]float32, keys int) {
	t.Helper()
	ids := make([]uint64, 0, keys/2+1)
	for id := uint64(0); id < uint64(keys); id += 2 {
		ids = append(ids, id)
	}
	for _, q := range queries {
		for _, k := range []int{1, 10, 50} {
			if a, b := x.Search(q, k), y.Search(q, k); !slices.Equal(a, b) {
				t.Fatalf("search for %d differs:\n%v\n%v", k, a, b)
			}
		}
		if a, b := x.SearchAmong(q, Unnamed(ids), 10), y.SearchAmong(q, Unnamed(ids), 10); !slices.Equal(a, b) {
			t.Fatalf("SearchAmong differs:\n%v\n%v", a, b)
		}
	}
	for i := range keys {
		id, ok := x.ID(key(i))
		if !ok {
			id = uint64(i) // a removed key's id is its place in the order
		}
		if a, b := x.Vector(id, nil), y.Vector(id, nil); !slices.Equal(a, b) {
			t.Fatalf("vector %d: %v, want %v", i, b, a)
		}
		a, aok := x.Lookup(key(i))
		if b, bok := y.Lookup(key(i)); aok != bok || !slices.Equal(a, b) {
			t.Fatalf("Lookup of %d: %v %v, want %v %v", i, b, bok, a, aok)
		}
		for _, q := range queries[:3] {
			want := float32(0)
			if aok {
				want = vek32.Dot(q, a)
			}
			for _, z := range []*Index{x, y} {
				if got, ok := z.Dot(key(i), q); ok != aok || got != want {
					t.Fatalf("Dot with %d: %v %v, want %v %v", i, got, ok, want, aok)
				}
				// ApproxDotID: as Dot, within the error the screen of
				// exactAmong bounds (its int8 records); a removed id's
				// vector is zero.
				qq := z.Quantize(q)
				got, ok := z.ApproxDotID(id, qq)
				bound := float32(0)
				if aok {
					ea, eb := quantError(q, qq.q, qq.scale)
					bound = ea*recordScale(z.qv.at(uint32(id))[z.dims:]) + eb
				}
				if !ok || float32(math.Abs(float64(got-want))) > bound {
					t.Fatalf("ApproxDotID with %d (id %d): %v %v, want %v (± %v)", i, id, got, ok, want, bound)
				}
			}
		}
	}
	if _, ok := x.ApproxDotID(uint64(x.IDs()), x.Quantize(queries[0])); ok {
		t.Fatal("ApproxDotID of an id never given out answered")
	}
	x.gmu.RLock()
	y.gmu.RLock()
	same := sameGraph(x.graph, y.graph)
	y.gmu.RUnlock()
	x.gmu.RUnlock()
	if !same {
		t.Fatal("the graphs differ")
	}
	a, err := os.ReadFile(snapFile(t, x, SnapshotVersion))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(snapFile(t, y, SnapshotVersion))
	if err != nil || !bytes.Equal(a, b) {
		t.Fatalf("the snapshots differ (%v)", err)
	}
}

// fileMappings is the byte ranges of the file at path that the process
// maps, from /proc/self/maps (the test is skipped where there is none).
func fileMappings(t *testing.T, path string) [][2]int64 {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	var out [][2]int64
	for _, line := range strings.Split(string(maps), "\n") {
		// start-end perms offset dev inode path
		f := strings.Fields(line)
		if len(f) < 6 || f[5] != path {
			continue
		}
		var lo, hi, off int64
		if _, err := fmt.Sscanf(f[0]+" "+f[2], "%x-%x %x", &lo, &hi, &off); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, [2]int64{off, off + hi - lo})
	}
	if len(out) == 0 {
		t.Fatalf("no mapping of %s in /proc/self/maps: the quantised records are mapped", path)
	}
	return out
}

// BenchmarkSearchRestored measures Search on an index of 20,000 clustered
// 384-dim vectors as built (float32 vectors in the heap) and as restored
// from a snapshot file (read from it for each re-rank, floats.go).
func BenchmarkSearchRestored(b *testing.B) {
	const n, dims, queries = 20_000, 384, 200
	rng := rand.New(rand.NewSource(1))
	vecs := clustered(rng, n+queries, dims, 50)
	o := Options{Dims: dims, Seed: 1, HeapVectors: -1}
	x := New(o)
	defer x.Close()
	for i, v := range vecs[:n] {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	path := filepath.Join(b.TempDir(), "index.snap")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := x.Snapshot(f, nil); err != nil {
		b.Fatal(err)
	}
	f.Close()
	f, err = os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	fi, _ := f.Stat()
	y := New(o)
	defer y.Close()
	if _, err := y.Restore(f, fi.Size(), anyTag); err != nil {
		b.Fatal(err)
	}
	f.Close()
	for _, c := range []struct {
		name string
		x    *Index
	}{{"heap", x}, {"file", y}} {
		b.Run(c.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				c.x.Search(vecs[n+i%queries], 10)
				i++
			}
		})
	}
}

// searchWhile calls search(0), search(1), … on another goroutine until
// the stop it returns is called (for -race: reads while the index changes).
func searchWhile(search func(c int)) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for c := 0; ; c++ {
			select {
			case <-quit:
				return
			default:
			}
			search(c)
		}
	}()
	return func() { close(quit); <-done }
}

// adopt writes x's snapshot to a file and has x read its float32
// vectors from there (AdoptFloats), returning what it freed.
func adopt(t *testing.T, x *Index) (string, int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "index.snap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the index keeps a handle of its own
	info, err := x.Snapshot(f, []byte("tag"))
	if err != nil {
		t.Fatal(err)
	}
	freed, err := x.AdoptFloats(f, info)
	if err != nil {
		t.Fatal(err)
	}
	return path, freed
}

// An index that adopted its snapshot's float32 vectors goes on as one
// that kept them in the heap: the same searches, vectors, graph and
// snapshots through removals and adds, searches meanwhile; a second
// adoption moves the chunks filled since, and Unmap closes the file the
// first one read if a copy still holds it. Under HeapVectors nothing
// moves.
func TestAdoptedFloatsLikeHeap(t *testing.T) {
	const n, dims = 2100, 32 // 8 whole chunks and a partial one
	o := Options{Dims: dims, M: 6, EfConstruction: 20, Seed: 1, HeapVectors: -1}
	vecs := clustered(rand.New(rand.NewSource(21)), n+500, dims, 10)
	for i := 40; i < 60; i++ {
		vecs[i] = vecs[30] // aliases of 30
	}
	x, y := New(o), New(o)
	defer x.Close()
	defer y.Close()
	for _, z := range []*Index{x, y} {
		for i, v := range vecs[:n] {
			z.Add(key(i), v)
		}
		z.WaitBuilt()
		z.Remove(key(3)) // removed before the snapshot
	}
	queries := clustered(rand.New(rand.NewSource(22)), 40, dims, 10)
	queries = append(queries, vecs[30], vecs[1000], vecs[2099])

	stop := searchWhile(func(c int) { // while the floats are replaced
		y.Search(queries[c%len(queries)], 10)
		y.Vector(uint64(c%n), nil)
	})
	_, freed := adopt(t, y)
	stop()
	if want := int64(8 << chunkBits * dims * 4); freed != want {
		t.Fatalf("freed %d bytes, want the 8 whole chunks' %d", freed, want)
	}
	y.kmu.RLock()
	inHeap := []bool{y.vecs.inHeap(0), y.vecs.inHeap(8<<chunkBits - 1), y.vecs.inHeap(8 << chunkBits)}
	y.kmu.RUnlock()
	if !slices.Equal(inHeap, []bool{false, false, true}) {
		t.Fatalf("in the heap (first id, last of the whole chunks, the partial chunk's first): %v", inHeap)
	}

	for _, z := range []*Index{x, y} {
		for _, i := range []int{0, 700, 2099, 30, 45} {
			if !z.Remove(key(i)) {
				t.Fatalf("key %d not removed", i)
			}
		}
		for i := n; i < n+500; i++ {
			z.Add(key(i), vecs[i])
		}
		z.WaitBuilt()
	}
	first := y.vecs.file // held: Unmap closes it though it is retired
	if _, freed := adopt(t, y); freed != int64(2<<chunkBits*dims*4) {
		t.Fatalf("the second adoption freed %d bytes, want the two chunks filled since", freed)
	}
	if y.vecs.file == first {
		t.Fatal("the second adoption kept the first file")
	}
	alike(t, x, y, queries, n+500)

	y.Close()
	if err := y.Unmap(); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("the first adopted file after Unmap: %v, want it closed", err)
	}

	// Under HeapVectors the vectors stay where a restore would read them.
	z := New(Options{Dims: dims, M: 6, EfConstruction: 20, Seed: 1})
	defer z.Close()
	for i, v := range vecs[:n] {
		z.Add(key(i), v)
	}
	if _, freed := adopt(t, z); freed != 0 || !z.vecs.inHeap(0) {
		t.Fatalf("freed %d bytes of a store under HeapVectors", freed)
	}
}

// A snapshot that holds a key twice, its checksum right, is refused
// (ErrSnapshot), the index left empty: two ids would be one memory's.
func TestSnapshotWithAKeyTwiceRefused(t *testing.T) {
	const dims = 16
	vecs := clustered(rand.New(rand.NewSource(5)), 50, dims, 3)
	o := Options{Dims: dims, M: 6, EfConstruction: 20, Seed: 1}
	x := New(o)
	defer x.Close()
	for i, v := range vecs {
		k := key(i)
		switch i {
		case 10:
			k = "keyAAAAAAAA"
		case 20:
			k = "keyBBBBBBBB"
		}
		x.Add(k, v)
	}
	x.WaitBuilt()
	var buf bytes.Buffer
	if _, err := x.Snapshot(&buf, []byte("t")); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if n := bytes.Count(b, []byte("keyBBBBBBBB")); n != 1 {
		t.Fatalf("the snapshot holds the key %d times", n)
	}
	b = bytes.Replace(b, []byte("keyBBBBBBBB"), []byte("keyAAAAAAAA"), 1)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	y := New(o)
	defer y.Close()
	if _, err := y.Restore(bytes.NewReader(b), int64(len(b)), anyTag); !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a key twice: err %v, want ErrSnapshot for a key twice", err)
	}
	if y.Len() != 0 {
		t.Fatalf("Len %d after the refused restore", y.Len())
	}
}
