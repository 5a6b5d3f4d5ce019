package living_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/living"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

func TestSweepExpiryAtTheBoundaryAndBranchStats(t *testing.T) {
	clock := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	obs := o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "the build is red"}}}, &messages.MemoryMeta{Kind: "observation"})
	o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "the build uses go"}}}, &messages.MemoryMeta{Kind: "fact"})
	ctx := context.Background()
	end := memorytest.Epoch.Add(72 * time.Hour)

	clock.Set(end.Add(-time.Second))
	rep, err := s.Living.Sweep(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.Living.HeartbeatState()
	if rep.Expired != 0 || !rep.PassComplete || st.Last[o.Sona].GetActive() != 2 {
		t.Fatalf("before the TTL: %+v, active %d", rep, st.Last[o.Sona].GetActive())
	}
	recalled := func() []cid.Cid {
		rs, err := memorytest.Recall(s, ctx, recall.Query{Sona: o.Sona, Text: "the build is red", Peek: true})
		if err != nil {
			t.Fatal(err)
		}
		var out []cid.Cid
		for _, r := range rs {
			out = append(out, r.CID)
		}
		return out
	}
	if !slices.Contains(recalled(), obs) {
		t.Fatal("observation hidden before its TTL")
	}

	clock.Set(end)
	if rep, err = s.Living.Sweep(ctx, 100); err != nil {
		t.Fatal(err)
	}
	st, _ = s.Living.HeartbeatState()
	if rep.Expired != 1 || st.Last[o.Sona].GetActive() != 1 {
		t.Fatalf("at the TTL: %+v, active %d", rep, st.Last[o.Sona].GetActive())
	}
	if slices.Contains(recalled(), obs) {
		t.Fatal("observation recalled at its TTL")
	}
	if rep, _ = s.Living.Sweep(ctx, 100); rep.Expired != 0 {
		t.Fatalf("expiry counted twice: %+v", rep)
	}
}

func TestSweepIsBoundedAndResumes(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	for i := range 5 {
		o.Text(fmt.Sprintf("memory number %d", i))
	}
	var swept int64
	for i, want := range []bool{false, false, true} {
		rep, err := s.Living.Sweep(context.Background(), 2)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Swept > 2 || rep.PassComplete != want {
			t.Fatalf("sweep %d: %+v", i, rep)
		}
		swept += rep.Swept
	}
	st, _ := s.Living.HeartbeatState()
	if swept != 5 || st.Passes != 1 || st.Last[o.Sona].GetActive() != 5 {
		t.Fatalf("swept %d, passes %d, active %d", swept, st.Passes, st.Last[o.Sona].GetActive())
	}
}

func TestSweepPrunesWeakLinks(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	a := o.Text("alpha")
	o.Text("beta")
	strong, weak := o.Text("gamma"), o.Text("delta") // not a's sequential neighbours
	ctx := context.Background()
	err := s.Store().Update(ctx, func(tx store.Tx) error {
		return assoc.Put(tx, a, []assoc.Link{{Target: weak, Type: assoc.Related, Strength: 0.3}, {Target: strong, Type: assoc.Related, Strength: 0.9}}, memorytest.Epoch.Unix())
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Living.Sweep(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	// Bootstrap threshold: 0.60 + log(0.3)·0.10 ≈ 0.48. The weak link goes
	// (from both ends), the strong one and the sequential ones (1.0) stay.
	if !rep.Threshold.Bootstrap || rep.Pruned != 2 {
		t.Fatalf("%+v, want 2 pruned on the bootstrap threshold", rep)
	}
	links, _ := s.Assoc.Associations(a)
	var targets []cid.Cid
	for _, l := range links {
		targets = append(targets, l.Target)
	}
	if slices.Contains(targets, weak) || !slices.Contains(targets, strong) {
		t.Fatalf("links of a after pruning: %v", links)
	}
}

// appendMerge appends a planned merge as the sona's owner would.
func appendMerge(t *testing.T, s *memory.Self, m *living.Merge) {
	t.Helper()
	rec, err := s.Sonas.Get(m.Sona)
	if err != nil {
		t.Fatal(err)
	}
	head, _ := cid.Decode(*rec.Head)
	plan, err := model.PlanAppend(m.Sona, &head, rec.Length, m.Prepared, s.Clock().Now().Unix())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store().Update(context.Background(), s.Chains.Op(plan)); err != nil {
		t.Fatal(err)
	}
}

func TestCompressionFiresAbovePhiTimesMean(t *testing.T) {
	for _, tc := range []struct {
		big  int
		want bool
	}{{42, false}, {43, true}} {
		t.Run(fmt.Sprint(tc.big), func(t *testing.T) {
			s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
			defer s.Close()
			ctx := context.Background()
			big, small := memorytest.NewOwner(t, s, "big"), memorytest.NewOwner(t, s, "small")
			for i := range tc.big {
				big.Text(fmt.Sprintf("big branch memory %d on topic %d", i, i%4))
			}
			for i := range 10 {
				small.Text(fmt.Sprintf("small branch memory %d", i))
			}
			if _, err := s.Living.Sweep(ctx, 1000); err != nil {
				t.Fatal(err)
			}
			merges, err := s.Living.PlanCompressions(ctx, 4)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.want {
				if len(merges) != 0 {
					t.Fatalf("%d vs 10 compressed: %+v", tc.big, merges)
				}
				return
			}
			if len(merges) != 1 || merges[0].Sona != big.Sona {
				t.Fatalf("merges %+v, want one of the big branch", merges)
			}
			m := merges[0]
			// Back to the mean: 43 − ceil(26.5) + 1 = 17 merged into one.
			if len(m.Sources) != 17 {
				t.Fatalf("%d sources, want 17", len(m.Sources))
			}
			appendMerge(t, s, m)
			centroid, meta, err := s.Memories.Get(m.Prepared.CID)
			if err != nil {
				t.Fatal(err)
			}
			var targets []cid.Cid
			for _, e := range centroid.Edges {
				targets = append(targets, e.Target)
			}
			for _, src := range m.Sources {
				if !slices.Contains(targets, src) {
					t.Fatalf("source %s not reachable from the centroid", src)
				}
				sm, err := s.Memories.Meta(src)
				if err != nil || !sm.Archived {
					t.Fatalf("source %s not archived: %v %v", src, sm, err)
				}
			}
			if meta.Labels[living.LabelMerged] != "17" || meta.Archived {
				t.Fatalf("centroid meta %+v", meta)
			}
			// Planned again, the branch is back under φ × mean: no second merge.
			if again, err := s.Living.PlanCompressions(ctx, 4); err != nil || len(again) != 0 {
				t.Fatalf("compressed twice: %+v %v", again, err)
			}
			// The same merge cannot apply twice: its sources are archived.
			rec, _ := s.Sonas.Get(m.Sona)
			head, _ := cid.Decode(*rec.Head)
			plan, _ := model.PlanAppend(m.Sona, &head, rec.Length, m.Prepared, memorytest.Epoch.Unix())
			if err := s.Store().Update(ctx, s.Chains.Op(plan)); err == nil {
				t.Fatal("a merge of archived sources applied")
			}
		})
	}
}
