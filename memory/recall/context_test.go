package recall_test

import (
	"context"
	"maps"
	"math"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
)

// contextSona is a sona of two speakers over three sessions a day apart:
// the memories by name.
func contextSona(t *testing.T, s *memory.Self, clk *clock.Fake) (*memorytest.Owner, map[string]cid.Cid) {
	o := memorytest.NewOwner(t, s, "talk")
	byName := map[string]cid.Cid{}
	lines := []struct{ name, who, text string }{
		{"a0", "Bo", "The car needs new tyres before winter."},  // session 1
		{"a1", "Ann", "Did you see the aurora over the fjord?"}, // session 2, a day later
		{"a2", "Bo", "Yes, it was green and enormous."},
		{"a3", "Ann", "We should drive north again."},
		{"a4", "Bo", "Lunch was good."},
		{"a5", "Ann", "My sister plays the cello."}, // session 3, a day later
	}
	day := map[string]int{"a0": 0, "a5": 2}
	for i, l := range lines {
		d, ok := day[l.name]
		if !ok {
			d = 1
		}
		ts := memorytest.Epoch.Add(time.Duration(d)*24*time.Hour + time.Duration(i)*time.Minute).Unix()
		clk.Set(time.Unix(ts, 0))
		who := l.who
		byName[l.name] = o.Add(&model.Memory{Data: model.Data{Other: &model.OtherData{Name: &who, Content: l.text}}, Timestamp: &ts}, nil)
	}
	return o, byName
}

func evidenceOf(rs []*recall.Recalled) map[cid.Cid]recall.Explain {
	out := map[cid.Cid]recall.Explain{}
	for _, r := range rs {
		out[r.CID] = r.Explain
	}
	return out
}

// A memory's context evidence is the mean relevance of its own of the
// memories around it in its session — up to recall.context_window on each
// side, halved per hop beyond the first — and nothing across a session's
// end (recall.context_gap).
func TestRecallContextEvidence(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clk)
	defer s.Close()
	o, m := contextSona(t, s, clk)
	// BM25 alone lends relevance (only a1 has the query's words: its own
	// relevance is 1); the affinity path brings a1's neighbours in.
	paths := recall.Paths{Weights: config.PathWeights{BM25: 1, Affinity: 0.5, Context: 1}, Fusion: "weighted"}
	rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "aurora fjord", Paths: &paths, Peek: true, Expand: new(0)})
	if err != nil {
		t.Fatal(err)
	}
	ex := evidenceOf(rs)
	w := float64(2 * cfg.Recall.ContextWindow)
	want := map[string]float64{
		"a1": 0,       // its neighbours have no words of the query; a0 is a session before
		"a2": 1 / w,   // a1 next to it
		"a3": 0.5 / w, // a1 two places away
		"a0": 0,       // a1 next to it in the chain, but a day later
	}
	for name, v := range want {
		e, ok := ex[m[name]]
		if !ok {
			t.Fatalf("%s is no candidate: %v", name, memorytest.Describe(rs))
		}
		if math.Abs(e.Evidence.Context-v) > 1e-12 {
			t.Errorf("%s: context %v, want %v", name, e.Evidence.Context, v)
		}
		if math.Abs(e.Fused.Context-v) > 1e-12 { // weight 1 over the match's (BM25) 1; the support stays below MaxSupport
			t.Errorf("%s: fused context %v, want %v", name, e.Fused.Context, v)
		}
	}
	// A window of 1: a1 two places away lends a3 nothing.
	cfg.Recall.ContextWindow = 1
	s2 := memorytest.Open(t, func() config.Config { c := cfg; c.DataDir = t.TempDir(); return c }(), clk)
	defer s2.Close()
	o2, m2 := contextSona(t, s2, clk)
	rs, err = memorytest.Recall(s2, context.Background(), recall.Query{Sona: o2.Sona, Text: "aurora fjord", Paths: &paths, Peek: true, Expand: new(0)})
	if err != nil {
		t.Fatal(err)
	}
	ex = evidenceOf(rs)
	if e := ex[m2["a2"]].Evidence.Context; e != 0.5 {
		t.Errorf("window 1: a2's context %v, want 0.5", e)
	}
	if e, ok := ex[m2["a3"]]; ok && e.Evidence.Context != 0 {
		t.Errorf("window 1: a3's context %v, want 0", e.Evidence.Context)
	}
}

// The time evidence: how near a memory's time is to the times the query
// speaks of, resolved against when it is asked (Query.Now); off for a
// query that speaks of no time.
func TestRecallTimeEvidence(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clk)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "diary")
	june := time.Date(2023, time.June, 20, 10, 0, 0, 0, time.UTC)
	july := time.Date(2023, time.July, 20, 10, 0, 0, 0, time.UTC)
	at := func(tm time.Time, text string) cid.Cid {
		ts := tm.Unix()
		return o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: text}}, Timestamp: &ts}, nil)
	}
	inJune := at(june, "We went camping by the lake.")
	inJuly := at(july, "We went camping in the hills.")
	paths := recall.Paths{Weights: config.PathWeights{BM25: 1, Time: 1}, Fusion: "weighted"}
	asked := time.Date(2023, time.August, 1, 0, 0, 0, 0, time.UTC).Unix()
	rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "Where did we go camping in June?", Paths: &paths, Peek: true, Now: asked})
	if err != nil {
		t.Fatal(err)
	}
	ex := evidenceOf(rs)
	// June is 30 days: 20 July is 19 days and 14 hours past its end.
	past := float64(july.Sub(time.Date(2023, time.July, 1, 0, 0, 0, 0, time.UTC))/time.Second + 1)
	if e := ex[inJune].Evidence.Time; e != 1 {
		t.Errorf("the June memory: time %v, want 1", e)
	}
	if e, want := ex[inJuly].Evidence.Time, 1-past/(30*24*3600); math.Abs(e-want) > 1e-12 {
		t.Errorf("the July memory: time %v, want %v", e, want)
	}
	if r := recall.Ranked(rs); len(r) < 2 || r[0].CID != inJune {
		t.Errorf("the June memory does not rank first: %v", memorytest.Describe(r))
	}
	// Asked in May 2024, "in June" is June 2023: the latest June.
	rs, err = memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "camping in June", Paths: &paths, Peek: true,
		Now: time.Date(2024, time.May, 1, 0, 0, 0, 0, time.UTC).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	if e := evidenceOf(rs)[inJune].Evidence.Time; e != 1 {
		t.Errorf("asked in May 2024: the June memory's time %v", e)
	}
	// No time in the query: no time evidence, and no weight for it.
	rs, err = memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "camping", Paths: &paths, Peek: true, Now: asked})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Explain.Evidence.Time != 0 || r.Explain.Fused.Time != 0 || r.Explain.Fused.BM25 != r.Explain.Evidence.BM25/bestBM25(rs) {
			t.Errorf("no time asked: %+v", r.Explain)
		}
	}
}

func bestBM25(rs []*recall.Recalled) float64 {
	best := 0.0
	for _, r := range rs {
		best = math.Max(best, r.Explain.Evidence.BM25)
	}
	return best
}

// The speaker evidence: 1 for the memories of a speaker the query names.
func TestRecallSpeakerEvidence(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clk)
	defer s.Close()
	o, m := contextSona(t, s, clk)
	paths := recall.Paths{Weights: config.PathWeights{BM25: 1, Affinity: 0.5, Speaker: 1}, Fusion: "weighted"}
	rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "What did Ann's sister play, and the aurora?", Paths: &paths, Peek: true})
	if err != nil {
		t.Fatal(err)
	}
	ex := evidenceOf(rs)
	for name, want := range map[string]float64{"a1": 1, "a5": 1, "a2": 0} {
		if e, ok := ex[m[name]]; !ok || e.Evidence.Speaker != want {
			t.Errorf("%s: speaker %v (found %v), want %v", name, e.Evidence.Speaker, ok, want)
		}
	}
	// A name matches whatever its case, possessive or not.
	rs, err = memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "bo's tyres", Paths: &paths, Peek: true})
	if err != nil {
		t.Fatal(err)
	}
	if e := evidenceOf(rs)[m["a0"]].Evidence.Speaker; e != 1 {
		t.Errorf("bo named: a0's speaker %v", e)
	}
}

// The time, speaker and session evidence read a candidate's body once
// per recall, however many times the candidates are enriched (here twice:
// the affinity path adds candidates, and the session evidence is then
// every candidate's again); choosing the hits reads it once more. A later
// recall reads none for the evidence — recall kept what the first read
// (bodyFacts) — and finds the same evidence.
func TestRecallEvidenceReadsEachBodyOnce(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clk)
	defer s.Close()
	o, m := contextSona(t, s, clk)
	r, mem := countingRecaller(t, s, cfg, clk)
	paths := recall.Paths{Weights: config.PathWeights{BM25: 1, Affinity: 0.5, Time: 1, Speaker: 1, Session: 1}, Fusion: "weighted"}
	now := memorytest.Epoch.Add(3 * 24 * time.Hour).Unix()
	rs, _, err := r.Recall(context.Background(), recall.Query{Sona: o.Sona, Text: "What did Ann see over the fjord two days ago?", Paths: &paths, Peek: true, Expand: new(0), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ex := evidenceOf(rs)
	if e, ok := ex[m["a2"]]; !ok || e.Evidence.Affinity == 0 || e.Evidence.BM25Rank != 0 {
		t.Fatalf("a2 is no candidate of the affinity path alone (the second enrichment): %+v", e)
	}
	if e := ex[m["a1"]].Evidence; e.Speaker != 1 || e.Time == 0 || e.Session == 0 {
		t.Errorf("a1's evidence: %+v", e)
	}
	for c, n := range mem.reads {
		if n > 2 {
			t.Errorf("%s: its body read %d times", c, n)
		}
	}
	first := maps.Clone(mem.reads)
	clear(mem.reads)
	again, _, err := r.Recall(context.Background(), recall.Query{Sona: o.Sona, Text: "What did Ann see over the fjord two days ago?", Paths: &paths, Peek: true, Expand: new(0), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if got := evidenceOf(again); !maps.Equal(got, ex) {
		t.Errorf("the second recall's evidence differs:\n%+v\nwant\n%+v", got, ex)
	}
	hits := map[cid.Cid]bool{}
	for _, h := range recall.Ranked(again) {
		hits[h.CID] = true
	}
	for c, n := range mem.reads {
		if n > 1 || !hits[c] {
			t.Errorf("%s: its body read %d times by the second recall (a hit: %v; the first read it %d times)", c, n, hits[c], first[c])
		}
	}
}
