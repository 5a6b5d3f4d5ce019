package index_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"

	"github.com/memoria-ai/memoria/memory/forget"
	"github.com/memoria-ai/memoria/memory/index"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/vector"
)

// snapQueries are asked of the vector index before and after a restart.
var snapQueries = []string{"orchard", "memory 7 about the pears", "the blue shed", "apples in august", "note 149", "note 250 on rain"}

// searches are the index's answers to snapQueries.
func searches(t *testing.T, s *memory.Self) [][]vector.Hit {
	t.Helper()
	var out [][]vector.Hit
	for _, q := range snapQueries {
		vecs, err := s.Embed(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s.Index().Search(vecs[0], 10))
	}
	return out
}

func sameSearches(t *testing.T, got, want [][]vector.Hit) {
	t.Helper()
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("query %q:\n got %v\nwant %v", snapQueries[i], got[i], want[i])
		}
	}
}

// snapWriterChild writes n memories, a vector snapshot, n more, says
// DONE and waits to be killed.
func snapWriterChild(t *testing.T, n int) {
	s, err := memorytest.OpenWith(memory.Options{Config: memorytest.Config(os.Getenv("MEMORIA_FAULT_DIR"))})
	if err != nil {
		t.Fatal(err)
	}
	o := memorytest.NewOwner(t, s, "writer")
	for i := range 2 * n {
		if i == n {
			if err := s.SnapshotVectors(); err != nil {
				t.Fatal(err)
			}
		}
		c := o.Text(fmt.Sprintf("note %d on the orchard, the pears and the rain", i))
		fmt.Printf("ACK %s\n", c)
	}
	memorytest.AwaitKill(t)
}

// A kill -9 after a vector snapshot and more acknowledged writes: the
// restart loads the snapshot, adds the writes after it, and searches
// exactly as an index rebuilt from the store.
func TestVectorSnapshotThenKillNine(t *testing.T) {
	if os.Getenv(memorytest.ChildEnv) == t.Name() {
		snapWriterChild(t, memorytest.ChildN())
		return
	}
	dir := t.TempDir()
	acked := memorytest.KillAtDone(t, t.Name(), "MEMORIA_FAULT_DIR="+dir, "MEMORIA_FAULT_N=150")
	if len(acked) != 300 {
		t.Fatalf("%d acknowledged, want 300", len(acked))
	}

	s, logs := memorytest.OpenLogged(t, dir)
	memorytest.MustLog(t, logs, "vector index: snapshot loaded", "added_since=150", "vector_snapshot=true")
	for c := range acked {
		k, _ := cid.Decode(c)
		if _, ok := s.Index().ID(k.KeyString()); !ok {
			t.Fatalf("acknowledged %s is not in the index", c)
		}
	}
	n := s.Index().Len()
	s.Index().WaitBuilt()
	restored := searches(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	if err := os.Remove(index.VectorSnapshotPath(dir)); err != nil {
		t.Fatal(err)
	}
	s, logs = memorytest.OpenLogged(t, dir)
	defer s.Close()
	memorytest.MustLog(t, logs, "vector index: no snapshot; rebuilding it", "vector_snapshot=false")
	if s.Index().Len() != n {
		t.Fatalf("rebuilt: %d vectors, restored %d", s.Index().Len(), n)
	}
	// Both graphs built whole: the same graph (the same vectors added in
	// the same order, the insertion log's), the same answers.
	s.Index().WaitBuilt()
	sameSearches(t, searches(t, s), restored)
}

// orchard makes a store in dir of n notes of one sona, closes it (which
// writes the vector snapshot) and returns the index's answers to
// snapQueries.
func orchard(t *testing.T, dir string, n int) [][]vector.Hit {
	t.Helper()
	s, _ := memorytest.OpenLogged(t, dir)
	o := memorytest.NewOwner(t, s, "gardener")
	for i := range n {
		o.Text(fmt.Sprintf("note %d on the orchard, the pears and the rain", i))
	}
	s.Index().WaitBuilt()
	before := searches(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return before
}

// A damaged snapshot is not used: the index is rebuilt, searches as
// before, and a new snapshot replaces the damaged one at close.
func TestDamagedVectorSnapshotRebuilds(t *testing.T) {
	dir := t.TempDir()
	before := orchard(t, dir, 120)
	path := index.VectorSnapshotPath(dir)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no snapshot after a clean close: %v", err)
	}
	flipAt(t, path, fi.Size()/2)

	s, logs := memorytest.OpenLogged(t, dir)
	memorytest.MustLog(t, logs, "vector index: snapshot not used; rebuilding", "checksum", "vector_snapshot=false")
	if s.Index().Len() != 120 {
		t.Fatalf("%d vectors after the rebuild, want 120", s.Index().Len())
	}
	s.Index().WaitBuilt()
	sameSearches(t, searches(t, s), before)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, logs = memorytest.OpenLogged(t, dir)
	defer s.Close()
	memorytest.MustLog(t, logs, "vector index: snapshot loaded", "vector_snapshot=true")
	sameSearches(t, searches(t, s), before)

	// Another store's snapshot (here: another data directory's) is not
	// used either.
	other := t.TempDir()
	s2, _ := memorytest.OpenLogged(t, other)
	memorytest.NewOwner(t, s2, "x").Text("a memory of another store")
	s2.Close()
	copyFile(t, path, index.VectorSnapshotPath(other))
	s2, logs = memorytest.OpenLogged(t, other)
	defer s2.Close()
	memorytest.MustLog(t, logs, "snapshot not used", "of store", "vector_snapshot=false")
	if s2.Index().Len() != 1 {
		t.Fatalf("%d vectors, want the store's 1", s2.Index().Len())
	}
}

// A memory forgotten after the snapshot the restart loads (a kill before
// the next one) is not brought back by it.
func TestForgottenStaysForgottenAfterSnapshotRestore(t *testing.T) {
	dir := t.TempDir()
	s, _ := memorytest.OpenLogged(t, dir)
	o := memorytest.NewOwner(t, s, "gardener")
	var cids []cid.Cid
	for i := range 60 {
		cids = append(cids, o.Text(fmt.Sprintf("note %d on the orchard, the pears and the rain", i)))
	}
	doomed := cids[7]
	if err := s.SnapshotVectors(); err != nil {
		t.Fatal(err)
	}
	path := index.VectorSnapshotPath(dir)
	old := filepath.Join(t.TempDir(), "old.snap")
	copyFile(t, path, old)
	if _, err := s.Forget.Forget(context.Background(), forget.Request{Selector: forget.Selector{CIDs: []cid.Cid{doomed}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	copyFile(t, old, path) // as if killed before a snapshot after the forget

	s, logs := memorytest.OpenLogged(t, dir)
	defer s.Close()
	memorytest.MustLog(t, logs, "vector index: snapshot loaded", "forgotten_since=1", "vector_snapshot=true")
	if _, ok := s.Index().ID(doomed.KeyString()); ok {
		t.Fatal("the forgotten memory is back in the index")
	}
	if s.Index().Len() != 59 {
		t.Fatalf("%d vectors, want 59", s.Index().Len())
	}
	vecs, err := s.Embed(context.Background(), "note 7 on the orchard, the pears and the rain")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range s.Index().Search(vecs[0], 60) {
		if h.Key == doomed.KeyString() {
			t.Fatal("a search returns the forgotten memory")
		}
	}
}

func flipAt(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The snapshot is written every index.snapshot_interval once the index
// changed, without a close: a kill then loses no more than the interval's
// graph work.
func TestVectorSnapshotEveryInterval(t *testing.T) {
	dir := t.TempDir()
	fake := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(dir)
	cfg.Index.SnapshotInterval = config.Duration(time.Minute)
	s := memorytest.Open(t, cfg, fake)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "gardener")
	for i := range 20 {
		o.Text(fmt.Sprintf("note %d on the orchard", i))
	}
	path := index.VectorSnapshotPath(dir)
	testutil.Eventually(t, "a snapshot after some intervals", func() bool {
		fake.Advance(time.Minute)
		_, err := os.Stat(path)
		return err == nil
	})
	// What it holds is what a restore gives.
	y := vector.New(vector.Options{Dims: s.Index().Dims(), M: cfg.Index.M, EfConstruction: cfg.Index.EfConstruction, Seed: cfg.Index.Seed})
	defer y.Close()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	if _, err := y.Restore(f, fi.Size(), func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if y.Len() != 20 {
		t.Fatalf("the periodic snapshot holds %d vectors, want 20", y.Len())
	}
}

// toVersion1 rewrites the version 2 snapshot at path as version 1 wrote
// it: the magic "MEMVSNP1", no padding before the vectors, its checksum.
func toVersion1(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	off := 8
	u32 := func() int { off += 4; return int(le.Uint32(b[off-4:])) }
	u64 := func() int { off += 8; return int(le.Uint64(b[off-8:])) }
	dims, m := u32(), u32()
	u32()                 // ef_construction
	u64()                 // seed
	n, gn := u64(), u64() // ids, graph slots
	u32()                 // entry
	u32()                 // top
	off += u32()          // the tag
	for range n {
		off += u32() // a key
	}
	off += (gn + 63) / 64 * 8 // the inserted bits
	off += gn * (1 + 2*m) * 4 // layer 0
	for range gn {
		off += u32() * (1 + m) * 4 // upper layers
	}
	pad := func(at int) int { return (4096 - at%4096) % 4096 }
	vecsAt := off + pad(off)
	qvAt := vecsAt + n*dims*4 + pad(vecsAt+n*dims*4)
	qvEnd := qvAt + n*(dims+4)
	if packsAt := int(le.Uint64(b[len(b)-12:])); packsAt != qvEnd || len(b) < qvEnd+12 {
		t.Fatalf("a snapshot of %d bytes, its packs at %d, not the layout read (its records end at %d)", len(b), packsAt, qvEnd)
	}
	out := append([]byte("MEMVSNP1"), b[8:off]...)
	out = append(out, b[vecsAt:vecsAt+n*dims*4]...)
	out = append(out, b[qvAt:qvEnd]...)
	out = le.AppendUint32(out, crc32.Checksum(out, crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A snapshot of version 1 (before the vectors were page-aligned to be
// mapped) is loaded, into the heap, and written again as the current one
// at the next close though the index did not change; the open after maps
// its quantised records (and reads its float32 vectors from the file).
func TestVectorSnapshotOfVersion1IsRewritten(t *testing.T) {
	dir := t.TempDir()
	before := orchard(t, dir, 300)
	path := index.VectorSnapshotPath(dir)
	toVersion1(t, path)

	s, logs := memorytest.OpenLogged(t, dir)
	memorytest.MustLog(t, logs, "vector index: snapshot loaded", "mapped_bytes=0", "vector_snapshot=true")
	sameSearches(t, searches(t, s), before)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, logs = memorytest.OpenLogged(t, dir)
	defer s.Close()
	memorytest.MustLog(t, logs, "vector index: snapshot loaded", fmt.Sprintf("mapped_bytes=%d", 300*(384+4)), "vector_snapshot=true")
	sameSearches(t, searches(t, s), before)
}

// sonaStates are every sona's members (their keys: a restart may number
// them otherwise) and centroid.
func sonaStates(t *testing.T, s *memory.Self) map[string][2]any {
	t.Helper()
	out := map[string][2]any{}
	for _, id := range s.Sonas.IDs() {
		centroid, _, ok := s.Sonas.Snapshot(id)
		if !ok {
			t.Fatalf("sona %s has no state", id)
		}
		var keys []string
		for _, m := range s.Sonas.Members(id, "", false) {
			k, ok := s.Index().Key(m)
			if !ok || k == "" {
				t.Fatalf("sona %s: member %d is no vector", id, m)
			}
			keys = append(keys, k)
		}
		out[id] = [2]any{keys, centroid}
	}
	return out
}

func sameSonaStates(t *testing.T, got, want map[string][2]any, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d sonas, want %d", what, len(got), len(want))
	}
	for id, w := range want {
		g := got[id]
		if !slices.Equal(g[0].([]string), w[0].([]string)) {
			t.Fatalf("%s: sona %s: members %v, want %v", what, id, g[0], w[0])
		}
		if !slices.Equal(g[1].([]float32), w[1].([]float32)) {
			t.Fatalf("%s: sona %s: another centroid", what, id)
		}
	}
}

// TestSonasFromSnapshotMatchAFullRead: the sonas' members and centroids
// a restart takes from the vector snapshot and the chain entries after it
// are, bit for bit, those of a read of every chain — after a kill that
// left appends, a join, a new sona and forgets (before and after the
// snapshot) beyond the snapshot it loads; and a state that does not
// decode is not used: every chain is read.
func TestSonasFromSnapshotMatchAFullRead(t *testing.T) {
	dir := t.TempDir()
	s, _ := memorytest.OpenLogged(t, dir)
	a, b := memorytest.NewOwner(t, s, "alder"), memorytest.NewOwner(t, s, "birch")
	var early []cid.Cid
	for i := range 40 {
		early = append(early, a.Text(fmt.Sprintf("alder note %d on the orchard and the rain", i)))
		b.Text(fmt.Sprintf("birch note %d on the shed and the pears", i))
	}
	if err := s.SnapshotVectors(); err != nil {
		t.Fatal(err)
	}
	path := index.VectorSnapshotPath(dir)
	old := filepath.Join(t.TempDir(), "old.snap")
	copyFile(t, path, old)
	// After the snapshot: appends, a join (a memory of alder in birch's
	// chain), a new sona, a forget of a memory from before the snapshot.
	var late []cid.Cid
	for i := range 20 {
		late = append(late, a.Text(fmt.Sprintf("alder late note %d, apples in august", i)))
	}
	b.Text("alder note 3 on the orchard and the rain")
	c := memorytest.NewOwner(t, s, "cedar")
	for i := range 10 {
		c.Text(fmt.Sprintf("cedar note %d, the blue shed", i))
	}
	forgetCIDs(t, s, early[5], late[2])
	want := sonaStates(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	copyFile(t, old, path) // as if killed before a snapshot after them

	s, logs := memorytest.OpenLogged(t, dir)
	memorytest.MustLog(t, logs, "vector index: snapshot loaded", "sonas: members from the snapshot")
	sameSonaStates(t, sonaStates(t, s), want, "from the snapshot")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The snapshot written at that close holds them all; read back.
	s, logs = memorytest.OpenLogged(t, dir)
	memorytest.MustLog(t, logs, "sonas: members from the snapshot")
	sameSonaStates(t, sonaStates(t, s), want, "from the close's snapshot")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A state that does not decode, or none (an older binary's
	// snapshot), is not used: every chain is read, and the snapshot
	// written at close holds the state, though nothing changed.
	for _, bad := range []any{[]byte("MSONAS1\x07"), nil} {
		retag(t, dir, func(tag map[string]any) { tag["sonas"] = bad })
		s, logs = memorytest.OpenLogged(t, dir)
		memorytest.MustLog(t, logs, "vector index: snapshot loaded", "the snapshot's state not used")
		sameSonaStates(t, sonaStates(t, s), want, "a state that does not decode")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s, logs = memorytest.OpenLogged(t, dir)
		memorytest.MustLog(t, logs, "sonas: members from the snapshot")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// Without the snapshot: every chain read, the same state.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	s, _ = memorytest.OpenLogged(t, dir)
	defer s.Close()
	sameSonaStates(t, sonaStates(t, s), want, "every chain read")
}

// retag rewrites the vector snapshot of the store in dir with its tag
// changed by edit.
func retag(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	cfg := memorytest.Config(dir)
	o := vector.Options{Dims: llm.DefaultDims, M: cfg.Index.M, EfSearch: cfg.Index.EfSearch, EfConstruction: cfg.Index.EfConstruction, Seed: cfg.Index.Seed}
	x := vector.New(o)
	defer x.Close()
	path := index.VectorSnapshotPath(dir)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	var tag map[string]any
	if _, err := x.Restore(f, fi.Size(), func(b []byte) error { return json.Unmarshal(b, &tag) }); err != nil {
		t.Fatal(err)
	}
	f.Close()
	edit(tag)
	raw, err := json.Marshal(tag)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := x.Snapshot(&buf, raw); err != nil {
		t.Fatal(err)
	}
	x.Unmap()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func forgetCIDs(t *testing.T, s *memory.Self, cids ...cid.Cid) {
	t.Helper()
	if _, err := s.Forget.Forget(context.Background(), forget.Request{Selector: forget.Selector{CIDs: cids}}); err != nil {
		t.Fatal(err)
	}
}

// A written snapshot's float32 vectors are read from its file afterwards,
// as a restore's would be (when there are more than the index keeps in
// the heap): the log says what was freed (the whole chunks of 256), the
// index answers as before, and the next snapshot, written from that file,
// restores into an index that answers alike.
func TestVectorSnapshotAdoptsItsVectors(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "store"), store.OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const dims = 16
	o := vector.Options{Dims: dims, Seed: 1, HeapVectors: -1}
	ix := vector.New(o)
	defer ix.Close()
	rng := rand.New(rand.NewSource(1))
	vec := func() []float32 {
		v := make([]float32, dims)
		for i := range v {
			v[i] = rng.Float32() - 0.5
		}
		llm.Normalize(v)
		return v
	}
	for i := range 1000 {
		ix.Add(fmt.Sprint("k", i), vec())
	}
	ix.WaitBuilt()
	queries := make([][]float32, 20)
	for i := range queries {
		queries[i] = vec()
	}
	answers := func(x *vector.Index) (out [][]vector.Hit) {
		for _, q := range queries {
			out = append(out, x.Search(q, 10))
		}
		return out
	}
	before := answers(ix)
	vectors := make([][]float32, 1000)
	for i := range vectors {
		vectors[i] = slices.Clone(ix.Vector(uint64(i), nil))
	}

	var logged bytes.Buffer
	path := filepath.Join(dir, "vector", "index.snap")
	snaps := index.NewVectorSnapshots(st, ix, index.SnapshotOptions{Path: path, Embedder: "test",
		Covered: func() uint64 { return 0 }, Logger: slog.New(slog.NewJSONHandler(&logged, nil))})
	if err := snaps.Write(); err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Msg       string
		HeapFreed int64 `json:"heap_freed"`
	}
	if err := json.Unmarshal(logged.Bytes(), &rec); err != nil || rec.Msg != "vector index: snapshot written" {
		t.Fatalf("log %q: %v", logged.String(), err)
	}
	if want := int64(3 * 256 * dims * 4); rec.HeapFreed != want {
		t.Fatalf("heap_freed %d, want the 3 whole chunks' %d", rec.HeapFreed, want)
	}
	for i, q := range answers(ix) {
		if !slices.Equal(q, before[i]) {
			t.Fatalf("query %d after the adoption:\n got %v\nwant %v", i, q, before[i])
		}
	}
	for i, v := range vectors {
		if got := ix.Vector(uint64(i), nil); !slices.Equal(got, v) {
			t.Fatalf("vector %d after the adoption differs", i)
		}
	}

	for i := 1000; i < 1100; i++ {
		ix.Add(fmt.Sprint("k", i), vec())
	}
	ix.WaitBuilt()
	if err := snaps.Write(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	y := vector.New(o)
	defer y.Close()
	if _, err := y.Restore(f, fi.Size(), func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	y.WaitBuilt()
	if a, b := answers(ix), answers(y); !slices.Equal(slices.Concat(a...), slices.Concat(b...)) {
		t.Fatalf("the snapshot written from the adopted file restores to other answers:\n%v\n%v", b, a)
	}
}
