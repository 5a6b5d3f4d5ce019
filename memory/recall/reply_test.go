package recall_test

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
)

// A memory's reply evidence is the relevance of its own of the question it
// answers: the memory before it in its sona's chain when that one asks a
// question (a question mark), within the session (recall.context_gap), of
// another speaker. Nothing for a memory after a statement, after its own
// speaker's question, or after a question of the session before.
func TestRecallReplyEvidence(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clk)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "talk")
	m := map[string]cid.Cid{}
	lines := []struct {
		name, who, text string
		day             int
	}{
		{"r0", "Bo", "I cooked pasta tonight.", 0},
		{"r1", "Ann", "What is your favourite video game?", 0},
		{"r2", "Bo", "Xenoblade Chronicles, no contest.", 0}, // answers r1
		{"r3", "Ann", "Which video game do your kids play?", 0},
		{"r4", "Ann", "Mine play Tetris all day.", 0}, // Ann again: no answer to her own question
		{"r5", "Bo", "The video game arcade closed down.", 0},
		{"r6", "Ann", "Sad news.", 0}, // after a statement
		{"r7", "Ann", "Do you still have your video game console?", 0},
		{"r8", "Bo", "Morning! Off to work.", 1}, // a day later: another session
	}
	for i, l := range lines {
		ts := memorytest.Epoch.Add(time.Duration(l.day)*24*time.Hour + time.Duration(i)*time.Minute).Unix()
		clk.Set(time.Unix(ts, 0))
		who := l.who
		m[l.name] = o.Add(&model.Memory{Data: model.Data{Other: &model.OtherData{Name: &who, Content: l.text}}, Timestamp: &ts}, nil)
	}
	// BM25 alone lends relevance (the questions and r5 have the query's
	// words); the affinity path brings their neighbours in.
	paths := recall.Paths{Weights: config.PathWeights{BM25: 1, Affinity: 0.5, Reply: 1}, Fusion: "weighted"}
	rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "favourite video game", Paths: &paths, Peek: true, Expand: new(0)})
	if err != nil {
		t.Fatal(err)
	}
	ex := evidenceOf(rs)
	best := 0.0
	for _, e := range ex {
		best = math.Max(best, e.Evidence.BM25)
	}
	for _, name := range []string{"r1", "r2", "r4", "r6", "r8"} {
		if _, ok := ex[m[name]]; !ok {
			t.Fatalf("%s is no candidate: %v", name, memorytest.Describe(rs))
		}
	}
	if got, want := ex[m["r2"]].Evidence.Reply, ex[m["r1"]].Evidence.BM25/best; want == 0 || math.Abs(got-want) > 1e-12 {
		t.Errorf("r2's reply evidence %v, want r1's relevance %v", got, want)
	}
	// Weight 1 over the match's (BM25) 1, the support (reply and affinity)
	// scaled down to MaxSupport together.
	r2 := ex[m["r2"]]
	support := r2.Evidence.Reply + 0.5*math.Min(1, r2.Evidence.Affinity)
	if got, want := r2.Fused.Reply, r2.Evidence.Reply*math.Min(1, recall.MaxSupport/support); math.Abs(got-want) > 1e-12 {
		t.Errorf("r2's fused reply %v, want %v", got, want)
	}
	for _, name := range []string{"r1", "r4", "r6", "r8"} {
		if e := ex[m[name]].Evidence.Reply; e != 0 {
			t.Errorf("%s: reply evidence %v, want 0", name, e)
		}
	}
	// The answer, which has none of the query's words, ranks above what
	// the affinity path alone brought.
	hits := recall.Ranked(rs)
	at := func(c cid.Cid) int {
		return slices.IndexFunc(hits, func(r *recall.Recalled) bool { return r.CID == c })
	}
	for _, name := range []string{"r0", "r4", "r6", "r8"} {
		if at(m["r2"]) > at(m[name]) {
			t.Errorf("the answer r2 ranks below %s: %v", name, memorytest.Describe(hits))
		}
	}
}
