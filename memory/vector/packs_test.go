package vector

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/memoria-ai/memoria/internal/clock"
)

// sonaRuns deals ids 0..n-1 out to sonas in turn, as a store of that many
// sonas gives out its memories' ids.
func sonaRuns(n, sonas int) []Run {
	runs := make([]Run, sonas)
	for i := range runs {
		runs[i].Name = "sona" + strconv.Itoa(i)
	}
	for id := range n {
		r := &runs[id%sonas]
		r.IDs = append(r.IDs, uint64(id))
	}
	return runs
}

// randomIndex is an index of o holding n random unit vectors, keys 0..n-1,
// closed when tb ends.
func randomIndex(tb testing.TB, o Options, n int, rng *rand.Rand) *Index {
	x := New(o)
	tb.Cleanup(func() { x.Close() })
	for i := range n {
		x.Add(key(i), unit(randVec(rng, o.Dims)))
	}
	return x
}

// packed is how many ids the pack of name holds (0: none).
func packed(x *Index, name string) int {
	x.packs.mu.Lock()
	defer x.packs.mu.Unlock()
	if e := x.packs.byName[name]; e != nil {
		if p := e.cur.Load(); p != nil {
			return len(p.ids)
		}
	}
	return 0
}

// A search of named runs — packed, their packs extended as they grow,
// replaced when a run changes otherwise, read for an older and shorter
// view of a run, with removed ids and a second run (a backbone) — finds
// what the same search of their ids unnamed finds, and what scoring every
// id exactly finds: the same ids with the same similarities.
func TestPacksAreExact(t *testing.T) {
	const dims, sonas = 64, 6
	rng := rand.New(rand.NewSource(3))
	vecs := clustered(rng, 9000, dims, 40)
	x := New(Options{Dims: dims, Seed: 1, Lazy: true})
	defer x.Close()
	check := func(step string, in []Run, k int) {
		t.Helper()
		q := unit(randVec(rng, dims))
		var flat []uint64
		for _, r := range in {
			flat = append(flat, r.IDs...)
		}
		got, unnamed := x.SearchAmong(q, in, k), x.SearchAmong(q, Unnamed(flat), k)
		want := x.hits(x.exact(q, Unnamed(flat), k), k)
		if !slices.Equal(got, want) || !slices.Equal(unnamed, want) {
			t.Fatalf("%s: named %v, unnamed %v, exact %v", step, got[:min(3, len(got))], unnamed[:min(3, len(unnamed))], want[:min(3, len(want))])
		}
	}
	added := 0
	for _, n := range []int{3300, 3350, 3800, 6000, 9000} { // growth by fewer and more than packGrow
		for ; added < n; added++ {
			x.Add(key(added), vecs[added])
		}
		for _, r := range sonaRuns(n, sonas) {
			check("grown to "+strconv.Itoa(n), []Run{r}, 10)
			if got := packed(x, r.Name); got < len(r.IDs)-packGrow || got > len(r.IDs) {
				t.Fatalf("grown to %d: %s's pack holds %d of its %d ids", n, r.Name, got, len(r.IDs))
			}
		}
	}
	runs := sonaRuns(9000, sonas)
	if got := packed(x, "sona0"); got != len(runs[0].IDs) {
		t.Fatalf("sona0's pack holds %d of its %d ids", got, len(runs[0].IDs))
	}
	if want := int64(0); x.PackBytes() <= want {
		t.Fatal("no bytes held by the packs")
	}
	// An older view of a run, shorter than its pack.
	check("an older view", []Run{{Name: "sona1", IDs: runs[1].IDs[:700]}}, 10)
	// Removed ids: their records stay in the packs, their vectors are zero.
	for _, id := range runs[2].IDs[:40] {
		x.Remove(key(int(id)))
	}
	check("removals", []Run{runs[2]}, 20)
	// A run that forgot ids is another run under the same name: its pack
	// is replaced.
	forgot := Run{Name: "sona3", IDs: slices.Delete(slices.Clone(runs[3].IDs), 10, 200)}
	check("a forgetting", []Run{forgot}, 10)
	if got := packed(x, "sona3"); got != len(forgot.IDs) {
		t.Fatalf("after a forgetting sona3's pack holds %d ids, want %d", got, len(forgot.IDs))
	}
	// A sona with its backbone: two runs.
	check("with a backbone", []Run{runs[4], runs[5]}, 30)
	check("k of a quarter", []Run{runs[4]}, len(runs[4].IDs)/4-1)
}

// Packs stay within their budget: a run finds no room while the others'
// packs are in use, and takes the room of one unused for packIdle once it
// is searched twice within packIdle.
func TestPacksBudget(t *testing.T) {
	const dims = 32
	rng := rand.New(rand.NewSource(4))
	fake := clock.NewFake(time.Unix(1e9, 0))
	runs := sonaRuns(8000, 8) // 1,000 ids each
	one := int64(1250 * (8 + dims + scaleBytes))
	x := randomIndex(t, Options{Dims: dims, Seed: 1, Lazy: true, PackBytes: 2 * one, Clock: fake}, 8000, rng)
	q := unit(randVec(rng, dims))
	search := func(names ...int) {
		for _, i := range names {
			x.SearchAmong(q, runs[i:i+1], 5)
		}
	}
	search(0, 1, 2)
	if packed(x, "sona0") == 0 || packed(x, "sona1") == 0 || packed(x, "sona2") != 0 {
		t.Fatalf("packed %d, %d, %d ids: want the first two only", packed(x, "sona0"), packed(x, "sona1"), packed(x, "sona2"))
	}
	fake.Advance(packIdle / 2)
	search(1)
	fake.Advance(packIdle/2 + time.Second) // sona0 unused for longer than packIdle, sona1 not
	// sona2's last search was longer ago than packIdle: it takes no room.
	search(2)
	if packed(x, "sona0") == 0 || packed(x, "sona2") != 0 {
		t.Fatalf("packed %d, %d, %d ids: want sona2 searched once in packIdle not packed", packed(x, "sona0"), packed(x, "sona1"), packed(x, "sona2"))
	}
	fake.Advance(time.Second)
	search(2) // again within packIdle: it takes sona0's idle room
	if packed(x, "sona0") != 0 || packed(x, "sona1") == 0 || packed(x, "sona2") == 0 {
		t.Fatalf("packed %d, %d, %d ids: want sona0's room taken by sona2", packed(x, "sona0"), packed(x, "sona1"), packed(x, "sona2"))
	}
	if b := x.PackBytes(); b > 2*one {
		t.Fatalf("packs hold %d bytes, over the budget of %d", b, 2*one)
	}
	none := New(Options{Dims: dims, Seed: 1, Lazy: true, PackBytes: -1})
	defer none.Close()
	for i := range 8000 {
		none.Add(key(i), unit(randVec(rng, dims)))
	}
	none.SearchAmong(q, runs[:1], 5)
	if packed(none, "sona0") != 0 || none.PackBytes() != 0 {
		t.Fatal("a negative PackBytes packed a run")
	}
}

// Searches of sonas' runs while their sonas grow, as a store's sonas
// share their members (one writer appends; readers take the slice as it
// is): under -race, and each search's hits are its view's exact ones.
func TestPacksConcurrent(t *testing.T) {
	const dims, sonas, n = 32, 4, 6000
	rng := rand.New(rand.NewSource(5))
	vecs := make([][]float32, n)
	for i := range vecs {
		vecs[i] = unit(randVec(rng, dims))
	}
	x := New(Options{Dims: dims, Seed: 1, Lazy: true})
	defer x.Close()
	var mu sync.Mutex
	members := make([][]uint64, sonas)
	view := func(s int) Run {
		mu.Lock()
		defer mu.Unlock()
		return Run{Name: "sona" + strconv.Itoa(s), IDs: members[s]}
	}
	for i := range 2500 { // past packMin for every sona
		members[i%sonas] = append(members[i%sonas], x.Add(key(i), vecs[i]))
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 2500; i < n; i++ {
			id := x.Add(key(i), vecs[i])
			mu.Lock()
			members[i%sonas] = append(members[i%sonas], id)
			mu.Unlock()
		}
	})
	for g := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewSource(int64(g)))
			for i := range 150 {
				r := view((g + i) % sonas)
				q := vecs[rng.Intn(n)]
				got, want := x.SearchAmong(q, []Run{r}, 8), x.hits(x.exact(q, Unnamed(r.IDs), 8), 8)
				if !slices.Equal(got, want) {
					t.Errorf("search %d of %s: not the exact hits", i, r.Name)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkScreen is a new memory's neighbour search in a sona of 12,500
// memories, one id in 16 of a 200,000-vector index (384 dimensions, the
// records ~75 MB: beyond the caches): the sona's records where they lie
// against its pack.
func BenchmarkScreen(b *testing.B) {
	const dims, n, sonas = 384, 200_000, 16
	rng := rand.New(rand.NewSource(6))
	x := randomIndex(b, Options{Dims: dims, Seed: 1, Lazy: true}, n, rng)
	runs := sonaRuns(n, sonas)
	qs := make([][]float32, 64)
	for i := range qs {
		qs[i] = unit(randVec(rng, dims))
	}
	for _, c := range []struct {
		name string
		in   func(i int) []Run
	}{
		{"where-they-lie", func(i int) []Run { return Unnamed(runs[i%sonas].IDs) }},
		{"packed", func(i int) []Run { return runs[i%sonas : i%sonas+1] }},
	} {
		for i := range sonas {
			x.SearchAmong(qs[0], c.in(i), 16) // the packs made
		}
		b.Run(c.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				x.SearchAmong(qs[i%len(qs)], c.in(i), 16)
				i++
			}
		})
	}
}

// A snapshot holds the packs of the runs it is given (those the index
// would pack); a restore from its file maps them, outside the budget: the
// searches of a restarted index are the exact ones without a copy of its
// runs' records in the heap. A run that grew since is extended in the
// heap past its mapped part; an index without packs maps none; a reader
// that is no file, and the earlier layout, restore without them; a
// damaged pack is refused with the snapshot.
func TestPacksFromSnapshot(t *testing.T) {
	const dims, sonas, n = 48, 6, 3000
	rng := rand.New(rand.NewSource(8))
	vecs := clustered(rng, n+200, dims, 30)
	o := Options{Dims: dims, Seed: 1, Lazy: true}
	x := New(o)
	defer x.Close()
	for i := range n {
		x.Add(key(i), vecs[i])
	}
	runs := append(sonaRuns(n, sonas), Run{Name: "few", IDs: []uint64{3, 700, 2900}}, Run{IDs: []uint64{1, 2, 3}})
	exact := func(y *Index, r Run, q []float32) {
		t.Helper()
		got, want := y.SearchAmong(q, []Run{r}, 10), x.hits(x.exact(q, Unnamed(r.IDs), 10), 10)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", r.Name, got[:min(3, len(got))], want[:min(3, len(want))])
		}
	}
	path := snapFile(t, x, SnapshotVersion, runs...)
	y, info, err := restoreFile(t, o, path)
	if err != nil {
		t.Fatal(err)
	}
	perRun := int64(n/sonas) * (dims + scaleBytes)
	if info.Packs != sonas || info.Mapped != int64(n)*(dims+scaleBytes)+sonas*perRun {
		t.Fatalf("restored %d packs, %d bytes mapped; want %d, %d", info.Packs, info.Mapped, sonas, int64(n)*(dims+scaleBytes)+sonas*perRun)
	}
	for _, r := range runs[:sonas] {
		if got := packed(y, r.Name); got != len(r.IDs) {
			t.Fatalf("%s: a pack of %d ids restored, want %d", r.Name, got, len(r.IDs))
		}
		exact(y, r, unit(randVec(rng, dims)))
	}
	if y.PackBytes() != 0 {
		t.Fatalf("the mapped packs hold %d bytes of the budget", y.PackBytes())
	}
	// An id's record is read from its pack, not where the records by id
	// lie (cleared here, to tell); that of an id in none from there.
	sameRecord := func(id uint64) {
		t.Helper()
		got, _ := y.RecordInto(id, nil)
		want, _ := x.RecordInto(id, nil)
		if !slices.Equal(got.q, want.q) || got.scale != want.scale {
			t.Fatalf("id %d: record %v (scale %v), want %v (%v)", id, got.q[:4], got.scale, want.q[:4], want.scale)
		}
	}
	y.kmu.Lock()
	clear(y.qv.at(uint32(runs[2].IDs[5])))
	y.kmu.Unlock()
	sameRecord(runs[2].IDs[5])
	sameRecord(n - 1)
	// sona0 grows by more than packGrow: its pack is extended in the
	// heap, its first ids still mapped.
	grown := runs[0]
	for i := n; i < n+200; i++ {
		y.Add(key(i), vecs[i])
		x.Add(key(i), vecs[i])
		grown.IDs = append(slices.Clip(grown.IDs), uint64(i))
	}
	exact(y, grown, unit(randVec(rng, dims)))
	sameRecord(n + 5)
	y.packs.mu.Lock()
	p := y.packs.byName["sona0"].cur.Load()
	y.packs.mu.Unlock()
	if p.mapped != n/sonas || len(p.ids) != len(grown.IDs) || y.PackBytes() == 0 || y.PackBytes() >= int64(len(grown.IDs))*(8+dims+scaleBytes) {
		t.Fatalf("the grown pack: %d ids mapped of %d, %d bytes of the budget", p.mapped, len(p.ids), y.PackBytes())
	}
	exact(y, grown, unit(randVec(rng, dims)))

	// A run searched again that finds no room takes none of a mapped
	// pack's, however long unused.
	small := o
	small.PackBytes, small.Clock = 1000, clock.NewFake(time.Unix(1e9, 0))
	v, _, err := restoreFile(t, small, path)
	if err != nil {
		t.Fatal(err)
	}
	small.Clock.(*clock.Fake).Advance(2 * packIdle)
	for range 2 {
		exact(v, Run{Name: "another", IDs: runs[1].IDs}, unit(randVec(rng, dims)))
	}
	if packed(v, "sona1") != len(runs[1].IDs) || packed(v, "another") != 0 {
		t.Fatalf("after another run's search: sona1's pack %d ids, another's %d", packed(v, "sona1"), packed(v, "another"))
	}

	// Packs off: none mapped; the searches the same.
	off := o
	off.PackBytes = -1
	z, info, err := restoreFile(t, off, path)
	if err != nil || info.Packs != 0 || packed(z, "sona1") != 0 {
		t.Fatalf("packs off: %d packs restored (%v)", info.Packs, err)
	}
	exact(z, runs[1], unit(randVec(rng, dims)))

	// Not from a file, or version 3: no packs, the same index.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w := New(o)
	defer w.Close()
	if info, err := w.Restore(bytes.NewReader(b), int64(len(b)), anyTag); err != nil || info.Packs != 0 || w.Len() != n {
		t.Fatalf("from a reader: %+v, %v", info, err)
	}
	exact(w, runs[2], unit(randVec(rng, dims)))
	if v3, info, err := restoreFile(t, o, snapFile(t, x, 3, runs...)); err != nil || info.Packs != 0 || info.Version != 3 {
		t.Fatalf("version 3: %+v, %v", info, err)
	} else {
		exact(v3, runs[3], unit(randVec(rng, dims)))
	}

	// A flipped byte in a pack's records: the snapshot is refused.
	packsAt := int64(binary.LittleEndian.Uint64(b[len(b)-12:]))
	b[packsAt+int64(len(b)-12-int(packsAt))/2] ^= 0x40
	bad := filepath.Join(t.TempDir(), "index.snap")
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if v, _, err := restoreFile(t, o, bad); !errors.Is(err, ErrSnapshot) || v.Len() != 0 {
		t.Fatalf("a damaged pack restored: %v", err)
	}
}

// TestMappedPacksTruncated: a packs section cut anywhere, or with a
// count past what its bytes hold, is an error, never a panic or a pack.
func TestMappedPacksTruncated(t *testing.T) {
	const dims, sonas, n = 16, 6, 1200
	rng := rand.New(rand.NewSource(3))
	x := randomIndex(t, Options{Dims: dims, Seed: 1, Lazy: true}, n, rng)
	data, err := os.ReadFile(snapFile(t, x, SnapshotVersion, sonaRuns(n, sonas)...))
	if err != nil {
		t.Fatal(err)
	}
	end := int64(len(data)) - 12
	at := int64(binary.LittleEndian.Uint64(data[end:]))
	section := data[at:end]
	// The section is parsed where the file puts it, so its arrays' offsets
	// keep their alignment: copy it to a buffer of that alignment.
	aligned := func(b []byte) []byte {
		buf := make([]byte, len(b)+2*packAlign)
		pad := int(paddingTo(at-int64(uintptr(unsafe.Pointer(&buf[0]))), packAlign))
		return append(buf[pad:pad], b...)
	}
	m, err := mappedPacks(aligned(section), at, n, dims)
	if err != nil || len(m.byName) != sonas {
		t.Fatalf("the whole section: %v, %d packs", err, len(m.byName))
	}
	for cut := range len(section) {
		if _, err := mappedPacks(aligned(section[:cut]), at, n, dims); err == nil {
			t.Fatalf("cut at %d of %d: no error", cut, len(section))
		}
	}
	huge := bytes.Clone(section)
	binary.LittleEndian.PutUint32(huge, 1<<30)
	if _, err := mappedPacks(aligned(huge), at, n, dims); err == nil {
		t.Fatal("a count of 2^30: no error")
	}
}
