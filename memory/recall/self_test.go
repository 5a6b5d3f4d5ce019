package recall_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/messages"
)

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
	// The edge's target shares the bytes of the hit's block; the support
	// comes back with the vector index's own key (stop 97).
	if id, ok := s.Index().ID(support.KeyString()); !ok {
		t.Fatal("the support is not in the vector index")
	} else if own, _ := s.Index().Key(id); unsafe.StringData(own) != unsafe.StringData(rs[0].CID.KeyString()) {
		t.Error("the support's CID is not the index's key")
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

func TestExplainSumsToTheScore(t *testing.T) {
	clock := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	o.Conversation(clock, 80, 3)
	for _, q := range []string{"tomato basil", "lisbon train", "sunset painting sister", "nothing matches this"} {
		rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: q, Peek: true})
		if err != nil {
			t.Fatal(err)
		}
		vias := map[string]int{}
		for _, r := range rs {
			vias[r.Via]++
			if d := r.Explain.Contrib.Sum() - r.Score; math.Abs(d) > 1e-12 {
				t.Fatalf("%q: %s via %s: contributions %v sum to %v, score %v", q, r.CID, r.Via, r.Explain.Contrib, r.Explain.Contrib.Sum(), r.Score)
			}
			if r.Via != recall.ViaHit && r.Explain.Contrib.Path != r.Score {
				t.Fatalf("%s via %s: path contribution %v, score %v", r.CID, r.Via, r.Explain.Contrib.Path, r.Score)
			}
		}
		t.Logf("%q: %v", q, vias)
	}
}

func TestAsOfRecallsOnlyWhatExisted(t *testing.T) {
	clock := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	mems := o.Conversation(clock, 30, 5)
	ctx := context.Background()
	page, err := s.Sonas.Chain(o.Sona, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int64{0, 9, 29} {
		rs, err := memorytest.Recall(s, ctx, recall.Query{Sona: o.Sona, Text: "tomato basil garden lisbon", AsOf: proto.Int64(seq), K: 30, Budget: 1 << 20, Peek: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			t.Fatalf("as_of %d recalled nothing", seq)
		}
		for _, r := range rs {
			if i := slices.Index(mems, r.CID); i < 0 || int64(i) > seq || r.Meta.Seq > page.Items[seq].LogSeq {
				t.Fatalf("as_of seq %d recalled memory %d (log seq %d)", seq, i, r.Meta.Seq)
			}
		}
	}
	// By time: memory i was stored at memorytest.Epoch + i minutes.
	at := memorytest.Epoch.Add(12 * time.Minute).Unix()
	rs, err := memorytest.Recall(s, ctx, recall.Query{Sona: o.Sona, Text: "tomato basil garden lisbon", AsOf: &at, K: 30, Budget: 1 << 20, Peek: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Meta.CreatedAt > at {
			t.Fatalf("as_of time recalled a memory stored later")
		}
	}
	if _, err := memorytest.Recall(s, ctx, recall.Query{Sona: o.Sona, Text: "x", AsOf: proto.Int64(30)}); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("as_of past the chain: err = %v", err)
	}
}

// index.graph eager (or auto with recall.scope self) builds the graph
// from the open, as vectors come.
func TestEagerGraph(t *testing.T) {
	for _, c := range []struct{ graph, scope string }{{config.GraphEager, recall.ScopeSona}, {config.GraphAuto, recall.ScopeSelf}} {
		cfg := memorytest.Config(t.TempDir())
		cfg.Index.Graph, cfg.Recall.Scope = c.graph, c.scope
		s := memorytest.Open(t, cfg, clock.NewFake(memorytest.Epoch))
		if !s.Index().GraphWanted() {
			t.Errorf("graph %s, scope %s: not built as vectors come", c.graph, c.scope)
		}
		s.Close()
	}
}

func TestScope(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	a, b := memorytest.NewOwner(t, s, "gardener"), memorytest.NewOwner(t, s, "traveller")
	mine := a.Text("the tomatoes need basil against aphids")
	theirs := b.Text("tomatoes and basil grow well in Lisbon")
	ctx := context.Background()
	got := func(scope string) []cid.Cid {
		rs, err := memorytest.Recall(s, ctx, recall.Query{Sona: a.Sona, Text: "tomatoes basil", Scope: scope, Peek: true})
		if err != nil {
			t.Fatal(err)
		}
		var out []cid.Cid
		for _, r := range rs {
			out = append(out, r.CID)
		}
		return out
	}
	if g := got(recall.ScopeSona); !slices.Contains(g, mine) || slices.Contains(g, theirs) {
		t.Fatalf("sona scope: %v", g)
	}
	// The HNSW graph waits for a search that needs it (index.graph auto,
	// sona scope): a recall in self scope is one.
	if s.Index().GraphWanted() {
		t.Fatal("the graph wanted before a recall in self scope")
	}
	if g := got(recall.ScopeSelf); !slices.Contains(g, mine) || !slices.Contains(g, theirs) {
		t.Fatalf("self scope: %v", g)
	}
	if !s.Index().GraphWanted() {
		t.Fatal("a recall in self scope did not want the graph")
	}
	if _, err := memorytest.Recall(s, ctx, recall.Query{Sona: a.Sona, Text: "x", Scope: "everything"}); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("bad scope: %v", err)
	}
}

// The dense path in sona scope finds the sona's own nearest when the sona
// is larger than recall.exact_scan_max (0 here: every sona is) and another
// sona holds many memories nearer to the query: the graph's nearest are
// all theirs, so it searches the sona's own exactly. It once recalled
// through the graph and filtered, and found nothing of the sona's.
func TestSonaScopeFindsItsOwnBesideACrowdedSona(t *testing.T) {
	cfg := memorytest.Config(t.TempDir())
	cfg.Recall.ExactScanMax = 0
	cfg.Recall.TopK, cfg.Recall.Candidates = 2, 2 // a path's candidates: the graph's 16 times as many are all the crowd's
	s := memorytest.Open(t, cfg, clock.NewFake(memorytest.Epoch))
	defer s.Close()
	a, b := memorytest.NewOwner(t, s, "gardener"), memorytest.NewOwner(t, s, "crowd")
	mine := a.Text("apples grow in an orchard")
	a.Text("the train to lisbon was late again")
	for i := range 60 {
		b.Text(fmt.Sprintf("apples grow in the orchard by the river %d", i))
	}
	rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: a.Sona, Text: "apples grow in the orchard by the river",
		Scope: recall.ScopeSona, Peek: true, Paths: &recall.Paths{Weights: config.PathWeights{Dense: 1}, Fusion: "weighted"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 || rs[0].CID != mine {
		var got []cid.Cid
		for _, r := range rs {
			got = append(got, r.CID)
		}
		t.Fatalf("sona scope, dense path: %v, want %s first", got, mine)
	}
}

func TestCoAccessAndQueryLog(t *testing.T) {
	clock := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	o.Conversation(clock, 20, 9)
	ctx := context.Background()
	rs, err := memorytest.Recall(s, ctx, recall.Query{Sona: o.Sona, Text: "tomato basil garden", AgentID: "agent-1", K: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store().Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	var hits []cid.Cid
	for _, r := range rs {
		if r.Via == recall.ViaHit {
			hits = append(hits, r.CID)
		}
	}
	if len(hits) < 2 {
		t.Fatalf("want at least two hits, got %d", len(hits))
	}
	partners, err := s.Assoc.CoAccess("agent-1", hits[0])
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range partners {
		if p.Target == hits[1] {
			found = p.Strength > 0
		}
	}
	if !found {
		t.Fatalf("hits returned together are not co-access partners: %v", partners)
	}
	if other, _ := s.Assoc.CoAccess("agent-2", hits[0]); len(other) != 0 {
		t.Fatal("co-access leaked across agents")
	}
	log, err := s.Recaller.QueryLog(10)
	if err != nil || len(log) != 1 {
		t.Fatalf("query log: %v %v", log, err)
	}
	e := log[0]
	if e.Sona != o.Sona || e.AgentId != "agent-1" || len(e.Cids) != len(rs) || !slices.Contains(e.Keywords, "basil") {
		t.Fatalf("query log entry %v", e)
	}
	// Peek leaves no trace.
	if _, err := memorytest.Recall(s, ctx, recall.Query{Sona: o.Sona, Text: "lisbon", Peek: true}); err != nil {
		t.Fatal(err)
	}
	s.Store().Barrier(ctx)
	if log, _ := s.Recaller.QueryLog(10); len(log) != 1 {
		t.Fatalf("a peek was logged: %d entries", len(log))
	}
}

// The dense evidence of a memory no dense search scored (here one an
// edge reached) is its cosine with the query, read from its float32
// vector: a primary evidence, calibrated over the candidates, which the
// int8 records' error would blur for a narrow embedder.
func TestReachedMemoryDenseEvidenceIsItsCosine(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	support := o.Text("tomatoes grow best with basil nearby")
	o.Text("tomatoes and basil", model.Edge{Target: support, Weight: 0.8})
	rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "tomatoes and basil", K: 1})
	if err != nil {
		t.Fatal(err)
	}
	var reached *recall.Recalled
	for _, r := range rs {
		if r.Via == recall.ViaExpansion {
			reached = r
		}
	}
	if reached == nil || reached.CID != support {
		t.Fatalf("got %v, want the support reached", memorytest.Describe(rs))
	}
	q, err := s.Embed(context.Background(), "tomatoes and basil")
	if err != nil {
		t.Fatal(err)
	}
	vec, ok := s.Index().Lookup(support.KeyString())
	if !ok {
		t.Fatal("the support has no vector in the index")
	}
	exact := float64(base.Dot(q[0], vec))
	if got := reached.Explain.Evidence.Dense; exact <= 0 || math.Abs(got-exact) > 1e-6 {
		t.Fatalf("dense evidence %v, exact cosine %v", got, exact)
	}
}
