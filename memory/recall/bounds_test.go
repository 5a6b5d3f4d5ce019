package recall_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
)

// textMemory is a text memory saying s.
func textMemory(s string) *model.Memory {
	return &model.Memory{Data: model.Data{Text: &model.TextData{Content: s}}}
}

// The affinity path brings at most recall.candidates memories, the best
// by affinity, as the other paths do: a memory linked to many (one that
// many responses drew on) made every recall it seeded enrich all it
// reached.
func TestAffinityPathBringsAtMostCandidates(t *testing.T) {
	const candidates = 5
	_, rs := recallAHub(t, func(rc *config.Recall) { rc.Candidates = candidates })
	var byAffinity []recall.Explain
	for _, r := range rs {
		if r.Explain.Evidence.AffinityRank > 0 {
			byAffinity = append(byAffinity, r.Explain)
			if r.Explain.Evidence.Affinity < 0.9-4.0/100-1e-9 {
				t.Errorf("%s (affinity %.2f) joined: not among the five strongest links", r.CID, r.Explain.Evidence.Affinity)
			}
		}
	}
	if len(byAffinity) != candidates {
		t.Fatalf("the affinity path brought %d candidates, want %d: %v", len(byAffinity), candidates, memorytest.Describe(rs))
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

// recallAHub recalls a memory linked to forty others (the i-th of
// strength 0.9 − i/100: the affinity it lends) by the full-text and
// affinity paths, with the recall settings set.
func recallAHub(t *testing.T, set func(*config.Recall)) (*memory.Self, []*recall.Recalled) {
	t.Helper()
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	set(&cfg.Recall)
	s := memorytest.Open(t, cfg, clk)
	t.Cleanup(func() { s.Close() })
	o := memorytest.NewOwner(t, s, "hub")
	hub := o.Add(textMemory("the orchard meeting is on friday"), nil)
	var links []assoc.Link
	for i := range 40 {
		c := o.Add(textMemory(fmt.Sprintf("note %d about something else entirely", i)), nil)
		links = append(links, assoc.Link{Target: c, Type: assoc.Related, Strength: 0.9 - float64(i)/100})
	}
	if err := s.Store().Update(context.Background(), func(tx store.Tx) error { return assoc.Put(tx, hub, links, clk.Now().Unix()) }); err != nil {
		t.Fatal(err)
	}
	paths := recall.Paths{Weights: config.PathWeights{BM25: 1, Affinity: 0.5}, Fusion: "weighted"}
	rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "orchard meeting", K: 100, Paths: &paths, Peek: true, Expand: new(0)})
	if err != nil {
		t.Fatal(err)
	}
	return s, rs
}

// The memories the affinity path brings are returned with CIDs whose
// bytes are the vector index's own key. The walk cuts the keys of all it
// reaches from shared blocks, and a CID aliasing one kept the whole block
// alive for as long as it was kept — in an edge of the response that drew
// on it, cached with that memory: 76 MB of such blocks after three minutes
// of advances (issue 15, stop 97).
func TestAffinityHitsAreTheIndexsKeys(t *testing.T) {
	s, rs := recallAHub(t, func(rc *config.Recall) { rc.Candidates = 5 })
	joined := 0
	for _, r := range rs {
		if r.Explain.Evidence.AffinityRank == 0 {
			continue
		}
		joined++
		key := r.CID.KeyString()
		id, ok := s.Index().ID(key)
		if !ok {
			t.Fatalf("%s: not in the vector index", r.CID)
		}
		if own, _ := s.Index().Key(id); unsafe.StringData(own) != unsafe.StringData(key) {
			t.Errorf("%s: its CID's bytes are not the index's key", r.CID)
		}
	}
	if joined == 0 {
		t.Fatal("the affinity path brought nothing")
	}
}

// Expansion reads a bounded number of memories for each it may take:
// with the budget nearly spent by the hit, none of its thirty co-access
// partners fits, and only visitsPerTake × recall.coaccess_partners of them
// (the strongest) are read.
func TestExpansionVisitsAreBounded(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clk)
	defer s.Close()
	rc, mems := countingRecaller(t, s, cfg, clk)
	o := memorytest.NewOwner(t, s, "partners")
	const said = "the lighthouse keeper"
	hit := o.Add(textMemory(said), nil)
	var partners []cid.Cid
	for i := range 30 {
		partners = append(partners, o.Add(textMemory(fmt.Sprintf("%d: %s", i, strings.Repeat("a long account of something else, ", 20))), nil))
	}
	err := s.Store().Update(context.Background(), func(tx store.Tx) error {
		return assoc.Update(tx, assoc.CoAccessKey("", hit), clk.Now().Unix(), func(l *assoc.List) {
			for i, p := range partners {
				e := l.Get(p)
				e.Type, e.Strength = assoc.CoAccess, 0.9-float64(i)/100
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	paths := recall.Paths{Weights: config.PathWeights{BM25: 1}, CoAccess: true, Fusion: "weighted"}
	rs, _, err := rc.Recall(context.Background(), recall.Query{Sona: o.Sona, Text: "lighthouse keeper", K: 1, Budget: len(said) + 50,
		Paths: &paths, Peek: true, Expand: new(10)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].CID != hit {
		t.Fatalf("recalled %v, want the hit alone", memorytest.Describe(rs))
	}
	read := 0
	for i, p := range partners {
		if mems.reads[p] > 0 {
			read++
			if i >= 8 {
				t.Errorf("partner %d read: not among the eight strongest", i)
			}
		}
	}
	if want := 4 * cfg.Recall.CoAccessPartners; read != want {
		t.Fatalf("%d of the 30 partners read, want %d", read, want)
	}
}
