package memory

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain/chaintest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/messages"
)

var epoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func testConfig(dir string) config.Config {
	cfg := config.Default()
	cfg.DataDir = dir
	return cfg
}

func openSelf(t testing.TB, cfg config.Config, clock clock.Clock) *Self {
	t.Helper()
	s, err := Open(context.Background(), Options{Config: cfg, Embedder: llm.NewHashedEmbedder(llm.DefaultDims), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// owner plays a sona's actor: it appends memories one after the other.
type owner struct {
	t    testing.TB
	s    *Self
	sona string
	head *cid.Cid
	n    int64
}

func newOwner(t testing.TB, s *Self, name string) *owner {
	t.Helper()
	rec, err := s.Sonas.Create(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return &owner{t: t, s: s, sona: rec.Uuid}
}

func (o *owner) add(m *model.Memory, meta *messages.MemoryMeta) cid.Cid {
	o.t.Helper()
	c, err := o.tryAdd(m, meta)
	if err != nil {
		o.t.Fatal(err)
	}
	return c
}

func (o *owner) tryAdd(m *model.Memory, meta *messages.MemoryMeta) (cid.Cid, error) {
	return chaintest.Append(o.s.Store(), o.s.Chains, o.s.Embed, o.s.clock.Now().Unix(), o.sona, &o.head, &o.n, m, meta)
}

func (o *owner) text(content string, edges ...model.Edge) cid.Cid {
	model.SortEdges(edges)
	return o.add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: content}}, Edges: edges}, nil)
}

func TestReopenKeepsSonasHeadsAndRecall(t *testing.T) {
	dir := t.TempDir()
	clock := clock.NewFake(epoch)
	s := openSelf(t, testConfig(dir), clock)
	o := newOwner(t, s, "gardener")
	for i, line := range []string{
		"I planted tomatoes in the east bed",
		"Basil keeps aphids away from tomatoes",
		"The compost needs turning every two weeks",
		"Slugs ate the lettuce",
	} {
		clock.Set(epoch.Add(time.Duration(i) * time.Minute))
		o.text(line)
	}
	ctx := context.Background()
	q := recall.Query{Sona: o.sona, Text: "what keeps aphids away?", Peek: true}
	before, err := recallIn(s, ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	recBefore, _ := s.Sonas.Get(o.sona)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openSelf(t, testConfig(dir), clock)
	defer s.Close()
	recAfter, err := s.Sonas.Get(o.sona)
	if err != nil {
		t.Fatal(err)
	}
	if recAfter.GetHead() != recBefore.GetHead() || recAfter.Length != recBefore.Length || recAfter.Name != "gardener" {
		t.Fatalf("sona after reopen %v, before %v", recAfter, recBefore)
	}
	after, err := recallIn(s, ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("recall returned %d, before %d", len(after), len(before))
	}
	for i := range after {
		if after[i].CID != before[i].CID {
			t.Fatalf("recall %d: %s, before %s", i, after[i].CID, before[i].CID)
		}
	}
	if !strings.Contains(after[0].Memory.Text()+after[1].Memory.Text(), "Basil") {
		t.Fatalf("the aphid memory is not among the first results: %q, %q", after[0].Memory.Text(), after[1].Memory.Text())
	}
}

func TestOpenRefusesAnotherEmbedder(t *testing.T) {
	dir := t.TempDir()
	s := openSelf(t, testConfig(dir), nil)
	s.Close()
	_, err := Open(context.Background(), Options{Config: testConfig(dir), Embedder: llm.NewHashedEmbedder(128)})
	if !errors.Is(err, base.ErrEmbedderMismatch) {
		t.Fatalf("err = %v, want base.ErrEmbedderMismatch", err)
	}
}

func TestRecallBudgetAndTopologicalOrder(t *testing.T) {
	clock := clock.NewFake(epoch)
	s := openSelf(t, testConfig(t.TempDir()), clock)
	defer s.Close()
	o := newOwner(t, s, "writer")
	rng := rand.New(rand.NewSource(7))
	words := strings.Fields("river mountain garden tomato aphid basil compost train lisbon novel lighthouse diary migration queue latency")
	var all []cid.Cid
	for i := 0; i < 120; i++ {
		clock.Set(epoch.Add(time.Duration(rng.Intn(1000)) * time.Second))
		var b strings.Builder
		for j := 0; j < 3+rng.Intn(40); j++ {
			b.WriteString(words[rng.Intn(len(words))] + " ")
		}
		var edges []model.Edge
		for j := 0; j < rng.Intn(4) && len(all) > 0; j++ {
			edges = append(edges, model.Edge{Target: all[rng.Intn(len(all))], Weight: rng.Float64()})
		}
		edges = slices.CompactFunc(sortedEdges(edges), func(a, b model.Edge) bool { return a.Target == b.Target })
		ts := clock.Now().Unix()
		all = append(all, o.add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: b.String()}}, Timestamp: &ts, Edges: edges}, nil))
	}
	for _, budget := range []int{1, 50, 200, 1000, 4000} {
		rs, err := recallIn(s, context.Background(), recall.Query{Sona: o.sona, Text: "tomato basil aphid garden", Budget: budget})
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		pos := map[cid.Cid]int{}
		for i, r := range rs {
			total += r.Chars()
			pos[r.CID] = i
		}
		if total > budget {
			t.Fatalf("budget %d: returned %d characters", budget, total)
		}
		hits := 0
		for i, r := range rs {
			if r.Via == recall.ViaHit {
				hits++
			}
			for _, e := range r.Memory.Edges {
				if j, ok := pos[e.Target]; ok && j > i {
					t.Fatalf("budget %d: %s at %d comes before its support at %d", budget, r.CID, i, j)
				}
			}
		}
		if hits > s.Config().Recall.TopK {
			t.Fatalf("%d hits, more than top-k", hits)
		}
		if budget >= 1000 && len(rs) <= hits {
			t.Fatalf("budget %d: no expansion (%d memories, %d hits)", budget, len(rs), hits)
		}
	}
}

func sortedEdges(e []model.Edge) []model.Edge { model.SortEdges(e); return e }

func TestRecallExpandsAlongEdgesWithPathScore(t *testing.T) {
	s := openSelf(t, testConfig(t.TempDir()), clock.NewFake(epoch))
	defer s.Close()
	o := newOwner(t, s, "a")
	support := o.text("zebra quartz vellum")
	hit := o.text("tomatoes and basil", model.Edge{Target: support, Weight: 0.8})
	rs, err := recallIn(s, context.Background(), recall.Query{Sona: o.sona, Text: "tomatoes and basil", K: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].CID != support || rs[1].CID != hit {
		t.Fatalf("got %v", describe(rs))
	}
	if rs[1].Via != recall.ViaHit || rs[0].Via != recall.ViaExpansion || rs[0].Depth != 1 {
		t.Fatalf("via %s/%s depth %d", rs[1].Via, rs[0].Via, rs[0].Depth)
	}
	want := rs[1].Score * 0.8 * s.Config().Recall.ExpandDecay
	if d := rs[0].Score - want; d > 1e-12 || d < -1e-12 {
		t.Fatalf("expansion score %v, want %v", rs[0].Score, want)
	}
	// Excluding the hit removes it; its support can still be a hit itself.
	rs, _ = recallIn(s, context.Background(), recall.Query{Sona: o.sona, Text: "tomatoes and basil", K: 1, Exclude: []cid.Cid{hit}})
	for _, r := range rs {
		if r.CID == hit {
			t.Fatal("excluded memory returned")
		}
	}
}

func describe(rs []*recall.Recalled) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %s %.3f %q", r.CID, r.Via, r.Score, r.Memory.Text()))
	}
	return out
}

func TestRecallHidesArchivedAndExpired(t *testing.T) {
	clock := clock.NewFake(epoch)
	s := openSelf(t, testConfig(t.TempDir()), clock)
	defer s.Close()
	o := newOwner(t, s, "a")
	obs := o.add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "the kettle is broken"}}}, &messages.MemoryMeta{Kind: "observation"})
	fact := o.add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "the kettle is blue"}}}, &messages.MemoryMeta{Kind: "fact"})
	arch := o.text("the kettle is old")
	ctx := context.Background()
	if err := s.Store().Update(ctx, meta.Update([]cid.Cid{arch}, func(m *messages.MemoryMeta, _ cid.Cid) { m.Archived = true })); err != nil {
		t.Fatal(err)
	}
	found := func() map[cid.Cid]bool {
		rs, err := recallIn(s, ctx, recall.Query{Sona: o.sona, Text: "kettle"})
		if err != nil {
			t.Fatal(err)
		}
		got := map[cid.Cid]bool{}
		for _, r := range rs {
			got[r.CID] = true
		}
		return got
	}
	if got := found(); !got[obs] || !got[fact] || got[arch] {
		t.Fatalf("before expiry: %v", got)
	}
	ttl := s.Config().Kinds["observation"].TTL.D()
	clock.Set(epoch.Add(ttl - time.Second))
	if got := found(); !got[obs] {
		t.Fatal("observation hidden before its TTL")
	}
	clock.Set(epoch.Add(ttl))
	if got := found(); got[obs] || !got[fact] {
		t.Fatalf("at TTL: %v (observation must be hidden, fact kept)", got)
	}
}

func TestReinforceRaisesAndPropagates(t *testing.T) {
	cfg := testConfig(t.TempDir())
	s := openSelf(t, cfg, clock.NewFake(epoch))
	defer s.Close()
	o := newOwner(t, s, "a")
	deep := o.text("deep support")
	mid := o.text("middle support", model.Edge{Target: deep, Weight: 1})
	top := o.text("the used memory", model.Edge{Target: mid, Weight: 1})
	other := o.text("unrelated")
	ctx := context.Background()
	used := []*recall.Recalled{{CID: top, Score: 2}}
	if err := s.Memories.Reinforce(recall.Support(used)).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	imp := func(c cid.Cid) float64 {
		m, err := s.Memories.Meta(c)
		if err != nil {
			t.Fatal(err)
		}
		return m.Importance
	}
	rc := cfg.Recall
	want := map[cid.Cid]float64{
		top:   rc.ImportanceAlpha * 1,
		mid:   rc.ImportanceAlpha * rc.ImportanceHopDecay,
		deep:  rc.ImportanceAlpha * rc.ImportanceHopDecay * rc.ImportanceHopDecay,
		other: 0,
	}
	for c, w := range want {
		if got := imp(c); got < w-1e-12 || got > w+1e-12 {
			t.Errorf("importance of %s = %v, want %v", c, got, w)
		}
	}
	// Used again, it keeps rising toward 1 and never past it.
	for i := 0; i < 100; i++ {
		s.Memories.Reinforce(recall.Support(used))
	}
	if err := s.Store().Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if got := imp(top); got <= want[top] || got > 1 {
		t.Fatalf("importance after many uses %v", got)
	}
}

// recallIn recalls and submits the recall's trace, as the server does.
func recallIn(s *Self, ctx context.Context, q recall.Query) ([]*recall.Recalled, error) {
	rs, tr, err := s.Recaller.Recall(ctx, q)
	tr.Submit(s.Store())
	return rs, err
}
