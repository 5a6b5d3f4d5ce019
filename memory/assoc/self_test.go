package assoc_test

import (
	"context"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
)

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
