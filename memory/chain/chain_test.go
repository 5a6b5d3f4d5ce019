package chain

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

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/vector"
	"github.com/memoria-ai/memoria/messages"
)

var epoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// chains is the chain package over an in-memory store, wired as the
// composition root wires it.
type chains struct {
	t     *testing.T
	st    *store.Store
	mems  *meta.Store
	index *vector.Index
	sonas *Sonas
	w     *Writer
	bb    *Backbone
	clock *clock.Fake

	mu       sync.Mutex
	appended []*Written // told to OnAppended
}

func newChains(t *testing.T, contributions ...Contribution) *chains {
	t.Helper()
	cfg := config.Default()
	st, err := store.OpenMemory(store.OptionsOf(cfg.Store))
	if err != nil {
		t.Fatal(err)
	}
	emb := llm.NewHashedEmbedder(llm.DefaultDims)
	embed := func(ctx context.Context, texts ...string) ([][]float32, error) {
		vecs, err := emb.Embed(ctx, texts)
		for _, v := range vecs {
			base.Normalize(v)
		}
		return vecs, err
	}
	c := &chains{t: t, st: st, clock: clock.NewFake(epoch)}
	c.mems = meta.New(st, 64, cfg.Recall)
	c.index = vector.New(vector.Options{Dims: emb.Dims(), Clock: c.clock})
	c.sonas = NewSonas(st, embed, c.clock, emb.Dims())
	c.w = NewWriter(st, c.sonas, c.mems, c.index, Options{Config: cfg, Embed: embed, Contributions: contributions,
		OnAppended: func(w *Written) {
			c.mu.Lock()
			c.appended = append(c.appended, w)
			c.mu.Unlock()
		}})
	c.bb = NewBackbone(st, c.sonas, c.w, embed, c.clock)
	t.Cleanup(func() {
		c.index.Close()
		st.Close()
	})
	return c
}

// owner plays a sona's actor: it appends memories one after the other.
type owner struct {
	c    *chains
	sona string
	head *cid.Cid
	n    int64
}

func (c *chains) owner(name string) *owner {
	c.t.Helper()
	rec, err := c.sonas.Create(context.Background(), name)
	if err != nil {
		c.t.Fatal(err)
	}
	return &owner{c: c, sona: rec.Uuid}
}

func (o *owner) tryAdd(m *model.Memory, md *messages.MemoryMeta) (cid.Cid, error) {
	ctx := context.Background()
	vecs, err := o.c.w.o.Embed(ctx, m.Text())
	if err != nil {
		return cid.Undef, err
	}
	p, err := o.c.w.Prepare(m, vecs[0], md)
	if err != nil {
		return cid.Undef, err
	}
	plan, err := model.PlanAppend(o.sona, o.head, o.n, p, o.c.clock.Now().Unix())
	if err != nil {
		return cid.Undef, err
	}
	if err := o.c.st.Update(ctx, o.c.w.Op(plan)); err != nil {
		return cid.Undef, err
	}
	o.head, o.n = plan.Next()
	return p.CID, nil
}

func (o *owner) text(content string, edges ...model.Edge) cid.Cid {
	o.c.t.Helper()
	model.SortEdges(edges)
	c, err := o.tryAdd(&model.Memory{Data: model.Data{Text: &model.TextData{Content: content}}, Edges: edges}, nil)
	if err != nil {
		o.c.t.Fatal(err)
	}
	return c
}

func textMemory(s string) *model.Memory {
	return &model.Memory{Data: model.Data{Text: &model.TextData{Content: s}}}
}

// memories is how many memories the store holds (m/ records).
func (c *chains) memories() int {
	c.t.Helper()
	n := 0
	if err := c.st.View(func(r store.Reader) error {
		return store.Keys(r, meta.Prefix, func([]byte) { n++ })
	}); err != nil {
		c.t.Fatal(err)
	}
	return n
}

func TestChainNeverForks(t *testing.T) {
	c := newChains(t)
	o := c.owner("a")
	o.text("first")
	// A second owner with a stale view of the same chain.
	stale := &owner{c: c, sona: o.sona}
	if _, err := stale.tryAdd(textMemory("fork"), nil); !errors.Is(err, base.ErrChainConflict) {
		t.Fatalf("err = %v, want ErrChainConflict", err)
	}
	rec, _ := c.sonas.Get(o.sona)
	if rec.Length != 1 {
		t.Fatalf("length %d after refused fork", rec.Length)
	}
	// A plan that expected another seq is refused too.
	p, err := c.w.Prepare(textMemory("elsewhere"), make([]float32, c.index.Dims()), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.ExpectSeq = new(int64)
	plan, err := model.PlanAppend(o.sona, o.head, o.n, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.st.Update(context.Background(), c.w.Op(plan)); !errors.Is(err, base.ErrChainConflict) {
		t.Fatalf("append at seq 1 expected at 0: %v", err)
	}
}

func TestAppendRefusesDanglingLinksWritingNothing(t *testing.T) {
	c := newChains(t)
	o := c.owner("a")
	nowhere, err := model.SumCID(model.CodecDagCBOR, []byte("nowhere"))
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*model.Memory{
		"edge": {Data: model.Data{Text: &model.TextData{Content: "x"}}, Edges: []model.Edge{{Target: nowhere, Weight: 1}}},
		"file": {Data: model.Data{File: &model.FileData{Content: nowhere}}},
	} {
		if _, err := o.tryAdd(m, nil); !errors.Is(err, base.ErrInvalid) {
			t.Fatalf("%s: err = %v, want ErrInvalid", name, err)
		}
		if err := c.w.CheckLinks(m, func(cid.Cid) bool { return false }); !errors.Is(err, base.ErrInvalid) {
			t.Fatalf("%s: CheckLinks: %v", name, err)
		}
		if err := c.w.CheckLinks(m, func(c cid.Cid) bool { return c == nowhere }); err != nil {
			t.Fatalf("%s: CheckLinks with the target in flight: %v", name, err)
		}
	}
	if n := c.memories(); n != 0 {
		t.Fatalf("%d memories after refused appends", n)
	}
	if rec, _ := c.sonas.Get(o.sona); rec.Length != 0 || rec.Head != nil {
		t.Fatalf("sona moved: %v", rec)
	}
	if _, err := o.tryAdd(textMemory("x"), &messages.MemoryMeta{Kind: "bogus"}); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("unknown kind: err = %v", err)
	}
}

func TestSharedMemoryJoinsSecondSona(t *testing.T) {
	c := newChains(t)
	a, b := c.owner("a"), c.owner("b")
	c1 := a.text("the same words")
	c.clock.Advance(time.Minute)
	c2 := b.text("the same words")
	if c1 != c2 {
		t.Fatal("equal memories have different CIDs")
	}
	md, err := c.mems.Meta(c1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(md.Sonas, []string{a.sona, b.sona}) || len(md.Joins) != 1 || md.Joins[0].Sona != b.sona ||
		md.Joins[0].JoinedAt != epoch.Add(time.Minute).Unix() || md.Seq != 1 || md.CreatedAt != epoch.Unix() {
		t.Fatalf("metadata %v", md)
	}
	if n := c.memories(); n != 1 {
		t.Fatalf("memories = %d, want 1", n)
	}
	if in, _ := c.mems.InSona(c1, b.sona); !in {
		t.Fatal("not in second sona")
	}
	// Once in a sona, never twice.
	if _, err := (&owner{c: c, sona: b.sona, head: b.head, n: b.n}).tryAdd(textMemory("the same words"), nil); !errors.Is(err, base.ErrChainConflict) {
		t.Fatalf("a memory appended twice to one sona: %v", err)
	}
	// What followed each commit: the first made the memory, the second
	// joined it, at the log's end.
	if len(c.appended) != 2 || !c.appended[0].New || c.appended[0].LogSeq != 1 || c.appended[1].New || c.appended[1].LogSeq != 1 {
		t.Fatalf("appended: %+v", c.appended)
	}
	page, err := c.sonas.Chain(b.sona, 0, 10)
	if err != nil || len(page.Items) != 1 || page.Items[0].Memory != c1 || page.Items[0].LogSeq != 1 {
		t.Fatalf("chain of b: %+v %v", page, err)
	}
}

// Each contribution writes in the append's transaction and sees what the
// chain wrote; one that fails fails the append, which writes nothing and
// changes nothing in memory.
func TestContributionsJoinTheAppend(t *testing.T) {
	fail := false
	var seen []Written
	note := func(tx store.Tx, w *Written) error {
		seen = append(seen, *w)
		tx.Set([]byte(fmt.Sprintf("z/%d", w.Seq)), w.Item.CID.Bytes())
		return nil
	}
	refuse := func(tx store.Tx, w *Written) error {
		if fail {
			return fmt.Errorf("%w: refused", base.ErrInvalid)
		}
		return nil
	}
	c := newChains(t, note, refuse)
	o := c.owner("a")
	first := o.text("first")
	c.clock.Advance(time.Second)
	second := o.text("second", model.Edge{Target: first, Weight: 1})
	if len(seen) != 2 || seen[0].Prev != nil || *seen[1].Prev != first || !seen[1].New || seen[1].LogSeq != 2 ||
		seen[1].Meta.CreatedAt != epoch.Add(time.Second).Unix() || seen[1].Meta.LastAccessTick != 2 {
		t.Fatalf("contributions saw %+v", seen)
	}
	err := c.st.View(func(r store.Reader) error {
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
	before := len(c.appended)
	if _, err := o.tryAdd(textMemory("third"), nil); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("a contribution's error: %v", err)
	}
	if n := c.memories(); n != 2 {
		t.Fatalf("%d memories after a failed contribution", n)
	}
	if rec, _ := c.sonas.Get(o.sona); rec.Length != 2 || len(c.appended) != before || c.index.Len() != 2 {
		t.Fatalf("a failed append moved the sona (%d), was told (%d) or indexed (%d)", rec.Length, len(c.appended)-before, c.index.Len())
	}
	if err := c.st.View(func(r store.Reader) error {
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
	c := newChains(t)
	a, b := c.owner("a"), c.owner("b")
	for i := range 5 {
		a.text(fmt.Sprintf("alpha memory %d about tomatoes", i))
		b.text(fmt.Sprintf("beta memory %d about the harbour", i))
	}
	b.text("alpha memory 2 about tomatoes") // joins b
	loaded := NewSonas(c.st, c.sonas.embed, c.clock, c.index.Dims())
	if err := c.st.View(func(r store.Reader) error {
		if err := loaded.Load(r); err != nil {
			return err
		}
		if err := loaded.CheckHeads(r); err != nil {
			return err
		}
		return loaded.LoadMembers(r, c.index)
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a.sona, b.sona} {
		want, wantLen, _ := c.sonas.Snapshot(id)
		got, gotLen, ok := loaded.Snapshot(id)
		if !ok || gotLen != wantLen || !slices.Equal(got, want) {
			t.Fatalf("sona %s loaded: length %d (want %d), centroid equal %v", id, gotLen, wantLen, slices.Equal(got, want))
		}
		if !slices.Equal(loaded.Members(id, "", false), c.sonas.Members(id, "", false)) {
			t.Fatalf("sona %s: members differ", id)
		}
	}
	if got := len(loaded.Members(b.sona, a.sona, true)); got != 11 {
		t.Fatalf("b with a as its backbone: %d members", got)
	}
}

func TestSonaNamesAndResolve(t *testing.T) {
	c := newChains(t)
	ctx := context.Background()
	for _, bad := range []string{"", " alice", "a/b", `a\b`, ".", "..", "ali\u202ece", "zero\u200bwidth", "bell\a", strings.Repeat("x", MaxSonaName+1)} {
		if _, err := c.sonas.Create(ctx, bad); !errors.Is(err, base.ErrInvalid) {
			t.Errorf("sona name %q: %v", bad, err)
		}
	}
	if err := ValidateSpeaker(""); err != nil {
		t.Errorf("no speaker: %v", err)
	}
	if err := ValidateSpeaker("👩‍🚀 Ada"); err != nil { // a zero-width joiner in an emoji
		t.Errorf("an emoji sequence: %v", err)
	}
	alice := c.owner("alice")
	rec, err := c.sonas.Resolve(strings.ToUpper(alice.sona))
	if err != nil || rec.Uuid != alice.sona {
		t.Fatalf("by uuid in upper case: %v %v", rec, err)
	}
	if rec, err := c.sonas.Resolve("alice"); err != nil || rec.Uuid != alice.sona {
		t.Fatalf("by name: %v %v", rec, err)
	}
	if _, err := c.sonas.Resolve("bob"); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("no such sona: %v", err)
	}
	c.owner("alice")
	if _, err := c.sonas.Resolve("alice"); !errors.Is(err, base.ErrAmbiguous) {
		t.Fatalf("two alices: %v", err)
	}
	page, err := c.sonas.ListNamed("alice", "", 1)
	if err != nil || len(page.Items) != 1 || page.Next == "" {
		t.Fatalf("first page of alices: %v %v", page, err)
	}
	if next, err := c.sonas.ListNamed("alice", page.Next, 1); err != nil || len(next.Items) != 1 || next.Next != "" {
		t.Fatalf("second page of alices: %v %v", next, err)
	}
	if n := c.sonas.Count(); n != 2 {
		t.Fatalf("%d sonas", n)
	}
}

func TestBackboneIsMadeOnceAndListed(t *testing.T) {
	c := newChains(t)
	ctx := context.Background()
	if c.bb.Sona() != "" {
		t.Fatal("a backbone before any write")
	}
	if _, err := c.bb.Append(ctx, nil); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("append before the backbone exists: %v", err)
	}
	first, existed, err := c.bb.Write(ctx, "ada", "the self keeps its promises", nil)
	if err != nil || existed {
		t.Fatalf("first write: %v %v", existed, err)
	}
	id := c.bb.Sona()
	if !c.bb.Is(id) || c.bb.Is("") {
		t.Fatal("Is")
	}
	again, existed, err := c.bb.Write(ctx, "ada", "the self keeps its promises", nil)
	if err != nil || !existed || again != first {
		t.Fatalf("the same write again: %v %v", existed, err)
	}
	if _, _, err := c.bb.Write(ctx, "ada", "", nil); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("empty content: %v", err)
	}
	c.bb.Write(ctx, "grace", "it remembers who it talks to", map[string]string{"k": "v"})
	page, err := c.bb.List(0, 10)
	if err != nil || len(page.Items) != 2 || page.Items[0].Memory != first {
		t.Fatalf("the backbone's list: %v %v", page, err)
	}
	if ids, _ := c.sonas.Named(BackboneName); len(ids) != 1 || ids[0] != id {
		t.Fatalf("sonas named backbone: %v", ids)
	}
	// A registry loaded from the store finds the same backbone.
	loaded := NewBackbone(c.st, c.sonas, c.w, nil, c.clock)
	if err := c.st.View(loaded.Load); err != nil || loaded.Sona() != id {
		t.Fatalf("loaded backbone %q: %v", loaded.Sona(), err)
	}
	md, err := c.mems.Meta(first)
	if err != nil || !md.Backbone || md.Kind != "fact" || md.AgentId != "ada" {
		t.Fatalf("backbone memory's metadata: %v %v", md, err)
	}
}

func TestFilesBelongToTheirSonas(t *testing.T) {
	c := newChains(t)
	ctx := context.Background()
	a, b := c.owner("a"), c.owner("b")
	if _, err := c.w.PutFile(ctx, []byte("data"), "no-such-sona"); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("a file for a sona that is not: %v", err)
	}
	f, err := c.w.PutFile(ctx, []byte("a's file"), a.sona)
	if err != nil {
		t.Fatal(err)
	}
	in := func(c2 cid.Cid, sona string) bool {
		ok, err := c.w.FileInSonas(c2, func(s string) bool { return s == sona })
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !in(f, a.sona) || in(f, b.sona) {
		t.Fatal("an upload is its sona's only")
	}
	// A file memory of it in b lets b name it too.
	if _, err := b.tryAdd(&model.Memory{Data: model.Data{File: &model.FileData{Content: f}}}, nil); err != nil {
		t.Fatal(err)
	}
	if !in(f, b.sona) {
		t.Fatal("b holds a file memory of it")
	}
}
