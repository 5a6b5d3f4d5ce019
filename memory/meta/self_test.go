package meta_test

import (
	"context"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
)

// A committed memory enters the decoded-memory cache as the append held
// it (unless a reader following the commit, such as the text index, read
// its block first): what is served must be the memory its CID names, for
// every kind of data.
func TestCommittedMemoryIsCachedAsItsBlock(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "cache")
	ts, name, modelName, stop := int64(1_700_000_000), "Ada", "m-1", "endTurn"
	first := o.Text("the first memory")
	for _, m := range []*model.Memory{
		{Data: model.Data{Text: &model.TextData{Content: "a text with an edge and a time"}}, Timestamp: &ts,
			Edges: []model.Edge{{Target: first, Weight: 0.25}}},
		{Data: model.Data{Other: &model.OtherData{Name: &name, Content: "said by another"}}},
		{Data: model.Data{Other: &model.OtherData{Content: "said by someone unnamed"}}},
		{Data: model.Data{Self: &model.SelfData{Name: "me", Parts: []model.Part{{Content: "one", Model: &modelName}, {Content: "two"}}, StopReason: &stop}}},
	} {
		c := o.Add(m, nil)
		got, _, err := s.Memories.Get(c)
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := got.Encode()
		if err != nil || again != c {
			t.Fatalf("the cached memory encodes to %s (%v), its CID is %s", again, err, c)
		}
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
