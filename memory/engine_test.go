package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/text"
)

func i64(v int64) *int64 { return &v }

// seededConversation fills a sona with n memories drawn from a small
// vocabulary (seeded), each linked to the one before, timestamped a minute
// apart.
func seededConversation(t *testing.T, s *Self, clock *clock.Fake, o *owner, n int, seed int64) []cid.Cid {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	words := strings.Fields("garden tomato basil aphid compost lettuce slug river train lisbon porto novel lighthouse diary queue latency migration sister painting sunset")
	var out []cid.Cid
	for i := 0; i < n; i++ {
		clock.Set(epoch.Add(time.Duration(len(out)) * time.Minute))
		var b strings.Builder
		for j := 0; j < 4+rng.Intn(12); j++ {
			b.WriteString(words[rng.Intn(len(words))] + " ")
		}
		ts := clock.Now().Unix()
		m := &Memory{Data: Data{Text: &TextData{Content: fmt.Sprintf("%s(%d)", b.String(), i)}}, Timestamp: &ts}
		if len(out) > 0 {
			m.Edges = []Edge{{Target: out[len(out)-1], Weight: 1}}
		}
		out = append(out, o.add(m, nil))
	}
	return out
}

func TestExplainSumsToTheScore(t *testing.T) {
	clock := clock.NewFake(epoch)
	s := openSelf(t, testConfig(t.TempDir()), clock)
	defer s.Close()
	o := newOwner(t, s, "a")
	seededConversation(t, s, clock, o, 80, 3)
	for _, q := range []string{"tomato basil", "lisbon train", "sunset painting sister", "nothing matches this"} {
		rs, err := s.Recall(context.Background(), Query{Sona: o.sona, Text: q, Peek: true})
		if err != nil {
			t.Fatal(err)
		}
		vias := map[string]int{}
		for _, r := range rs {
			vias[r.Via]++
			if d := r.Explain.Contrib.Sum() - r.Score; math.Abs(d) > 1e-12 {
				t.Fatalf("%q: %s via %s: contributions %v sum to %v, score %v", q, r.CID, r.Via, r.Explain.Contrib, r.Explain.Contrib.Sum(), r.Score)
			}
			if r.Via != ViaHit && r.Explain.Contrib.Path != r.Score {
				t.Fatalf("%s via %s: path contribution %v, score %v", r.CID, r.Via, r.Explain.Contrib.Path, r.Score)
			}
		}
		t.Logf("%q: %v", q, vias)
	}
}

func TestAsOfRecallsOnlyWhatExisted(t *testing.T) {
	clock := clock.NewFake(epoch)
	s := openSelf(t, testConfig(t.TempDir()), clock)
	defer s.Close()
	o := newOwner(t, s, "a")
	mems := seededConversation(t, s, clock, o, 30, 5)
	ctx := context.Background()
	page, err := s.Sonas.Chain(o.sona, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int64{0, 9, 29} {
		rs, err := s.Recall(ctx, Query{Sona: o.sona, Text: "tomato basil garden lisbon", AsOf: i64(seq), K: 30, Budget: 1 << 20, Peek: true})
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
	// By time: memory i was stored at epoch + i minutes.
	at := epoch.Add(12 * time.Minute).Unix()
	rs, err := s.Recall(ctx, Query{Sona: o.sona, Text: "tomato basil garden lisbon", AsOf: &at, K: 30, Budget: 1 << 20, Peek: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Meta.CreatedAt > at {
			t.Fatalf("as_of time recalled a memory stored later")
		}
	}
	if _, err := s.Recall(ctx, Query{Sona: o.sona, Text: "x", AsOf: i64(30)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("as_of past the chain: err = %v", err)
	}
}

func TestScope(t *testing.T) {
	s := openSelf(t, testConfig(t.TempDir()), clock.NewFake(epoch))
	defer s.Close()
	a, b := newOwner(t, s, "gardener"), newOwner(t, s, "traveller")
	mine := a.text("the tomatoes need basil against aphids")
	theirs := b.text("tomatoes and basil grow well in Lisbon")
	ctx := context.Background()
	got := func(scope string) []cid.Cid {
		rs, err := s.Recall(ctx, Query{Sona: a.sona, Text: "tomatoes basil", Scope: scope, Peek: true})
		if err != nil {
			t.Fatal(err)
		}
		var out []cid.Cid
		for _, r := range rs {
			out = append(out, r.CID)
		}
		return out
	}
	if g := got(ScopeSona); !slices.Contains(g, mine) || slices.Contains(g, theirs) {
		t.Fatalf("sona scope: %v", g)
	}
	if g := got(ScopeSelf); !slices.Contains(g, mine) || !slices.Contains(g, theirs) {
		t.Fatalf("self scope: %v", g)
	}
	if _, err := s.Recall(ctx, Query{Sona: a.sona, Text: "x", Scope: "everything"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad scope: %v", err)
	}
}

func TestDedupOnInsert(t *testing.T) {
	s := openSelf(t, testConfig(t.TempDir()), clock.NewFake(epoch))
	defer s.Close()
	o := newOwner(t, s, "notes")
	ctx := context.Background()
	orig := o.text("My sister Maya lives in Lisbon near the river")
	prep := func(content string, ts *int64) (*Prepared, *Duplicate) {
		m := &Memory{Data: Data{Text: &TextData{Content: content}}, Timestamp: ts}
		p, dup, err := s.Chains.PrepareInsert(ctx, o.sona, m, nil, true, nil)
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
		m := &Memory{Data: Data{Text: &TextData{Content: fmt.Sprintf("note %d about topic %s", i, strings.Repeat("x", i+1))}}}
		p, _, err := s.Chains.PrepareInsert(ctx, o.sona, m, nil, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		o.addPrepared(p)
	}
	stats, n, err := s.Chains.SimStats(o.sona)
	if err != nil || n < 10 || stats.N < 10 {
		t.Fatalf("stats %+v over %d memories: %v", stats, n, err)
	}
	_, dup = prep("note 3 about topic xxxx!", nil)
	if dup == nil || dup.Threshold.Bootstrap {
		t.Fatalf("live regime: %+v", dup)
	}
	want := stats.Mean + math.Log(3)*stats.Std()
	if math.Abs(dup.Threshold.Value-want) > 1e-9 {
		t.Fatalf("threshold %v, want %v", dup.Threshold.Value, want)
	}
}

func (o *owner) addPrepared(p *Prepared) {
	o.t.Helper()
	plan, err := PlanAppend(o.sona, o.head, o.n, p, o.s.clock.Now().Unix())
	if err != nil {
		o.t.Fatal(err)
	}
	if err := o.s.Store().Update(context.Background(), o.s.Chains.Op(plan)); err != nil {
		o.t.Fatal(err)
	}
	o.head, o.n = plan.Next()
}

func TestAssociationsOnAppend(t *testing.T) {
	s := openSelf(t, testConfig(t.TempDir()), clock.NewFake(epoch))
	defer s.Close()
	o := newOwner(t, s, "a")
	ctx := context.Background()
	first := o.text("apples grow in the orchard")
	second := o.text("the orchard has apple trees", Edge{Target: first, Weight: 0.5})
	m := &Memory{Data: Data{Text: &TextData{Content: "apples from the orchard trees"}}}
	p, _, err := s.Chains.PrepareInsert(ctx, o.sona, m, nil, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.EdgeType = AssocCausal
	p.Memory.Edges = []Edge{{Target: first, Weight: 2}}
	if p, err = s.Chains.Prepare(p.Memory, p.Vector, nil); err != nil {
		t.Fatal(err)
	}
	p.EdgeType = AssocCausal
	p.Neighbors, err = s.Chains.Neighbors(p.Vector, o.sona, 3, p.CID)
	if err != nil {
		t.Fatal(err)
	}
	o.addPrepared(p)
	links := func(c cid.Cid) map[cid.Cid]Link {
		ls, err := s.Assoc.Associations(c)
		if err != nil {
			t.Fatal(err)
		}
		out := map[cid.Cid]Link{}
		for _, l := range ls {
			out[l.Target] = l
		}
		return out
	}
	l2 := links(second)
	if l2[first].Type != AssocRelated && l2[first].Type != AssocSequential {
		t.Fatalf("second → first: %+v", l2[first])
	}
	if l := l2[p.CID]; l.Type != AssocSequential || l.Strength != 1 {
		t.Fatalf("second → third should be sequential: %+v", l)
	}
	l3 := links(p.CID)
	if l := l3[first]; l.Type != AssocCausal || l.Strength != 1 {
		t.Fatalf("third → first should be causal (its only edge, strength 1): %+v", l)
	}
	if l := links(first)[p.CID]; l.Type != AssocCausal {
		t.Fatalf("associations are kept both ways: %+v", l)
	}
}

// The affinity path follows an association as far as its type's weight
// lets it: a similar link with weight 0 is not followed (the default,
// chosen on LoCoMo), with weight w its strength counts w times.
func TestAffinityLinkWeights(t *testing.T) {
	s := openSelf(t, testConfig(t.TempDir()), clock.NewFake(epoch))
	defer s.Close()
	o := newOwner(t, s, "a")
	apples := o.text("apples grow in the orchard")
	o.text("the train to lisbon was late")
	vecs, err := s.Embed(context.Background(), "pears ripen in the orchard")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Chains.Prepare(&Memory{Data: Data{Text: &TextData{Content: "pears ripen in the orchard"}}}, vecs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Neighbors = []Neighbor{{CID: apples, Sim: 0.9}}
	o.addPrepared(p)
	reach := func(w config.LinkWeights) map[string]float64 {
		s.cfg.Recall.AffinityLinks = w
		var got map[string]float64
		err := s.store.View(func(txn Reader) error {
			sc := &scorer{self: s, q: &Query{}, txn: txn}
			var err error
			got, err = sc.affinity([]*Recalled{{CID: apples, Explain: Explain{Fused: Fused{Relevance: 1}}}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// Two sequential hops through the train (× expand_decay 0.5), not the
	// similar link's 0.9.
	if got := reach(config.LinkWeights{Sequential: 1}); math.Abs(got[p.CID.KeyString()]-0.5) > 1e-9 {
		t.Fatalf("similar link followed with weight 0: %v, want 0.5", got[p.CID.KeyString()])
	}
	if got := reach(config.LinkWeights{Similar: 0.5}); math.Abs(got[p.CID.KeyString()]-0.45) > 1e-9 {
		t.Fatalf("similar link of strength 0.9 at weight 0.5: %v, want 0.45", got[p.CID.KeyString()])
	}
}

func TestCoAccessAndQueryLog(t *testing.T) {
	clock := clock.NewFake(epoch)
	s := openSelf(t, testConfig(t.TempDir()), clock)
	defer s.Close()
	o := newOwner(t, s, "a")
	seededConversation(t, s, clock, o, 20, 9)
	ctx := context.Background()
	rs, err := s.Recall(ctx, Query{Sona: o.sona, Text: "tomato basil garden", AgentID: "agent-1", K: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store().Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	var hits []cid.Cid
	for _, r := range rs {
		if r.Via == ViaHit {
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
	log, err := s.QueryLog(10)
	if err != nil || len(log) != 1 {
		t.Fatalf("query log: %v %v", log, err)
	}
	e := log[0]
	if e.Sona != o.sona || e.AgentId != "agent-1" || len(e.Cids) != len(rs) || !slices.Contains(e.Keywords, "basil") {
		t.Fatalf("query log entry %v", e)
	}
	// Peek leaves no trace.
	if _, err := s.Recall(ctx, Query{Sona: o.sona, Text: "lisbon", Peek: true}); err != nil {
		t.Fatal(err)
	}
	s.Store().Barrier(ctx)
	if log, _ := s.QueryLog(10); len(log) != 1 {
		t.Fatalf("a peek was logged: %d entries", len(log))
	}
}

func TestTextIndexRebuiltAndCaughtUp(t *testing.T) {
	dir := t.TempDir()
	clock := clock.NewFake(epoch)
	cfg := testConfig(dir)
	s := openSelf(t, cfg, clock)
	o := newOwner(t, s, "a")
	mems := seededConversation(t, s, clock, o, 40, 11)
	bm25 := func(s *Self, q string) map[string]bool {
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
	s = openSelf(t, cfg, clock)
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
	s = openSelf(t, cfg, clock)
	defer s.Close()
	if got := bm25(s, "tomato lisbon sunset"); !maps.Equal(got, want) {
		t.Fatalf("caught-up index finds %d, before %d", len(got), len(want))
	}
	if n, _ := s.Text.Raw().Len(); n != uint64(len(mems)) {
		t.Fatalf("index holds %d docs, store %d memories", n, len(mems))
	}
}
