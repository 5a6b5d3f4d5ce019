package anchor_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/living"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/messages"
)

// An anchor is written by the append's own transaction: it is there with
// its memory, under the memory's insertion-log position, or neither is.
func TestAnchorIsWrittenByTheAppend(t *testing.T) {
	clock := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock)
	defer s.Close()
	woken := make(chan struct{}, 16)
	s.Anchors.OnAdded(func() { woken <- struct{}{} })
	o := memorytest.NewOwner(t, s, "ops")

	plain := o.Text("lunch was pasta")
	incident := o.Text("The payment API had an outage for an hour.")
	milestone := o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "v1 is out"}}}, &messages.MemoryMeta{Labels: map[string]string{"anchor": "milestone"}})
	page, err := s.Anchors.Page(0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 2 || page.Next != "" {
		t.Fatalf("anchors %+v, want two", page)
	}
	for i, want := range []struct {
		c        cid.Cid
		category string
	}{{incident, "incident"}, {milestone, "milestone"}} {
		a := page.Items[i]
		meta, err := s.Memories.Meta(want.c)
		if err != nil {
			t.Fatal(err)
		}
		if a.CID != want.c || a.Category != want.category || a.Time != memorytest.Epoch.Unix() || a.Sona != o.Sona || a.Seq != meta.Seq {
			t.Fatalf("anchor %d = %+v, want %s %s at seq %d", i, a, want.c, want.category, meta.Seq)
		}
	}
	if len(woken) != 2 {
		t.Fatalf("the anchor hook ran %d times, want once per anchoring commit (2)", len(woken))
	}

	// A refused append (a dangling edge) writes no anchor either.
	nowhere := memorytest.MustCIDOf(t, model.CodecDagCBOR, []byte("nowhere"))
	bad := &model.Memory{Data: model.Data{Text: &model.TextData{Content: "another outage"}}, Edges: []model.Edge{{Target: nowhere, Weight: 1}}}
	if _, err := o.TryAdd(bad, nil); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("dangling edge: %v", err)
	}
	if page, _ := s.Anchors.Page(0, 10); len(page.Items) != 2 {
		t.Fatalf("a refused append left an anchor: %+v", page.Items)
	}

	// The heartbeat's merges and insights, and imported memories, are not judged.
	ctx := context.Background()
	for name, prep := range map[string]func(p *model.Prepared){
		"merge":    func(p *model.Prepared) { p.Archive = []cid.Cid{plain} },
		"imported": func(p *model.Prepared) { p.Imported = true },
		"insight": func(p *model.Prepared) {
			p.Meta.Insight = &messages.InsightMark{Category: living.InsightSummary, Confidence: 0.5}
		},
	} {
		m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: name + ": the outage again"}}}
		vecs, err := s.Embed(ctx, m.Text())
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Chains.Prepare(m, vecs[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		prep(p)
		plan, err := model.PlanAppend(o.Sona, o.Head, o.N, p, memorytest.Epoch.Unix())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Store().Update(ctx, s.Chains.Op(plan)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		o.Head, o.N = plan.Next()
		plain = p.CID // the next merge archives this one
	}
	if page, _ := s.Anchors.Page(0, 10); len(page.Items) != 2 {
		t.Fatalf("merges, insights or imports were anchored: %+v", page.Items)
	}
}

func TestAnchorsPageAndCursor(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "ops")
	var want []cid.Cid
	for _, text := range []string{"we decided to move", "the db went down", "filler", "we shipped it", "postmortem written"} {
		c := o.Text(text)
		if text != "filler" {
			want = append(want, c)
		}
	}
	var got []cid.Cid
	var after uint64
	for pages := 0; ; pages++ {
		page, err := s.Anchors.Page(after, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page.Items {
			got = append(got, a.CID)
		}
		if page.Next == "" {
			if pages != 1 {
				t.Fatalf("%d pages of 3 for 4 anchors", pages+1)
			}
			break
		}
		after = page.Items[len(page.Items)-1].Seq
	}
	if !slices.Equal(got, want) {
		t.Fatalf("anchors %v, want %v in append order", got, want)
	}

	// The sink's cursor is durable and only moves forward.
	ctx := context.Background()
	if c, err := s.Anchors.Cursor(); err != nil || c != 0 {
		t.Fatalf("fresh cursor %d, %v", c, err)
	}
	for _, seq := range []uint64{4, 2} {
		if err := s.Anchors.SetCursor(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	if c, _ := s.Anchors.Cursor(); c != 4 {
		t.Fatalf("cursor %d after 4 then 2, want 4", c)
	}
}
