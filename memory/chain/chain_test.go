package chain_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/chain/chaintest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// memories is how many memories the store holds (m/ records).
func memories(c *chaintest.Chains) int {
	c.T.Helper()
	n := 0
	if err := c.Store.View(func(r store.Reader) error {
		return store.Keys(r, meta.Prefix, func([]byte) { n++ })
	}); err != nil {
		c.T.Fatal(err)
	}
	return n
}

func TestChainNeverForks(t *testing.T) {
	c := chaintest.Open(t, chain.Options{})
	o := c.Owner("a")
	o.Text("first")
	// A second owner with a stale view of the same chain.
	stale := &chaintest.Owner{C: c, Sona: o.Sona}
	if _, err := stale.TryAdd(chaintest.TextMemory("fork"), nil); !errors.Is(err, base.ErrChainConflict) {
		t.Fatalf("err = %v, want ErrChainConflict", err)
	}
	rec, _ := c.Sonas.Get(o.Sona)
	if rec.Length != 1 {
		t.Fatalf("length %d after refused fork", rec.Length)
	}
	// A plan that expected another seq is refused too.
	p, err := c.Writer.Prepare(chaintest.TextMemory("elsewhere"), make([]float32, c.Index.Dims()), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.ExpectSeq = new(int64)
	plan, err := model.PlanAppend(o.Sona, o.Head, o.N, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Store.Update(context.Background(), c.Writer.Op(plan)); !errors.Is(err, base.ErrChainConflict) {
		t.Fatalf("append at seq 1 expected at 0: %v", err)
	}
}

// Two appends planned at the same seq of a chain, committed in one
// batch: the second sees the first's record — not the one the commits
// left in the writer's cache — and is refused.
func TestAppendsInOneBatchSeeEachOther(t *testing.T) {
	c := chaintest.Open(t, chain.Options{})
	o := c.Owner("a")
	o.Text("first") // its record is the one cached
	plan := func(text string) *model.Append {
		t.Helper()
		p, err := c.Writer.Prepare(chaintest.TextMemory(text), make([]float32, c.Index.Dims()), nil)
		if err != nil {
			t.Fatal(err)
		}
		a, err := model.PlanAppend(o.Sona, o.Head, o.N, p, 0)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	one, two := plan("one"), plan("two")
	// The committer waits in an op of its own while both queue behind it:
	// it takes them into its next batch together.
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	blocker := c.Store.Submit(func(store.Tx) error {
		once.Do(func() { close(entered) })
		<-release
		return nil
	})
	<-entered
	first, second := c.Store.Submit(c.Writer.Op(one)), c.Store.Submit(c.Writer.Op(two))
	close(release)
	ctx := context.Background()
	if err := blocker.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := second.Wait(ctx); !errors.Is(err, base.ErrChainConflict) {
		t.Fatalf("a second append at the same seq in the same batch: %v, want ErrChainConflict", err)
	}
	if rec, _ := c.Sonas.Get(o.Sona); rec.Length != 2 {
		t.Fatalf("length %d, want 2", rec.Length)
	}
}

func TestAppendRefusesDanglingLinksWritingNothing(t *testing.T) {
	c := chaintest.Open(t, chain.Options{})
	o := c.Owner("a")
	nowhere, err := model.SumCID(model.CodecDagCBOR, []byte("nowhere"))
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*model.Memory{
		"edge": {Data: model.Data{Text: &model.TextData{Content: "x"}}, Edges: []model.Edge{{Target: nowhere, Weight: 1}}},
		"file": {Data: model.Data{File: &model.FileData{Content: nowhere}}},
	} {
		if _, err := o.TryAdd(m, nil); !errors.Is(err, base.ErrInvalid) {
			t.Fatalf("%s: err = %v, want ErrInvalid", name, err)
		}
		if err := c.Writer.CheckLinks(m, func(cid.Cid) bool { return false }); !errors.Is(err, base.ErrInvalid) {
			t.Fatalf("%s: CheckLinks: %v", name, err)
		}
		if err := c.Writer.CheckLinks(m, func(c cid.Cid) bool { return c == nowhere }); err != nil {
			t.Fatalf("%s: CheckLinks with the target in flight: %v", name, err)
		}
	}
	if n := memories(c); n != 0 {
		t.Fatalf("%d memories after refused appends", n)
	}
	if rec, _ := c.Sonas.Get(o.Sona); rec.Length != 0 || rec.Head != nil {
		t.Fatalf("sona moved: %v", rec)
	}
	if _, err := o.TryAdd(chaintest.TextMemory("x"), &messages.MemoryMeta{Kind: "bogus"}); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("unknown kind: err = %v", err)
	}
}

func TestSharedMemoryJoinsSecondSona(t *testing.T) {
	c := chaintest.Open(t, chain.Options{})
	a, b := c.Owner("a"), c.Owner("b")
	c1 := a.Text("the same words")
	c.Clock.Advance(time.Minute)
	c2 := b.Text("the same words")
	if c1 != c2 {
		t.Fatal("equal memories have different CIDs")
	}
	md, err := c.Memories.Meta(c1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(md.Sonas, []string{a.Sona, b.Sona}) || len(md.Joins) != 1 || md.Joins[0].Sona != b.Sona ||
		md.Joins[0].JoinedAt != chaintest.Epoch.Add(time.Minute).Unix() || md.Seq != 1 || md.CreatedAt != chaintest.Epoch.Unix() {
		t.Fatalf("metadata %v", md)
	}
	if n := memories(c); n != 1 {
		t.Fatalf("memories = %d, want 1", n)
	}
	if in, _ := c.Memories.InSona(c1, b.Sona); !in {
		t.Fatal("not in second sona")
	}
	// Once in a sona, never twice.
	if _, err := c.OwnerOf(b.Sona).TryAdd(chaintest.TextMemory("the same words"), nil); !errors.Is(err, base.ErrChainConflict) {
		t.Fatalf("a memory appended twice to one sona: %v", err)
	}
	// What followed each commit: the first made the memory, the second
	// joined it, at the log's end.
	if len(c.Appended()) != 2 || !c.Appended()[0].New || c.Appended()[0].LogSeq != 1 || c.Appended()[1].New || c.Appended()[1].LogSeq != 1 {
		t.Fatalf("appended: %+v", c.Appended())
	}
	page, err := c.Sonas.Chain(b.Sona, 0, 10)
	if err != nil || len(page.Items) != 1 || page.Items[0].Memory != c1 || page.Items[0].LogSeq != 1 {
		t.Fatalf("chain of b: %+v %v", page, err)
	}
}

// A join rewrites the memory's record with the hot state its use gave it
// (its o/ record), as meta.Write does: a record as committed is the
// memory's metadata, hot state included (the metadata cache holds it).
func TestJoinKeepsTheHotState(t *testing.T) {
	c := chaintest.Open(t, chain.Options{})
	a, b := c.Owner("a"), c.Owner("b")
	m := a.Text("the same words")
	if err := c.Store.Update(context.Background(), meta.UpdateHot([]cid.Cid{m}, func(h *meta.Hot, _ cid.Cid) {
		h.Importance, h.AccessCount = 0.9, 7
	})); err != nil {
		t.Fatal(err)
	}
	b.Text("the same words")
	rec := &messages.MemoryMeta{}
	if err := c.Store.View(func(r store.Reader) error {
		_, err := store.GetProto(r, meta.Key(m), rec)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if rec.Importance != 0.9 || rec.AccessCount != 7 || len(rec.Sonas) != 2 {
		t.Fatalf("the record after the join: %v, want importance 0.9, 7 accesses, two sonas", rec)
	}
}

// Each contribution writes in the append's transaction and sees what the
// chain wrote; one that fails fails the append, which writes nothing and
// changes nothing in memory.
func TestContributionsJoinTheAppend(t *testing.T) {
	fail := false
	var seen []chain.Written
	note := func(tx store.Tx, w *chain.Written) error {
		seen = append(seen, *w)
		tx.Set([]byte(fmt.Sprintf("z/%d", w.Seq)), w.Item.CID.Bytes())
		return nil
	}
	refuse := func(tx store.Tx, w *chain.Written) error {
		if fail {
			return fmt.Errorf("%w: refused", base.ErrInvalid)
		}
		return nil
	}
	c := chaintest.Open(t, chain.Options{Contributions: []chain.Contribution{note, refuse}})
	o := c.Owner("a")
	first := o.Text("first")
	c.Clock.Advance(time.Second)
	second := o.Text("second", model.Edge{Target: first, Weight: 1})
	if len(seen) != 2 || seen[0].Prev != nil || *seen[1].Prev != first || !seen[1].New || seen[1].LogSeq != 2 ||
		seen[1].Meta.CreatedAt != chaintest.Epoch.Add(time.Second).Unix() || seen[1].Meta.LastAccessTick != 2 {
		t.Fatalf("contributions saw %+v", seen)
	}
	err := c.Store.View(func(r store.Reader) error {
		v, err := r.Get([]byte("z/1"))
		if err == nil && string(v) != string(second.Bytes()) {
			err = fmt.Errorf("z/1 = %x", v)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	fail = true
	before := len(c.Appended())
	if _, err := o.TryAdd(chaintest.TextMemory("third"), nil); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("a contribution's error: %v", err)
	}
	if n := memories(c); n != 2 {
		t.Fatalf("%d memories after a failed contribution", n)
	}
	if rec, _ := c.Sonas.Get(o.Sona); rec.Length != 2 || len(c.Appended()) != before || c.Index.Len() != 2 {
		t.Fatalf("a failed append moved the sona (%d), was told (%d) or indexed (%d)", rec.Length, len(c.Appended())-before, c.Index.Len())
	}
	if err := c.Store.View(func(r store.Reader) error {
		ok, err := r.Has([]byte("z/2"))
		if ok {
			err = errors.New("z/2 written")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// A registry loaded from the store holds what the appends registered:
// the same records, members and centroids, to the bit.
func TestSonasLoadAsAppended(t *testing.T) {
	c := chaintest.Open(t, chain.Options{})
	a, b := c.Owner("a"), c.Owner("b")
	for i := range 5 {
		a.Text(fmt.Sprintf("alpha memory %d about tomatoes", i))
		b.Text(fmt.Sprintf("beta memory %d about the harbour", i))
	}
	b.Text("alpha memory 2 about tomatoes") // joins b
	loaded := chain.NewSonas(c.Store, c.Embed, c.Clock, c.Index.Dims())
	if err := c.Store.View(func(r store.Reader) error {
		if err := loaded.Load(r); err != nil {
			return err
		}
		if err := loaded.CheckHeads(r); err != nil {
			return err
		}
		return loaded.LoadMembers(r, c.Index)
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a.Sona, b.Sona} {
		want, wantLen, _ := c.Sonas.Snapshot(id)
		got, gotLen, ok := loaded.Snapshot(id)
		if !ok || gotLen != wantLen || !slices.Equal(got, want) {
			t.Fatalf("sona %s loaded: length %d (want %d), centroid equal %v", id, gotLen, wantLen, slices.Equal(got, want))
		}
		if !slices.Equal(loaded.Members(id, "", false), c.Sonas.Members(id, "", false)) {
			t.Fatalf("sona %s: members differ", id)
		}
	}
	if got := len(loaded.Members(b.Sona, a.Sona, true)); got != 11 {
		t.Fatalf("b with a as its backbone: %d members", got)
	}
	// The same as the vector index searches them: a run of each, by name.
	runs := loaded.Runs(b.Sona, a.Sona, true)
	if len(runs) != 2 || runs[0].Name != b.Sona || runs[1].Name != a.Sona ||
		!slices.Equal(append(slices.Clone(runs[0].IDs), runs[1].IDs...), loaded.Members(b.Sona, a.Sona, true)) {
		t.Fatalf("b with a as its backbone: runs %+v", runs)
	}
	if runs := loaded.Runs(b.Sona, a.Sona, false); len(runs) != 1 || runs[0].Name != b.Sona {
		t.Fatalf("b without its backbone: runs %+v", runs)
	}
}

// A stored sona record whose last memory is not a CID is damage: the
// check at open and the parsed state say so (base.ErrCorrupt), nothing
// panics.
func TestSonaRecordDamagedCID(t *testing.T) {
	c := chaintest.Open(t, chain.Options{})
	a := c.Owner("a")
	a.Text("a memory")
	rec, err := c.Sonas.Get(a.Sona)
	if err != nil {
		t.Fatal(err)
	}
	rec.LastMemory = proto.String("not-a-cid")
	if err := c.Store.Update(context.Background(), func(tx store.Tx) error {
		return store.SetProto(tx, chain.SonaKey(a.Sona), rec)
	}); err != nil {
		t.Fatal(err)
	}
	loaded := chain.NewSonas(c.Store, c.Embed, c.Clock, c.Index.Dims())
	err = c.Store.View(func(r store.Reader) error {
		if err := loaded.Load(r); err != nil {
			return err
		}
		return loaded.CheckHeads(r)
	})
	if !errors.Is(err, base.ErrCorrupt) || !strings.Contains(err.Error(), "last memory of sona "+a.Sona) {
		t.Fatalf("CheckHeads: %v, want base.ErrCorrupt naming the last memory", err)
	}
	if _, err := loaded.State(a.Sona); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("State: %v, want base.ErrCorrupt", err)
	}
	if st, err := c.Sonas.State(a.Sona); err != nil || st.Length != 1 || st.Head == nil || st.LastMemory == nil {
		t.Fatalf("the running registry's state: %+v, %v", st, err)
	}
}

func TestSonaNamesAndResolve(t *testing.T) {
	c := chaintest.Open(t, chain.Options{})
	ctx := context.Background()
	for _, bad := range []string{"", " alice", "a/b", `a\b`, ".", "..", "ali\u202ece", "zero\u200bwidth", "bell\a", strings.Repeat("x", chain.MaxSonaName+1)} {
		if _, err := c.Sonas.Create(ctx, bad); !errors.Is(err, base.ErrInvalid) {
			t.Errorf("sona name %q: %v", bad, err)
		}
	}
	if err := chain.ValidateSpeaker(""); err != nil {
		t.Errorf("no speaker: %v", err)
	}
	if err := chain.ValidateSpeaker("👩‍🚀 Ada"); err != nil { // a zero-width joiner in an emoji
		t.Errorf("an emoji sequence: %v", err)
	}
	alice := c.Owner("alice")
	rec, err := c.Sonas.Resolve(strings.ToUpper(alice.Sona))
	if err != nil || rec.Uuid != alice.Sona {
		t.Fatalf("by uuid in upper case: %v %v", rec, err)
	}
	if rec, err := c.Sonas.Resolve("alice"); err != nil || rec.Uuid != alice.Sona {
		t.Fatalf("by name: %v %v", rec, err)
	}
	if _, err := c.Sonas.Resolve("bob"); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("no such sona: %v", err)
	}
	if _, err := c.Sonas.Create(ctx, "alice"); !errors.Is(err, base.ErrExists) {
		t.Fatalf("a second alice: %v", err)
	}
	if _, err := c.Sonas.CreateDuplicate(ctx, "alice"); err != nil {
		t.Fatalf("a second alice asked for: %v", err)
	}
	if _, err := c.Sonas.Resolve("alice"); !errors.Is(err, base.ErrAmbiguous) {
		t.Fatalf("two alices: %v", err)
	}
	page, err := c.Sonas.ListNamed("alice", "", 1)
	if err != nil || len(page.Items) != 1 || page.Next == "" {
		t.Fatalf("first page of alices: %v %v", page, err)
	}
	if next, err := c.Sonas.ListNamed("alice", page.Next, 1); err != nil || len(next.Items) != 1 || next.Next != "" {
		t.Fatalf("second page of alices: %v %v", next, err)
	}
	if n := c.Sonas.Count(); n != 2 {
		t.Fatalf("%d sonas", n)
	}
}

// Names are unique: of many creations of one name at once, one succeeds.
func TestConcurrentCreationsOfOneName(t *testing.T) {
	c := chaintest.Open(t, chain.Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = c.Sonas.Create(ctx, "carol") })
	}
	wg.Wait()
	made := 0
	for _, err := range errs {
		switch {
		case err == nil:
			made++
		case !errors.Is(err, base.ErrExists):
			t.Fatalf("a refused creation: %v", err)
		}
	}
	if ids, _ := c.Sonas.Named("carol"); made != 1 || len(ids) != 1 || c.Sonas.Count() != 1 {
		t.Fatalf("%d creations succeeded, %d sonas named carol, %d sonas", made, len(ids), c.Sonas.Count())
	}
}

func TestBackboneIsMadeOnceAndListed(t *testing.T) {
	c := chaintest.Open(t, chain.Options{})
	ctx := context.Background()
	if c.Backbone.Sona() != "" {
		t.Fatal("a backbone before any write")
	}
	user := c.Owner(chain.BackboneName) // a sona of the self may be called "backbone"
	if _, err := c.Backbone.Append(ctx, nil); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("append before the backbone exists: %v", err)
	}
	first, existed, err := c.Backbone.Write(ctx, "ada", "the self keeps its promises", nil)
	if err != nil || existed {
		t.Fatalf("first write: %v %v", existed, err)
	}
	id := c.Backbone.Sona()
	if !c.Backbone.Is(id) || c.Backbone.Is("") {
		t.Fatal("Is")
	}
	again, existed, err := c.Backbone.Write(ctx, "ada", "the self keeps its promises", nil)
	if err != nil || !existed || again != first {
		t.Fatalf("the same write again: %v %v", existed, err)
	}
	if _, _, err := c.Backbone.Write(ctx, "ada", "", nil); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("empty content: %v", err)
	}
	c.Backbone.Write(ctx, "grace", "it remembers who it talks to", map[string]string{"k": "v"})
	page, err := c.Backbone.List(0, 10)
	if err != nil || len(page.Items) != 2 || page.Items[0].Memory != first {
		t.Fatalf("the backbone's list: %v %v", page, err)
	}
	if ids, _ := c.Sonas.Named(chain.BackboneName); len(ids) != 2 || !slices.Contains(ids, id) || !slices.Contains(ids, user.Sona) || id == user.Sona {
		t.Fatalf("sonas named backbone: %v (the backbone's %s, the user's %s)", ids, id, user.Sona)
	}
	// A registry loaded from the store finds the same backbone.
	loaded := chain.NewBackbone(c.Store, c.Sonas, c.Writer, nil, c.Clock)
	if err := c.Store.View(loaded.Load); err != nil || loaded.Sona() != id {
		t.Fatalf("loaded backbone %q: %v", loaded.Sona(), err)
	}
	md, err := c.Memories.Meta(first)
	if err != nil || !md.Backbone || md.Kind != "fact" || md.AgentId != "ada" {
		t.Fatalf("backbone memory's metadata: %v %v", md, err)
	}
}

func TestFilesBelongToTheirSonas(t *testing.T) {
	c := chaintest.Open(t, chain.Options{})
	ctx := context.Background()
	a, b := c.Owner("a"), c.Owner("b")
	if _, err := c.Writer.PutFile(ctx, []byte("data"), "no-such-sona"); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("a file for a sona that is not: %v", err)
	}
	f, err := c.Writer.PutFile(ctx, []byte("a's file"), a.Sona)
	if err != nil {
		t.Fatal(err)
	}
	in := func(c2 cid.Cid, sona string) bool {
		ok, err := c.Writer.FileInSonas(c2, func(s string) bool { return s == sona })
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !in(f, a.Sona) || in(f, b.Sona) {
		t.Fatal("an upload is its sona's only")
	}
	// A file memory of it in b lets b name it too.
	if _, err := b.TryAdd(&model.Memory{Data: model.Data{File: &model.FileData{Content: f}}}, nil); err != nil {
		t.Fatal(err)
	}
	if !in(f, b.Sona) {
		t.Fatal("b holds a file memory of it")
	}
}
