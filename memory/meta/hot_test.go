package meta

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// written collects the keys every commit of st writes from now on.
func written(st *store.Store) func() []string {
	var mu sync.Mutex
	var keys []string
	st.Subscribe(func(e store.Event) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, e.Keys...)
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := keys
		keys = nil
		return out
	}
}

func spaces(keys []string) []string {
	var out []string
	for _, k := range keys {
		if p := k[:2]; !slices.Contains(out, p) && p != "x/" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// A memory's use — Touch, Reinforce, ReinforceDuplicate — writes its hot
// state (o/) and never its metadata record (m/); every reader, the cache
// included, sees the new values with the rest of the record.
func TestHotStateWritesOnlyItsRecord(t *testing.T) {
	st, m := open(t)
	ctx := context.Background()
	a := put(t, st, "a", &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}, Importance: 0.2, AccessCount: 4, LastAccessTick: 3,
		Labels: map[string]string{"k": "v"}})
	b := put(t, st, "b, on a", &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}, Importance: 0.1}, a)
	keys := written(st)
	if got := metaOf(t, m, a); got.AccessCount != 4 || got.Importance != 0.2 { // cached now
		t.Fatalf("before: %v", got)
	}
	activity := func(string) (int64, bool) { return 7, true }
	if err := st.Update(ctx, Touch([]cid.Cid{a, b}, []string{"s", "s"}, activity)); err != nil {
		t.Fatal(err)
	}
	if sp := spaces(keys()); !slices.Equal(sp, []string{"o/"}) {
		t.Fatalf("Touch wrote %v", sp)
	}
	if err := m.Reinforce([]Used{{CID: b, Score: 1}}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.ReinforceDuplicate(ctx, a); err != nil {
		t.Fatal(err)
	}
	if sp := spaces(keys()); !slices.Equal(sp, []string{"o/"}) {
		t.Fatalf("Reinforce wrote %v", sp)
	}
	got := metaOf(t, m, a)
	if got.AccessCount != 6 || got.LastAccessTick != 7 || got.Importance <= 0.2 || got.Labels["k"] != "v" || got.Kind != "note" {
		t.Fatalf("through the cache: %v", got)
	}
	var read *messages.MemoryMeta
	st.View(func(r store.Reader) error {
		var err error
		read, err = Read(r, a)
		return err
	})
	if HotOf(read) != HotOf(got) || read.Labels["k"] != "v" {
		t.Fatalf("read %v, cached %v", read, got)
	}
}

// Update sees the hot state, and a change of it goes to the o/ record
// (which otherwise would hide it); a change of other fields leaves the
// hot state be.
func TestUpdateKeepsTheHotStateInStep(t *testing.T) {
	st, m := open(t)
	ctx := context.Background()
	a := put(t, st, "a", &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}, Importance: 0.2})
	if err := st.Update(ctx, UpdateHot([]cid.Cid{a}, func(h *Hot, _ cid.Cid) { h.AccessCount = 3 })); err != nil {
		t.Fatal(err)
	}
	keys := written(st)
	var seen Hot
	if err := st.Update(ctx, Update([]cid.Cid{a}, func(meta *messages.MemoryMeta, _ cid.Cid) {
		seen = HotOf(meta)
		meta.Archived = true
	})); err != nil {
		t.Fatal(err)
	}
	if seen.AccessCount != 3 {
		t.Fatalf("Update saw %v", seen)
	}
	if k := keys(); slices.ContainsFunc(k, func(k string) bool { return strings.HasPrefix(k, "o/") }) {
		t.Fatalf("an update of other fields wrote %v", spaces(k))
	}
	if err := st.Update(ctx, Update([]cid.Cid{a}, func(meta *messages.MemoryMeta, _ cid.Cid) {
		meta.Importance = max(meta.Importance, 0.9) // as the evaluation seeds it
	})); err != nil {
		t.Fatal(err)
	}
	if got := metaOf(t, m, a); got.Importance != 0.9 || got.AccessCount != 3 || !got.Archived {
		t.Fatalf("after the updates: %v", got)
	}
}

// Once the store knows which memories have a hot state's record
// (LoadHot), a read of a memory's metadata looks for that record only
// where there may be one: a record written behind the committer's back
// for a memory that had none is not seen (Read, which looks, sees it),
// while records written after the load, by commits it was told of, are.
func TestMetaKnowsWhichHotRecordsExist(t *testing.T) {
	st, _ := openBadger(t)
	ctx := context.Background()
	a := put(t, st, "a", &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}, AccessCount: 1})
	b := put(t, st, "b", &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}, AccessCount: 2})
	c := put(t, st, "c", &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}, AccessCount: 3})
	if err := st.Update(ctx, UpdateHot([]cid.Cid{a}, func(h *Hot, _ cid.Cid) { h.AccessCount = 10 })); err != nil {
		t.Fatal(err)
	}
	m := New(st, 64, config.Default().Recall) // its cache empty: every read below misses it
	counts := func(read func(store.Reader, cid.Cid) (*messages.MemoryMeta, error)) map[string]int64 {
		t.Helper()
		out := map[string]int64{}
		if err := st.View(func(r store.Reader) error {
			for name, x := range map[string]cid.Cid{"a": a, "b": b, "c": c} {
				meta, err := read(r, x)
				if err != nil {
					return err
				}
				out[name] = meta.AccessCount
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	withKeys := func(r store.Reader, x cid.Cid) (*messages.MemoryMeta, error) { return read(r, x, m.hotKeys) }
	if n, err := m.LoadHot(nil); err != nil || n != 1 {
		t.Fatalf("LoadHot: %d, %v; want a's record alone", n, err)
	}
	if err := st.WriteBehind(func(txn *badger.Txn) error { return txn.Set(HotKey(b), Hot{AccessCount: 100}.encode()) }); err != nil {
		t.Fatal(err)
	}
	if got, want := counts(Read), map[string]int64{"a": 10, "b": 100, "c": 3}; !maps.Equal(got, want) {
		t.Fatalf("Read: %v, want %v", got, want)
	}
	if got, want := counts(withKeys), map[string]int64{"a": 10, "b": 2, "c": 3}; !maps.Equal(got, want) {
		t.Fatalf("with the records known: %v, want %v (b's record written behind the committer looked for)", got, want)
	}
	if got := counts(m.MetaIn); got["b"] != 2 {
		t.Fatalf("MetaIn: b's access count %d, want 2 (its record looked for)", got["b"])
	}
	// Written after the load: told to the set.
	if err := st.Update(ctx, m.UpdateHot([]cid.Cid{c}, func(h *Hot, _ cid.Cid) { h.AccessCount = 30 })); err != nil {
		t.Fatal(err)
	}
	if got, want := counts(withKeys), map[string]int64{"a": 10, "b": 2, "c": 30}; !maps.Equal(got, want) {
		t.Fatalf("after c's record was written: %v, want %v", got, want)
	}
	// An operation reads as the last commit left it.
	if err := st.Update(ctx, func(tx store.Tx) error {
		for x, want := range map[cid.Cid]int64{a: 10, b: 2, c: 30} {
			meta, err := read(tx, x, m.hotKeys)
			if err != nil {
				return err
			}
			if meta.AccessCount != want {
				t.Errorf("in an operation %s: %d, want %d", x, meta.AccessCount, want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A view's read of a memory's metadata that misses the records' cache
// takes the hot state from the cache of hot states when that holds it, and
// so does an operation's update of it —
// a read fills it, a commit's write of a state it holds updates it —
// instead of reading the o/ record from Badger a second time; a view that
// does not see the latest write of a hot state reads its own.
func TestHotStateCachedApartFromTheRecord(t *testing.T) {
	st, _ := openBadger(t)
	ctx := context.Background()
	a := put(t, st, "a", &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}, AccessCount: 1})
	if err := st.Update(ctx, UpdateHot([]cid.Cid{a}, func(h *Hot, _ cid.Cid) { h.AccessCount = 7 })); err != nil {
		t.Fatal(err)
	}
	m := New(st, 64, config.Default().Recall) // nothing cached
	if _, err := m.LoadHot(nil); err != nil {
		t.Fatal(err)
	}
	// behind has Badger hold n as a's hot state, behind the committer (a
	// read from Badger would say n), and the records' cache forget a.
	behind := func(n int64) {
		t.Helper()
		if err := st.WriteBehind(func(txn *badger.Txn) error { return txn.Set(HotKey(a), Hot{AccessCount: n}.encode()) }); err != nil {
			t.Fatal(err)
		}
		m.metas = store.NewCache[*metaEntry](64)
	}
	if got := metaOf(t, m, a); got.AccessCount != 7 || got.Kind != "note" {
		t.Fatalf("a: %v, want 7", got)
	}
	behind(100)
	if got := metaOf(t, m, a); got.AccessCount != 7 {
		t.Fatalf("a read again: %v, want 7 (its hot state cached at the first read, not Badger's 100)", got)
	}
	if err := st.Update(ctx, m.UpdateHot([]cid.Cid{a}, func(h *Hot, _ cid.Cid) { h.AccessCount = 8 })); err != nil {
		t.Fatal(err)
	}
	behind(300)
	if got := metaOf(t, m, a); got.AccessCount != 8 {
		t.Fatalf("a after a write: %v, want 8 (the cached state updated by the commit, not Badger's 300)", got)
	}
	// An older view reads the hot state it sees, not the cache's newer one.
	err := st.View(func(r store.Reader) error {
		if err := st.Update(ctx, m.UpdateHot([]cid.Cid{a}, func(h *Hot, _ cid.Cid) { h.AccessCount = 9 })); err != nil {
			return err
		}
		got, err := m.MetaIn(r, a)
		if err != nil {
			return err
		}
		if got.AccessCount != 300 {
			t.Errorf("a view begun before the write: %d, want what it sees, 300 (written behind)", got.AccessCount)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := metaOf(t, m, a); got.AccessCount != 9 {
		t.Fatalf("a after the write: %v, want 9", got)
	}
	// The committer's UpdateHot takes the state the last commit left from
	// the hot states' cache too when the records' cache has lost it (the
	// touches' write of memories recalled half a minute before).
	behind(500)
	if err := st.Update(ctx, m.UpdateHot([]cid.Cid{a}, func(h *Hot, _ cid.Cid) { h.AccessCount++ })); err != nil {
		t.Fatal(err)
	}
	if got := metaOf(t, m, a); got.AccessCount != 10 {
		t.Fatalf("a after an increment: %v, want 10 (9 from the cache, not Badger's 500)", got)
	}
}
