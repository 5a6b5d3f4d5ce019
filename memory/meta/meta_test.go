package meta

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

func open(t *testing.T) (*store.Store, *Store) {
	t.Helper()
	cfg := config.Default()
	st, err := store.OpenMemory(store.OptionsOf(cfg.Store))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, New(st, 64, cfg.Recall)
}

// openBadger is open on Badger, whose DB a test may write behind the
// committer.
func openBadger(t *testing.T) (*store.Store, *Store) {
	t.Helper()
	cfg := config.Default()
	st, err := store.Open(t.TempDir(), store.OptionsOf(cfg.Store))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, New(st, 64, cfg.Recall)
}

// put stores a text memory with edges to targets and its metadata.
func put(t *testing.T, st *store.Store, text string, meta *messages.MemoryMeta, targets ...cid.Cid) cid.Cid {
	t.Helper()
	m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: text}}}
	for _, c := range targets {
		m.Edges = append(m.Edges, model.Edge{Target: c, Weight: 1})
	}
	c, block, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.PutBlock(c, block); err != nil {
			return err
		}
		tx.Set(VectorKey(c), EncodeVector([]float32{0.6, 0.8}))
		return store.SetProto(tx, Key(c), meta)
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func metaOf(t *testing.T, m *Store, c cid.Cid) *messages.MemoryMeta {
	t.Helper()
	meta, err := m.Meta(c)
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

// An acknowledged update is what the next read through the cache sees:
// the commit's event invalidated the cached record before the ack.
func TestCachedMetaFollowsCommits(t *testing.T) {
	st, m := open(t)
	c := put(t, st, "the orchard", &messages.MemoryMeta{Kind: "note", Sonas: []string{"a"}})
	if got := metaOf(t, m, c); got.AccessCount != 0 { // now cached
		t.Fatalf("access count %d", got.AccessCount)
	}
	for i := 1; i <= 3; i++ {
		op := Update([]cid.Cid{c}, func(meta *messages.MemoryMeta, _ cid.Cid) { meta.AccessCount++ })
		if err := st.Update(context.Background(), op); err != nil {
			t.Fatal(err)
		}
		if got := metaOf(t, m, c); got.AccessCount != int64(i) {
			t.Fatalf("after %d updates the cache says %d", i, got.AccessCount)
		}
	}
	if in, err := m.InSona(c, "a"); err != nil || !in {
		t.Fatalf("InSona a: %v %v", in, err)
	}
	if in, err := m.InSona(c, "b"); err != nil || in {
		t.Fatalf("InSona b: %v %v", in, err)
	}
}

// An operation reads the metadata an earlier operation of its batch wrote,
// not the cache's, which follows only what is committed.
func TestOpReadsMetaItsBatchWrote(t *testing.T) {
	st, m := open(t)
	c := put(t, st, "the orchard", &messages.MemoryMeta{Kind: "note"})
	metaOf(t, m, c) // now cached
	started, release := make(chan struct{}), make(chan struct{})
	hold := st.Submit(func(store.Tx) error { close(started); <-release; return nil })
	<-started // the next ops form one batch
	bump := st.Submit(Update([]cid.Cid{c}, func(meta *messages.MemoryMeta, _ cid.Cid) { meta.AccessCount++ }))
	var seen int64
	read := st.Submit(func(tx store.Tx) error {
		meta, err := m.MetaIn(tx, c)
		if err == nil {
			seen = meta.AccessCount
		}
		return err
	})
	close(release)
	for _, p := range []*store.Pending{hold, bump, read} {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if seen != 1 {
		t.Fatalf("the op read access count %d, want 1 (the earlier op's write)", seen)
	}
}

// A view that began before a metadata write and reads the memory after
// the write's invalidation reads the old metadata — which must not stay
// in the cache for later views. (The cache compared its generation at
// the read, not at the view's start: it kept the old metadata until the
// next write of it.)
func TestOldViewDoesNotCacheReplacedMetadata(t *testing.T) {
	st, m := open(t)
	c := put(t, st, "stored", &messages.MemoryMeta{Kind: "note", Importance: 0.1})
	err := st.View(func(r store.Reader) error {
		// The view is taken; now a commit replaces the metadata.
		if err := st.Update(context.Background(), func(tx store.Tx) error {
			return store.SetProto(tx, Key(c), &messages.MemoryMeta{Kind: "note", Importance: 0.9})
		}); err != nil {
			return err
		}
		old, err := m.MetaIn(r, c)
		if err != nil {
			return err
		}
		if old.Importance != 0.1 {
			t.Errorf("the view read importance %v, want its snapshot's 0.1", old.Importance)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := metaOf(t, m, c); got.Importance != 0.9 {
		t.Fatalf("a later view read importance %v, want 0.9: the old view's read was cached", got.Importance)
	}
}

func TestReadsOfWhatIsNotStored(t *testing.T) {
	st, m := open(t)
	c := put(t, st, "stored", &messages.MemoryMeta{Kind: "note"})
	other := put(t, st, "other", &messages.MemoryMeta{Kind: "note"})
	if err := st.Update(context.Background(), func(tx store.Tx) error {
		tx.Delete(Key(other))
		tx.Delete(VectorKey(other))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Meta(other); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("Meta of a memory not stored: %v", err)
	}
	if _, err := m.Vector(other); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("Vector of a memory not stored: %v", err)
	}
	if v, err := m.Vector(c); err != nil || len(v) != 2 || v[1] != 0.8 {
		t.Fatalf("Vector: %v %v", v, err)
	}
	if in, err := m.InSona(other, "a"); err != nil || in {
		t.Fatalf("InSona of a memory not stored: %v %v", in, err)
	}
	if _, err := m.List("not a cid", 10); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("List with a bad cursor: %v", err)
	}
	if _, err := DecodeVector([]byte{1, 2, 3}); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("a vector of 3 bytes: %v", err)
	}
}

func TestListPages(t *testing.T) {
	st, m := open(t)
	want := map[cid.Cid]bool{}
	for _, text := range []string{"one", "two", "three", "four", "five"} {
		want[put(t, st, text, &messages.MemoryMeta{Kind: "note"})] = true
	}
	seen := map[cid.Cid]bool{}
	cursor, pages := "", 0
	for {
		page, err := m.List(cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, c := range page.Items {
			if seen[c] || !want[c] {
				t.Fatalf("listed %s twice or unknown", c)
			}
			seen[c] = true
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if len(seen) != len(want) || pages != 3 {
		t.Fatalf("%d of %d memories in %d pages", len(seen), len(want), pages)
	}
}

// Reinforce steps the used memories toward their relative scores and
// propagates along edges with the hop decay; it never lowers importance.
func TestReinforcePropagatesAlongEdges(t *testing.T) {
	st, m := open(t)
	rc := config.Default().Recall
	leaf := put(t, st, "leaf", &messages.MemoryMeta{Kind: "note"})
	mid := put(t, st, "mid", &messages.MemoryMeta{Kind: "note"}, leaf)
	top := put(t, st, "top", &messages.MemoryMeta{Kind: "note"}, mid)
	high := put(t, st, "already important", &messages.MemoryMeta{Kind: "note", Importance: 0.99})
	ctx := context.Background()
	if err := m.Reinforce([]Used{{top, 2}, {high, 1}}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	step := func(signal float64) float64 {
		if signal < rc.ImportanceFloor {
			return 0
		}
		return rc.ImportanceAlpha * signal
	}
	want := map[cid.Cid]float64{top: step(1), mid: step(rc.ImportanceHopDecay)}
	if rc.ImportanceDepth >= 2 {
		want[leaf] = step(rc.ImportanceHopDecay * rc.ImportanceHopDecay)
	}
	for c, w := range want {
		if got := metaOf(t, m, c).Importance; math.Abs(got-w) > 1e-9 {
			t.Errorf("importance %v, want %v", got, w)
		}
	}
	if got := metaOf(t, m, high).Importance; got != 0.99 {
		t.Errorf("a signal of 0.5 changed importance 0.99 to %v", got)
	}

	if err := m.ReinforceDuplicate(ctx, leaf); err != nil {
		t.Fatal(err)
	}
	got := metaOf(t, m, leaf)
	if w := want[leaf] + rc.ImportanceAlpha*(1-want[leaf]); math.Abs(got.Importance-w) > 1e-9 || got.AccessCount != 1 {
		t.Errorf("after a duplicate: importance %v (want %v), access %d", got.Importance, w, got.AccessCount)
	}
}

func TestTouchCountsAndTicks(t *testing.T) {
	st, m := open(t)
	a := put(t, st, "in a", &messages.MemoryMeta{Kind: "note", Sonas: []string{"a"}, LastAccessTick: 3})
	gone := put(t, st, "in a sona that is gone", &messages.MemoryMeta{Kind: "note", Sonas: []string{"gone"}, LastAccessTick: 5})
	activity := func(sona string) (int64, bool) { return 9, sona == "a" }
	if err := st.Update(context.Background(), Touch([]cid.Cid{a, gone}, []string{"a", "gone"}, activity)); err != nil {
		t.Fatal(err)
	}
	if got := metaOf(t, m, a); got.AccessCount != 1 || got.LastAccessTick != 9 {
		t.Fatalf("touched: %v", got)
	}
	if got := metaOf(t, m, gone); got.AccessCount != 1 || got.LastAccessTick != 5 {
		t.Fatalf("touched in a sona that is gone: %v", got)
	}
}

// TestCommittedMetadataIsCached: a record a commit writes is what the
// cache then holds, and so is a hot state written after it; a record
// rewritten with Write keeps the hot state; a deleted record leaves. (The
// store's own record is changed behind the committer, where no event
// tells the cache: a read of the store would return that.)
func TestCommittedMetadataIsCached(t *testing.T) {
	st, m := openBadger(t)
	c := put(t, st, "stored", &messages.MemoryMeta{Kind: "note", Importance: 0.1, Sonas: []string{"a"}})
	behind := func() {
		t.Helper()
		raw, err := proto.Marshal(&messages.MemoryMeta{Kind: "behind"})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.WriteBehind(func(txn *badger.Txn) error { return txn.Set(Key(c), raw) }); err != nil {
			t.Fatal(err)
		}
	}
	update := func(op store.Op) {
		t.Helper()
		if err := st.Update(context.Background(), op); err != nil {
			t.Fatal(err)
		}
	}
	behind()
	if got := metaOf(t, m, c); got.Kind != "note" || got.Importance != 0.1 || got.Sonas[0] != "a" {
		t.Fatalf("the stored record: %v", got)
	}
	update(UpdateHot([]cid.Cid{c}, func(h *Hot, _ cid.Cid) { h.Importance, h.AccessCount = 0.7, 3 }))
	update(UpdateHot([]cid.Cid{c}, func(h *Hot, _ cid.Cid) { h.AccessCount++ }))
	if got := metaOf(t, m, c); got.Kind != "note" || got.Importance != 0.7 || got.AccessCount != 4 {
		t.Fatalf("after two hot writes: %v", got)
	}
	update(Update([]cid.Cid{c}, func(meta *messages.MemoryMeta, _ cid.Cid) { meta.Kind = "fact" }))
	behind()
	if got := metaOf(t, m, c); got.Kind != "fact" || got.Importance != 0.7 || got.AccessCount != 4 {
		t.Fatalf("after the record was rewritten: %v", got)
	}
	update(func(tx store.Tx) error { tx.Delete(Key(c)); return nil })
	if got, err := m.Meta(c); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("a deleted record read %v, %v", got, err)
	}
}

// Store.UpdateHot reads the hot state of a memory its batch has not
// written from the cache — what the last commit left, even when Badger
// holds something else behind the committer — and that of one an earlier
// op of its batch wrote from the transaction: two touches in one batch
// count two.
func TestUpdateHotReadsTheCommittedStateFromTheCache(t *testing.T) {
	st, m := openBadger(t)
	c := put(t, st, "stored", &messages.MemoryMeta{Kind: "note", Importance: 0.1, AccessCount: 5, Sonas: []string{"a"}})
	touch := m.Touch([]cid.Cid{c}, []string{""}, nil)
	if err := st.Update(context.Background(), touch); err != nil {
		t.Fatal(err)
	}
	// Behind the committer: the cache still holds the committed 6.
	if err := st.WriteBehind(func(txn *badger.Txn) error { return txn.Set(HotKey(c), Hot{AccessCount: 100}.encode()) }); err != nil {
		t.Fatal(err)
	}
	// Two touches in one batch: the committer is held by a first op
	// while they queue behind it.
	hold, held := make(chan struct{}), make(chan struct{})
	first := st.Submit(func(store.Tx) error { close(held); <-hold; return nil })
	<-held
	a, b := st.Submit(touch), st.Submit(touch)
	close(hold)
	for _, p := range []*store.Pending{first, a, b} {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := metaOf(t, m, c); got.AccessCount != 8 || got.Importance != 0.1 {
		t.Fatalf("after three touches of a memory stored with 5 accesses: %v, want 8 (read from the cache, not the 100 behind it; the second of a batch from its transaction)", got)
	}
}

// Has answers from the cache when it holds the memory — in a view and in
// an operation whose batch has not changed it — and from the store
// otherwise: a deletion committed, or made earlier in the operation's
// batch, makes it false.
func TestHasReadsTheCacheAndFollowsDeletes(t *testing.T) {
	st, m := openBadger(t)
	c := put(t, st, "stored", &messages.MemoryMeta{Kind: "note", Sonas: []string{"a"}})
	has := func(when string, want bool, op func(store.Tx)) {
		t.Helper()
		err := st.View(func(r store.Reader) error {
			got, err := m.Has(r, c)
			if err == nil && got != want {
				t.Errorf("%s: a view's Has %v, want %v", when, got, want)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		err = st.Update(context.Background(), func(tx store.Tx) error {
			if op != nil {
				op(tx)
			}
			got, err := m.Has(tx, c)
			if err == nil && got != (want && op == nil) {
				t.Errorf("%s: an operation's Has %v, want %v", when, got, want && op == nil)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	has("stored", true, nil)
	// Behind the committer the record goes: the cache still answers.
	if err := st.WriteBehind(func(txn *badger.Txn) error { return txn.Delete(Key(c)) }); err != nil {
		t.Fatal(err)
	}
	has("deleted behind the cache", true, nil)
	// Deleted earlier in the operation's own batch: its transaction answers.
	has("deleted by the operation", true, func(tx store.Tx) { tx.Delete(Key(c)) })
	// (That operation committed the deletion: every reader now sees it.)
	has("after the committed deletion", false, nil)
	never, _, err := (&model.Memory{Data: model.Data{Text: &model.TextData{Content: "never stored"}}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.View(func(r store.Reader) error {
		got, err := m.Has(r, never)
		if err == nil && got {
			t.Error("a memory never stored: Has true")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// Reinforce's screen in a view leaves every importance where the whole
// walk applied in the committer leaves it: on random graphs with random
// importances, after reinforcements one after another and then many
// screened before any of them commits (in views older than the others'
// commits), the importances are those of a model that raises every
// memory reached, in the order of the commits.
func TestReinforceScreenIsExact(t *testing.T) {
	rc := config.Default().Recall
	for round := range 4 {
		rng := rand.New(rand.NewSource(int64(round)))
		st, m := open(t)
		var mems []cid.Cid
		want := map[cid.Cid]float64{}
		for i := range 80 {
			var targets []cid.Cid
			for range rng.Intn(6) {
				if len(mems) > 0 {
					if c := mems[rng.Intn(len(mems))]; !slices.Contains(targets, c) {
						targets = append(targets, c)
					}
				}
			}
			slices.SortFunc(targets, func(a, b cid.Cid) int { return strings.Compare(a.KeyString(), b.KeyString()) })
			imp := 0.0
			if rng.Intn(2) == 0 {
				imp = rng.Float64()
			}
			c := put(t, st, fmt.Sprint("memory ", round, " ", i), &messages.MemoryMeta{Kind: "note", Importance: imp}, targets...)
			mems, want[c] = append(mems, c), imp
		}
		// The model: every memory the walk reaches (propagate, the walk
		// the committer made before) is stepped toward its signal.
		model := func(used []Used) {
			var signal map[cid.Cid]float64
			st.View(func(r store.Reader) error {
				signal = m.propagate(r, seedsOf(used), nil)
				return nil
			})
			for c, s := range signal {
				if s > want[c] {
					want[c] += rc.ImportanceAlpha * (s - want[c])
				}
			}
		}
		pick := func() []Used {
			var used []Used
			for range 1 + rng.Intn(5) {
				used = append(used, Used{CID: mems[rng.Intn(len(mems))], Score: 0.1 + rng.Float64()})
			}
			return used
		}
		ctx := context.Background()
		for range 30 {
			used := pick()
			model(used)
			if err := m.Reinforce(used).Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Screened while the committer is held: every view is older than
		// the other reinforcements' commits, which then run in the order
		// they were submitted.
		release := make(chan struct{})
		held := st.Submit(func(store.Tx) error { <-release; return nil })
		var pending []*store.Pending
		for range 20 {
			used := pick()
			model(used)
			pending = append(pending, m.Reinforce(used))
		}
		close(release)
		for _, p := range append(pending, held) {
			if err := p.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range mems {
			if got := metaOf(t, m, c).Importance; math.Abs(got-want[c]) > 1e-9 {
				t.Fatalf("round %d: importance %v, want %v", round, got, want[c])
			}
		}
	}
}

// Records read from the store, and committed records read from the cache,
// share one copy of each evaluation metric's name, and keep their values.
func TestReadMetricNamesShared(t *testing.T) {
	st, m := open(t)
	var cs []cid.Cid
	for i := range 2 {
		metrics := map[string]float64{"novelty": float64(i) + 0.25, "utility": float64(i) + 0.5}
		cs = append(cs, put(t, st, fmt.Sprintf("evaluated %d", i), &messages.MemoryMeta{Evaluation: &messages.EvalSummary{Metrics: metrics}}))
	}
	var names [2]map[string]*byte
	for i, c := range cs {
		var got *messages.MemoryMeta
		if err := st.View(func(r store.Reader) (err error) { got, err = Read(r, c); return err }); err != nil {
			t.Fatal(err)
		}
		if m := got.GetEvaluation().GetMetrics(); len(m) != 2 || m["novelty"] != float64(i)+0.25 || m["utility"] != float64(i)+0.5 {
			t.Fatalf("record %d: metrics %v", i, m)
		}
		names[i] = map[string]*byte{}
		for k := range got.GetEvaluation().GetMetrics() {
			names[i][k] = unsafe.StringData(k)
		}
	}
	for k, p := range names[0] {
		if names[1][k] != p {
			t.Fatalf("metric %q: the two records hold their own copies of its name", k)
		}
	}
	own := strings.Clone("novelty") // a name of its own, as a decode makes
	err := st.Update(context.Background(), Update(cs[:1], func(meta *messages.MemoryMeta, _ cid.Cid) {
		meta.Evaluation = &messages.EvalSummary{Metrics: map[string]float64{own: 9}}
	}))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range metaOf(t, m, cs[0]).GetEvaluation().GetMetrics() {
		if k != "novelty" || v != 9 || unsafe.StringData(k) != names[0]["novelty"] {
			t.Fatalf("the committed record read from the cache: metric %q = %v, its name shared: %v", k, v, unsafe.StringData(k) == names[0]["novelty"])
		}
	}
}

// Records read from the store share one copy of each sona, agent and
// kind they name.
func TestReadRecordsShareTheirNames(t *testing.T) {
	st, _ := open(t)
	var got [2]*messages.MemoryMeta
	for i := range got {
		c := put(t, st, fmt.Sprintf("named %d", i), &messages.MemoryMeta{
			Sonas: []string{strings.Clone("sona-a"), strings.Clone("sona-b")}, AgentId: strings.Clone("agent"), Kind: strings.Clone("fact")})
		if err := st.View(func(r store.Reader) (err error) { got[i], err = Read(r, c); return err }); err != nil {
			t.Fatal(err)
		}
	}
	a, b := got[0], got[1]
	if !slices.Equal(a.Sonas, []string{"sona-a", "sona-b"}) || a.AgentId != "agent" || a.Kind != "fact" {
		t.Fatalf("record read back: sonas %v, agent %q, kind %q", a.Sonas, a.AgentId, a.Kind)
	}
	for _, f := range []struct {
		name string
		x, y string
	}{{"sonas[0]", a.Sonas[0], b.Sonas[0]}, {"sonas[1]", a.Sonas[1], b.Sonas[1]}, {"agent", a.AgentId, b.AgentId}, {"kind", a.Kind, b.Kind}} {
		if unsafe.StringData(f.x) != unsafe.StringData(f.y) {
			t.Errorf("%s: the two records hold their own copies of %q", f.name, f.x)
		}
	}
}

// BenchmarkDecodeMeta decodes an evaluated record as a read from the store
// does (a dozen metrics, a priority, a sona).
func BenchmarkDecodeMeta(b *testing.B) {
	metrics := map[string]float64{}
	for i := range 12 {
		metrics[fmt.Sprintf("metric-%02d", i)] = float64(i) / 12
	}
	raw, err := proto.Marshal(&messages.MemoryMeta{Sonas: []string{"8c0f2b1e-5b7a-4c1e-9f0a-1d2e3f4a5b6c"}, Kind: "note", Importance: 0.4,
		CreatedAt: 1763791234, Seq: 12345, Evaluation: &messages.EvalSummary{Metrics: metrics, Priority: &messages.Priority{Score: 0.5, DecayRate: 0.4}}})
	if err != nil {
		b.Fatal(err)
	}
	c := cid.Undef
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeMeta(raw, c); err != nil {
			b.Fatal(err)
		}
	}
}

// propagate leaves out a visit a stronger one of the same memory, queued
// before it, makes moot: on random graphs whose memories many edges
// reach, its signal is that of the walk that queues every visit.
func TestPropagateSkipsOnlyMootVisits(t *testing.T) {
	everyVisit := func(m *Store, r store.Reader, seeds map[cid.Cid]float64) map[cid.Cid]float64 {
		type visit struct {
			c        cid.Cid
			strength float64
			depth    int
		}
		var queue []visit
		for _, c := range slices.SortedFunc(maps.Keys(seeds), func(a, b cid.Cid) int { return strings.Compare(a.KeyString(), b.KeyString()) }) {
			queue = append(queue, visit{c, seeds[c], 0})
		}
		signal := map[cid.Cid]float64{}
		for ; len(queue) > 0; queue = queue[1:] {
			v := queue[0]
			if v.strength < m.rc.ImportanceFloor || signal[v.c] >= v.strength {
				continue
			}
			signal[v.c] = v.strength
			if v.depth == m.rc.ImportanceDepth {
				continue
			}
			mem, err := m.MemoryIn(r, v.c)
			if err != nil {
				continue
			}
			for _, e := range mem.Edges {
				queue = append(queue, visit{e.Target, v.strength * m.rc.ImportanceHopDecay, v.depth + 1})
			}
		}
		return signal
	}
	st, m := open(t)
	rng := rand.New(rand.NewSource(7))
	var mems []cid.Cid
	for i := range 120 {
		var targets []cid.Cid
		for range rng.Intn(8) {
			if len(mems) > 0 {
				// Most edges go to a few memories, as a sona's
				// responses draw on the same ones.
				c := mems[rng.Intn(min(len(mems), 12))]
				if rng.Intn(3) == 0 {
					c = mems[rng.Intn(len(mems))]
				}
				if !slices.Contains(targets, c) {
					targets = append(targets, c)
				}
			}
		}
		slices.SortFunc(targets, func(a, b cid.Cid) int { return strings.Compare(a.KeyString(), b.KeyString()) })
		mems = append(mems, put(t, st, fmt.Sprint("memory ", i), &messages.MemoryMeta{Kind: "note"}, targets...))
	}
	for _, rc := range []struct {
		depth        int
		decay, floor float64
	}{{2, 0.5, 0.05}, {3, 0.7, 0.01}, {4, 0.9, 0}} {
		m.rc.ImportanceDepth, m.rc.ImportanceHopDecay, m.rc.ImportanceFloor = rc.depth, rc.decay, rc.floor
		w := newWalk() // each round walks in the room of the one before (Reinforce's walks)
		widest := 0
		for round := range 40 {
			var used []Used
			for range 1 + rng.Intn(6) {
				used = append(used, Used{CID: mems[len(mems)-1-rng.Intn(40)], Score: 0.1 + rng.Float64()})
			}
			seeds := seedsOf(used)
			st.View(func(r store.Reader) error {
				got, want := m.propagate(r, seeds, w), everyVisit(m, r, seeds)
				widest = max(widest, len(want))
				if !maps.Equal(got, want) {
					t.Fatalf("depth %d, round %d: signal of %d memories, want %d: %v, want %v", rc.depth, round, len(got), len(want), got, want)
				}
				return nil
			})
		}
		if widest < 20 {
			t.Fatalf("depth %d: the widest walk reached %d memories", rc.depth, widest)
		}
	}
}
