package memory_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// TestHotStateAfterReopenIsRecalls: a memory's hot state changed in its
// own record (o/: meta.UpdateHot, meta.Touch) is what recall sees of it
// after a reopen — its importance, access count and decay tick as
// meta.Read merges them, not the metadata record's stale ones — though
// the open's one scan of the metadata reads the records without the o/
// ones (it takes nothing of the hot state: KnowPlain and the metric
// profiles read other fields). The scores' importance term follows.
func TestHotStateAfterReopenIsRecalls(t *testing.T) {
	dir := t.TempDir()
	cfg := memorytest.Config(dir)
	open := func() *memory.Self {
		t.Helper()
		s, err := memorytest.OpenWith(memory.Options{Config: cfg, Evaluator: eumas.NewHeuristic(cfg.Evaluation.Archetypes)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	s := open()
	o := memorytest.NewOwner(t, s, "a")
	var cids []cid.Cid
	for i := range 12 {
		cids = append(cids, o.Text(fmt.Sprintf("memory %d: the train to Lyon leaves at %d, book the seats", i, i+7)))
	}
	if err := s.Evals.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	// Half of them given another hot state; a third touched as a recall
	// does, some of those twice.
	hot := map[cid.Cid]meta.Hot{}
	for i, c := range cids {
		if i%2 == 0 {
			h := meta.Hot{Importance: 0.9 - float64(i)/100, AccessCount: int64(10 + i), LastAccessTick: int64(5 + i)}
			hot[c] = h
			if err := s.Store().Update(ctx, meta.UpdateHot([]cid.Cid{c}, func(x *meta.Hot, _ cid.Cid) { *x = h })); err != nil {
				t.Fatal(err)
			}
		}
	}
	var touched []cid.Cid
	for i, c := range cids {
		if i%3 == 0 {
			touched = append(touched, c)
		}
	}
	sonas := make([]string, len(touched))
	for i := range sonas {
		sonas[i] = o.Sona
	}
	activity := func(string) (int64, bool) { return 40, true }
	for range 2 {
		if err := s.Store().Update(ctx, meta.Touch(touched, sonas, activity)); err != nil {
			t.Fatal(err)
		}
	}
	// The case under test: stored records that differ from the hot state.
	stale := 0
	err := s.Store().View(func(r store.Reader) error {
		for _, c := range cids {
			var rec messages.MemoryMeta
			if _, err := store.GetProto(r, meta.Key(c), &rec); err != nil {
				return err
			}
			m, err := meta.Read(r, c)
			if err != nil {
				return err
			}
			if meta.HotOf(&rec) != meta.HotOf(m) {
				stale++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if stale < len(cids)/2 {
		t.Fatalf("%d metadata records differ from their hot state: not the case under test", stale)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open()
	defer s.Close()
	q := recall.Query{Sona: o.Sona, Text: "the train to Lyon, book the seats", Scope: recall.ScopeSona, Peek: true, K: len(cids)}
	rs, err := memorytest.Recall(s, ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	err = s.Store().View(func(r store.Reader) error {
		for _, x := range rs {
			m, err := meta.Read(r, x.CID)
			if err != nil {
				return err
			}
			if got, want := meta.HotOf(x.Meta), meta.HotOf(m); got != want {
				t.Errorf("%s: recall after reopening sees hot state %+v, meta.Read %+v", x.CID, got, want)
			}
			if h, ok := hot[x.CID]; ok {
				seen++
				if m.Importance != h.Importance {
					t.Errorf("%s: importance %v after reopening, %v was written", x.CID, m.Importance, h.Importance)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 3 {
		t.Fatalf("recall returned %d of the memories whose hot state was written: not the case under test", seen)
	}
}
