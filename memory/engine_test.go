package memory_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/text"
)

func i64(v int64) *int64 { return &v }

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
		rs, err := memorytest.Recall(s, ctx, recall.Query{Sona: o.Sona, Text: "tomato basil garden lisbon", AsOf: i64(seq), K: 30, Budget: 1 << 20, Peek: true})
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
	if _, err := memorytest.Recall(s, ctx, recall.Query{Sona: o.Sona, Text: "x", AsOf: i64(30)}); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("as_of past the chain: err = %v", err)
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
	if g := got(recall.ScopeSelf); !slices.Contains(g, mine) || !slices.Contains(g, theirs) {
		t.Fatalf("self scope: %v", g)
	}
	if _, err := memorytest.Recall(s, ctx, recall.Query{Sona: a.Sona, Text: "x", Scope: "everything"}); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("bad scope: %v", err)
	}
}

func TestDedupOnInsert(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "notes")
	ctx := context.Background()
	orig := o.Text("My sister Maya lives in Lisbon near the river")
	prep := func(content string, ts *int64) (*model.Prepared, *chain.Duplicate) {
		m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: content}}, Timestamp: ts}
		p, dup, err := s.Chains.PrepareInsert(ctx, o.Sona, m, nil, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p, dup
	}
	// Bootstrap regime (a sona under 10 memories): 0.60 + log(3)·0.10.
	_, dup := prep("my sister Maya lives in Lisbon, near the river!", nil)
	if dup == nil || dup.Existing != orig || !dup.Threshold.Bootstrap || math.Abs(dup.Threshold.Value-(0.6+math.Log(3)*0.1)) > 1e-9 {
		t.Fatalf("near-duplicate not caught: %+v", dup)
	}
	if _, dup := prep("The train to Porto takes three hours", nil); dup != nil {
		t.Fatalf("distinct memory deduplicated against %s (%.3f ≥ %.3f)", dup.Existing, dup.Similarity, dup.Threshold.Value)
	}
	// A timestamped memory records an event: never a duplicate of another time.
	if _, dup := prep("my sister Maya lives in Lisbon, near the river!", i64(100)); dup != nil {
		t.Fatal("an event deduplicated against a timeless memory")
	}
	// Reinforcing the duplicate raises its importance and access.
	before, _ := s.Memories.Meta(orig)
	if err := s.Memories.ReinforceDuplicate(ctx, orig); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Memories.Meta(orig)
	if after.Importance <= before.Importance || after.AccessCount != before.AccessCount+1 {
		t.Fatalf("not reinforced: %v → %v", before, after)
	}
	// Live regime: with enough memories the sona's own distribution of
	// nearest-neighbour similarities sets the threshold.
	for i := 0; i < 12; i++ {
		m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: fmt.Sprintf("the parcel for order %d arrives at the depot by the river on day %s", i, strings.Repeat("x", i+1))}}}
		p, _, err := s.Chains.PrepareInsert(ctx, o.Sona, m, nil, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		o.AddPrepared(p)
	}
	stats, n, err := s.Chains.SimStats(o.Sona)
	if err != nil || n < 10 || stats.N < 10 {
		t.Fatalf("stats %+v over %d memories: %v", stats, n, err)
	}
	_, dup = prep("the parcel for order 3 arrives at the depot by the river on day xxxx!", nil)
	if dup == nil || dup.Threshold.Bootstrap {
		t.Fatalf("live regime: %+v (stats %+v)", dup, stats)
	}
	want := stats.Mean + math.Log(3)*stats.Std()
	if math.Abs(dup.Threshold.Value-want) > 1e-9 {
		t.Fatalf("threshold %v, want %v", dup.Threshold.Value, want)
	}
}

// A sona of unrelated memories has a low, narrow distribution of
// nearest-neighbour similarities; its live dedup threshold would make a
// new memory's nearest, however unlike, a duplicate. The bootstrap's
// threshold is the floor.
func TestDedupThresholdFloor(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "notes")
	ctx := context.Background()
	words := strings.Fields("apple river stone cloud piano garden winter lamp harbor violin desert candle " +
		"meadow engine copper lantern orchard glacier saddle thunder basket marble falcon quarry velvet " +
		"cactus ribbon tunnel walnut beacon")
	for i := range 30 { // four words each, few shared: far apart
		text := strings.Join([]string{words[i%len(words)], words[(i*7+3)%len(words)], words[(i*11+5)%len(words)], words[(i*13+9)%len(words)]}, " ")
		p, _, err := s.Chains.PrepareInsert(ctx, o.Sona, &model.Memory{Data: model.Data{Text: &model.TextData{Content: text}}}, nil, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		o.AddPrepared(p) // with its neighbours: the sona's distribution learns
	}
	stats, _, err := s.Chains.SimStats(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	live := assoc.EmergentThreshold(s.Config().Threshold, s.Config().Threshold.DedupBeta, stats, 30).Value
	boot := assoc.EmergentThreshold(s.Config().Threshold, s.Config().Threshold.DedupBeta, assoc.SimStats{}, 0).Value
	if live >= boot {
		t.Fatalf("the sona's live threshold %.3f is not below the bootstrap's %.3f: no floor to test", live, boot)
	}
	// A new memory sharing words with one stored, its nearest between the
	// live threshold and the bootstrap's.
	tried := 0
	for i := range 30 {
		for _, w := range words {
			text := strings.Join([]string{words[i%len(words)], words[(i*7+3)%len(words)], words[(i*11+5)%len(words)], w}, " ")
			p, dup, err := s.Chains.PrepareInsert(ctx, o.Sona, &model.Memory{Data: model.Data{Text: &model.TextData{Content: text}}}, nil, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Neighbors) == 0 || p.Neighbors[0].Sim < live || p.Neighbors[0].Sim >= boot {
				continue
			}
			tried++
			if dup != nil {
				t.Fatalf("%q deduplicated against %s at %.3f (threshold %+v; live %.3f)", text, dup.Existing, dup.Similarity, dup.Threshold, live)
			}
		}
	}
	if tried == 0 {
		t.Fatalf("no new memory with its nearest between %.3f and %.3f", live, boot)
	}
}

// A new memory's neighbours are its sona's nearest, however many closer
// memories other sonas hold: exactly among the sona's own memories when it
// is small, through the graph with the others filtered out when it is
// larger than recall.exact_scan_max.
func TestNeighboursAreTheSonasNearest(t *testing.T) {
	for _, scanMax := range []int{20_000, 0} {
		t.Run(fmt.Sprintf("exact_scan_max=%d", scanMax), func(t *testing.T) {
			cfg := memorytest.Config(t.TempDir())
			cfg.Recall.ExactScanMax = scanMax
			s := memorytest.Open(t, cfg, clock.NewFake(memorytest.Epoch))
			defer s.Close()
			mine, other := memorytest.NewOwner(t, s, "mine"), memorytest.NewOwner(t, s, "other")
			near := mine.Text("apples grow in an orchard")
			mine.Text("the train to lisbon was late again")
			for i := range 40 { // 40 memories of another sona, closer to the query than near
				other.Text(fmt.Sprintf("apples grow in the orchard by the river %d", i))
			}
			vecs, err := s.Embed(context.Background(), "apples grow in the orchard by the river")
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Chains.Neighbors(vecs[0], mine.Sona, 1, cid.Undef)
			if err != nil {
				t.Fatal(err)
			}
			if scanMax == 0 {
				// The graph's nearest 16 are all the other sona's: nothing
				// of this sona among them (what the exact scan avoids).
				if len(got) != 0 {
					t.Fatalf("through the graph: %+v", got)
				}
				return
			}
			if len(got) != 1 || got[0].CID != near {
				t.Fatalf("neighbours %+v, want %s", got, near)
			}
		})
	}
}

// Dedup and similar associations work on the sona-scoped neighbours, by
// either way of finding them: a new memory is a duplicate of its sona's
// copy and is linked as similar to its sona's nearest, never to another
// sona's memories, however close (exactly among the sona's own memories;
// through the graph, with another sona's few closer memories filtered
// out).
func TestInsertBesideAnotherSonasCloserMemories(t *testing.T) {
	for _, c := range []struct{ scanMax, others int }{{20_000, 40}, {0, 3}} {
		t.Run(fmt.Sprintf("exact_scan_max=%d", c.scanMax), func(t *testing.T) {
			cfg := memorytest.Config(t.TempDir())
			cfg.Recall.ExactScanMax = c.scanMax
			s := memorytest.Open(t, cfg, clock.NewFake(memorytest.Epoch))
			defer s.Close()
			mine, other := memorytest.NewOwner(t, s, "mine"), memorytest.NewOwner(t, s, "other")
			ctx := context.Background()
			near := mine.Text("apples grow in an old orchard")
			mine.Text("the train to lisbon was late again")
			theirs := map[cid.Cid]bool{}
			for i := range c.others { // closer to what is inserted than near
				theirs[other.Text(fmt.Sprintf("apples grow in an orchard by the river %d", i))] = true
			}
			insert := func(text string, dedup bool) (*model.Prepared, *chain.Duplicate) {
				p, dup, err := s.Chains.PrepareInsert(ctx, mine.Sona, &model.Memory{Data: model.Data{Text: &model.TextData{Content: text}}}, nil, dedup, nil)
				if err != nil {
					t.Fatal(err)
				}
				return p, dup
			}
			if _, dup := insert("Apples grow in an OLD orchard!", true); dup == nil || dup.Existing != near {
				t.Fatalf("the sona's copy is no duplicate: %+v", dup)
			}
			p, dup := insert("apples grow in an orchard by the river", false)
			if dup != nil || len(p.Neighbors) == 0 || p.Neighbors[0].CID != near {
				t.Fatalf("neighbours %+v (duplicate %+v), want %s first", p.Neighbors, dup, near)
			}
			mine.AddPrepared(p)
			links, err := s.Assoc.Associations(p.CID)
			if err != nil {
				t.Fatal(err)
			}
			similar := false
			for _, l := range links {
				if theirs[l.Target] {
					t.Fatalf("linked to another sona's memory: %+v", l)
				}
				similar = similar || l.Target == near && l.Type == assoc.Similar
			}
			if !similar {
				t.Fatalf("no similar link to %s: %+v", near, links)
			}
		})
	}
}

func TestAssociationsOnAppend(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	ctx := context.Background()
	first := o.Text("apples grow in the orchard")
	second := o.Text("the orchard has apple trees", model.Edge{Target: first, Weight: 0.5})
	m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: "apples from the orchard trees"}}}
	p, _, err := s.Chains.PrepareInsert(ctx, o.Sona, m, nil, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.EdgeType = assoc.Causal
	p.Memory.Edges = []model.Edge{{Target: first, Weight: 2}}
	if p, err = s.Chains.Prepare(p.Memory, p.Vector, nil); err != nil {
		t.Fatal(err)
	}
	p.EdgeType = assoc.Causal
	p.Neighbors, err = s.Chains.Neighbors(p.Vector, o.Sona, 3, p.CID)
	if err != nil {
		t.Fatal(err)
	}
	o.AddPrepared(p)
	links := func(c cid.Cid) map[cid.Cid]assoc.Link {
		ls, err := s.Assoc.Associations(c)
		if err != nil {
			t.Fatal(err)
		}
		out := map[cid.Cid]assoc.Link{}
		for _, l := range ls {
			out[l.Target] = l
		}
		return out
	}
	l2 := links(second)
	if l2[first].Type != assoc.Related && l2[first].Type != assoc.Sequential {
		t.Fatalf("second → first: %+v", l2[first])
	}
	if l := l2[p.CID]; l.Type != assoc.Sequential || l.Strength != 1 {
		t.Fatalf("second → third should be sequential: %+v", l)
	}
	l3 := links(p.CID)
	if l := l3[first]; l.Type != assoc.Causal || l.Strength != 1 {
		t.Fatalf("third → first should be causal (its only edge, strength 1): %+v", l)
	}
	if l := links(first)[p.CID]; l.Type != assoc.Causal {
		t.Fatalf("associations are kept both ways: %+v", l)
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

func TestTextIndexRebuiltAndCaughtUp(t *testing.T) {
	dir := t.TempDir()
	clock := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(dir)
	s := memorytest.Open(t, cfg, clock)
	o := memorytest.NewOwner(t, s, "a")
	mems := o.Conversation(clock, 40, 11)
	bm25 := func(s *memory.Self, q string) map[string]bool {
		if err := s.Text.Settle(context.Background()); err != nil {
			t.Fatal(err)
		}
		hits, err := s.Text.Raw().Search(q, text.SearchOptions{K: 100})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, h := range hits {
			out[h.ID] = true
		}
		return out
	}
	want := bm25(s, "tomato lisbon sunset")
	if len(want) == 0 {
		t.Fatal("nothing indexed")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Deleted: rebuilt from the store at the next open.
	if err := os.RemoveAll(filepath.Join(dir, "text")); err != nil {
		t.Fatal(err)
	}
	s = memorytest.Open(t, cfg, clock)
	if got := bm25(s, "tomato lisbon sunset"); !maps.Equal(got, want) {
		t.Fatalf("rebuilt index finds %d, before %d", len(got), len(want))
	}
	if n, _ := s.Text.Raw().Len(); n != uint64(len(mems)) {
		t.Fatalf("rebuilt index holds %d documents, want %d", n, len(mems))
	}
	s.Close()

	// A crash lost the last batches: the index is behind its store.
	// Simulate it by removing the newest documents and winding the
	// watermark back; the next open replays the insertion log.
	idx, err := text.Open(filepath.Join(dir, "text"))
	if err != nil {
		t.Fatal(err)
	}
	var lost []text.Doc
	for _, c := range mems[25:] {
		lost = append(lost, text.Doc{ID: c.String()})
	}
	if err := idx.Delete(lost, 25); err != nil { // memory i has log seq i+1
		t.Fatal(err)
	}
	if n, _ := idx.Len(); n != 25 {
		t.Fatalf("index holds %d docs after the simulated loss, want 25", n)
	}
	idx.Close()
	s = memorytest.Open(t, cfg, clock)
	defer s.Close()
	if got := bm25(s, "tomato lisbon sunset"); !maps.Equal(got, want) {
		t.Fatalf("caught-up index finds %d, before %d", len(got), len(want))
	}
	if n, _ := s.Text.Raw().Len(); n != uint64(len(mems)) {
		t.Fatalf("index holds %d docs, store %d memories", n, len(mems))
	}
}
