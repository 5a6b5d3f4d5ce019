package memory_test

import (
	"context"
	"errors"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/messages"
)

func TestReopenKeepsSonasHeadsAndRecall(t *testing.T) {
	dir := t.TempDir()
	clock := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(dir), clock)
	o := memorytest.NewOwner(t, s, "gardener")
	for i, line := range []string{
		"I planted tomatoes in the east bed",
		"Basil keeps aphids away from tomatoes",
		"The compost needs turning every two weeks",
		"Slugs ate the lettuce",
	} {
		clock.Set(memorytest.Epoch.Add(time.Duration(i) * time.Minute))
		o.Text(line)
	}
	ctx := context.Background()
	q := recall.Query{Sona: o.Sona, Text: "what keeps aphids away?", Peek: true}
	before, err := memorytest.Recall(s, ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	recBefore, _ := s.Sonas.Get(o.Sona)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = memorytest.Open(t, memorytest.Config(dir), clock)
	defer s.Close()
	recAfter, err := s.Sonas.Get(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	if recAfter.GetHead() != recBefore.GetHead() || recAfter.Length != recBefore.Length || recAfter.Name != "gardener" {
		t.Fatalf("sona after reopen %v, before %v", recAfter, recBefore)
	}
	after, err := memorytest.Recall(s, ctx, q)
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
	s := memorytest.Open(t, memorytest.Config(dir), nil)
	s.Close()
	_, err := memory.Open(context.Background(), memory.Options{Config: memorytest.Config(dir), Embedder: llm.NewHashedEmbedder(128)})
	if !errors.Is(err, base.ErrEmbedderMismatch) {
		t.Fatalf("err = %v, want base.ErrEmbedderMismatch", err)
	}
}

func TestRecallBudgetAndTopologicalOrder(t *testing.T) {
	clock := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "writer")
	rng := rand.New(rand.NewSource(7))
	words := strings.Fields("river mountain garden tomato aphid basil compost train lisbon novel lighthouse diary migration queue latency")
	var all []cid.Cid
	for i := 0; i < 120; i++ {
		clock.Set(memorytest.Epoch.Add(time.Duration(rng.Intn(1000)) * time.Second))
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
		all = append(all, o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: b.String()}}, Timestamp: &ts, Edges: edges}, nil))
	}
	for _, budget := range []int{1, 50, 200, 1000, 4000} {
		rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "tomato basil aphid garden", Budget: budget})
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
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	support := o.Text("zebra quartz vellum")
	hit := o.Text("tomatoes and basil", model.Edge{Target: support, Weight: 0.8})
	rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "tomatoes and basil", K: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].CID != support || rs[1].CID != hit {
		t.Fatalf("got %v", memorytest.Describe(rs))
	}
	if rs[1].Via != recall.ViaHit || rs[0].Via != recall.ViaExpansion || rs[0].Depth != 1 {
		t.Fatalf("via %s/%s depth %d", rs[1].Via, rs[0].Via, rs[0].Depth)
	}
	want := rs[1].Score * 0.8 * s.Config().Recall.ExpandDecay
	if d := rs[0].Score - want; d > 1e-12 || d < -1e-12 {
		t.Fatalf("expansion score %v, want %v", rs[0].Score, want)
	}
	// Excluding the hit removes it; its support can still be a hit itself.
	rs, _ = memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "tomatoes and basil", K: 1, Exclude: []cid.Cid{hit}})
	for _, r := range rs {
		if r.CID == hit {
			t.Fatal("excluded memory returned")
		}
	}
}

func TestRecallHidesArchivedAndExpired(t *testing.T) {
	clock := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	obs := o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "the kettle is broken"}}}, &messages.MemoryMeta{Kind: "observation"})
	fact := o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "the kettle is blue"}}}, &messages.MemoryMeta{Kind: "fact"})
	arch := o.Text("the kettle is old")
	ctx := context.Background()
	if err := s.Store().Update(ctx, meta.Update([]cid.Cid{arch}, func(m *messages.MemoryMeta, _ cid.Cid) { m.Archived = true })); err != nil {
		t.Fatal(err)
	}
	found := func() map[cid.Cid]bool {
		rs, err := memorytest.Recall(s, ctx, recall.Query{Sona: o.Sona, Text: "kettle"})
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
	clock.Set(memorytest.Epoch.Add(ttl - time.Second))
	if got := found(); !got[obs] {
		t.Fatal("observation hidden before its TTL")
	}
	clock.Set(memorytest.Epoch.Add(ttl))
	if got := found(); got[obs] || !got[fact] {
		t.Fatalf("at TTL: %v (observation must be hidden, fact kept)", got)
	}
}

func TestReinforceRaisesAndPropagates(t *testing.T) {
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	deep := o.Text("deep support")
	mid := o.Text("middle support", model.Edge{Target: deep, Weight: 1})
	top := o.Text("the used memory", model.Edge{Target: mid, Weight: 1})
	other := o.Text("unrelated")
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
