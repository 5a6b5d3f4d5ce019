package memory_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/forget"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// fullScan is what the open computed before the profiles loaded in the
// background: every metadata record counted and decoded whole, its
// evaluation's metric profile by vector id.
func fullScan(t *testing.T, s *memory.Self, metrics []string) (int64, map[uint64][]float32) {
	t.Helper()
	var n int64
	profiles := map[uint64][]float32{}
	err := s.Store().View(func(txn store.Reader) error {
		return store.Scan(txn, meta.Prefix, func(k, v []byte) error {
			n++
			c, err := cid.Cast(k[len(meta.Prefix):])
			if err != nil {
				return err
			}
			m := &messages.MemoryMeta{}
			if err := meta.Unmarshal(v, m); err != nil {
				return err
			}
			if m.Evaluation == nil {
				return nil
			}
			if p := eumas.Profile(m.Evaluation, metrics); p != nil {
				id, ok := s.Index().ID(c.KeyString())
				if !ok {
					return fmt.Errorf("%s has metadata and no vector", c)
				}
				profiles[id] = p
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n, profiles
}

// checkLoaded compares the self's count and metric profiles, once loaded,
// with a full scan of its store. (A forgotten memory's profile stays in
// the table, under a vector id no sona lists, until the next open: the
// number of profiles is compared only after one.)
func checkLoaded(t *testing.T, s *memory.Self, metrics []string, what string, opened bool) {
	t.Helper()
	// QueryProfile waits for the background load.
	if _, err := s.Evals.QueryProfile(context.Background(), "what did we plan for the trip"); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	n, want := fullScan(t, s, metrics)
	if _, got := s.Counts(); got != n {
		t.Errorf("%s: %d memories counted, the full scan finds %d", what, got, n)
	}
	if got := s.Evals.Profiles(); opened && got != len(want) {
		t.Errorf("%s: %d profiles loaded, the full scan finds %d", what, got, len(want))
	}
	for id, p := range want {
		if got := s.Evals.ProfileOf(id); !slices.Equal(got, p) {
			t.Errorf("%s: vector %d: profile %v, the full scan gives %v", what, id, got, p)
		}
	}
}

// TestProfilesLoadedAfterOpenMatchAFullScan: the count of memories and
// the metric profiles the open takes from its one scan of the metadata,
// in two halves side by side, read from the encoded records, equal what
// a full decoding scan of every metadata record gives — on a store with
// evaluated memories, memories not yet evaluated, and forgotten ones;
// before and after reopening.
func TestProfilesLoadedAfterOpenMatchAFullScan(t *testing.T) {
	dir := t.TempDir()
	cfg := memorytest.Config(dir)
	metrics := eumas.Metrics(cfg.Evaluation.Archetypes)
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
	a, b := memorytest.NewOwner(t, s, "a"), memorytest.NewOwner(t, s, "b")
	var doomed []cid.Cid
	for i := range 60 {
		o := a
		if i%3 == 0 {
			o = b
		}
		c := o.Text(fmt.Sprintf("memory %d: I decided to book the train to Lyon on day %d, it was urgent and I felt great about it", i, i))
		if i%17 == 5 {
			doomed = append(doomed, c)
		}
	}
	if err := s.Evals.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forget.Forget(ctx, forget.Request{Selector: forget.Selector{CIDs: doomed}, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		a.Text(fmt.Sprintf("later %d: a worrying error in the build, we must fix it before Friday", i))
	}
	// Some of the later ones evaluated, the rest behind the watermark.
	if _, err := s.Evals.EvaluatePending(ctx, eumas.NewHeuristic(cfg.Evaluation.Archetypes), 5); err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, s, metrics, "before reopening", false)
	if n, profiles := fullScan(t, s, metrics); n != 60+12-int64(len(doomed)) || len(profiles) < 40 {
		t.Fatalf("the store holds %d memories and %d profiles: not the case under test", n, len(profiles))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Closed at once, the load perhaps under way: it stops, and the
	// next open loads the same.
	if err := open().Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	checkLoaded(t, s, metrics, "after reopening", true)
}

// TestProfilesOffLoadNothing: with evaluation off no metric profile is
// kept, the open counts the memories all the same.
func TestProfilesOffLoadNothing(t *testing.T) {
	cfg := memorytest.Config(t.TempDir())
	cfg.Evaluation = config.Evaluation{Mode: "off"}
	s, err := memorytest.OpenWith(memory.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	o := memorytest.NewOwner(t, s, "a")
	for i := range 5 {
		o.Text(fmt.Sprintf("memory %d", i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = memorytest.OpenWith(memory.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, n := s.Counts(); n != 5 {
		t.Errorf("%d memories counted, want 5", n)
	}
	if p, err := s.Evals.QueryProfile(context.Background(), "memory"); p != nil || err != nil || s.Evals.Profiles() != 0 {
		t.Errorf("evaluation off: profile %v, %v, %d profiles", p, err, s.Evals.Profiles())
	}
}

// TestProfilesLoadFailureTurnsTheMetricPathOff: when the metric profiles
// cannot be loaded (a damaged metadata record), the open still serves,
// the log says the metric path is off, and recalls are answered without
// it rather than failing.
func TestProfilesLoadFailureTurnsTheMetricPathOff(t *testing.T) {
	dir := t.TempDir()
	cfg := memorytest.Config(dir)
	ev := eumas.NewHeuristic(cfg.Evaluation.Archetypes)
	s, err := memorytest.OpenWith(memory.Options{Config: cfg, Evaluator: ev})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The damaged one in another sona than the recalls': a recall that
	// met it would fail on reading it, which is not the case under test.
	damaged := memorytest.NewOwner(t, s, "b").Text("a memory of sona b, whose metadata will be damaged")
	o := memorytest.NewOwner(t, s, "a")
	for i := range 20 {
		o.Text(fmt.Sprintf("memory %d: I decided to book the train to Lyon, it was urgent and I felt great", i))
	}
	if err := s.Evals.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	q := recall.Query{Sona: o.Sona, Text: "I decided it was urgent and I felt great", Scope: recall.ScopeSona, Peek: true}
	if prof, err := s.Evals.QueryProfile(ctx, q.Text); prof == nil || err != nil {
		t.Fatalf("before the damage the query has no metric profile (%v, %v): not the case under test", prof, err)
	}
	// Its metadata (not the last memory's, which the open checks)
	// replaced by bytes that are no MemoryMeta.
	err = s.Store().WriteBehind(func(txn *badger.Txn) error { return txn.Set(meta.Key(damaged), []byte{0xff, 0xff, 0xff}) })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	logs := &memorytest.LogBuffer{}
	s, err = memorytest.OpenWith(memory.Options{Config: cfg, Evaluator: ev, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prof, err := s.Evals.QueryProfile(ctx, q.Text) // waits for the load
	if prof != nil || err != nil {
		t.Errorf("after a failed load: profile %v, %v; want none (the metric path off)", prof, err)
	}
	if s.Evals.LoadFailed() == nil {
		t.Error("LoadFailed is nil after a failed load")
	}
	memorytest.MustLog(t, logs, "metric profiles: load failed; recall goes on without the metric path")
	got, err := memorytest.Recall(s, ctx, q)
	if err != nil || len(got) == 0 {
		t.Fatalf("recall with the metric profiles unloaded: %d hits, %v", len(got), err)
	}
}
