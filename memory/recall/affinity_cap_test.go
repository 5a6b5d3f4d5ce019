package recall_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
)

// The affinity path brings at most recall.candidates memories, the best
// by affinity, as the other paths do: a memory linked to many (one that
// many responses drew on) made every recall it seeded enrich all it
// reached.
func TestAffinityPathBringsAtMostCandidates(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	cfg.Recall.Candidates = 5
	s := memorytest.Open(t, cfg, clk)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "hub")
	text := func(s string) *model.Memory {
		return &model.Memory{Data: model.Data{Text: &model.TextData{Content: s}}}
	}
	hub := o.Add(text("the orchard meeting is on friday"), nil)
	var links []assoc.Link
	strength := map[cid.Cid]float64{}
	for i := range 40 {
		c := o.Add(text(fmt.Sprintf("note %d about something else entirely", i)), nil)
		strength[c] = 0.9 - float64(i)/100
		links = append(links, assoc.Link{Target: c, Type: assoc.Related, Strength: strength[c]})
	}
	if err := s.Store().Update(context.Background(), func(tx store.Tx) error { return assoc.Put(tx, hub, links, clk.Now().Unix()) }); err != nil {
		t.Fatal(err)
	}
	paths := recall.Paths{Weights: config.PathWeights{BM25: 1, Affinity: 0.5}, Fusion: "weighted"}
	rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "orchard meeting", K: 100, Paths: &paths, Peek: true, Expand: new(0)})
	if err != nil {
		t.Fatal(err)
	}
	var byAffinity []recall.Explain
	for _, r := range rs {
		if r.Explain.Evidence.AffinityRank > 0 {
			byAffinity = append(byAffinity, r.Explain)
			if r.Explain.Evidence.Affinity < 0.9-4.0/100-1e-9 {
				t.Errorf("%s (affinity %.2f) joined: not among the five strongest links", r.CID, r.Explain.Evidence.Affinity)
			}
		}
	}
	if len(byAffinity) != cfg.Recall.Candidates {
		t.Fatalf("the affinity path brought %d candidates, want %d: %v", len(byAffinity), cfg.Recall.Candidates, memorytest.Describe(rs))
	}
	ranks := make([]int, 0, len(byAffinity))
	for _, e := range byAffinity {
		ranks = append(ranks, e.Evidence.AffinityRank)
	}
	slices.Sort(ranks)
	if !slices.Equal(ranks, []int{1, 2, 3, 4, 5}) {
		t.Errorf("affinity ranks %v, want 1…5", ranks)
	}
}
