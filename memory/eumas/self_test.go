package eumas_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// openEvaluated opens a self whose queries are evaluated by ev.
func openEvaluated(t *testing.T, cfg config.Config, ev eumas.Evaluator) *memory.Self {
	t.Helper()
	s, err := memory.Open(context.Background(), memory.Options{Config: cfg, Embedder: llm.NewHashedEmbedder(llm.DefaultDims), Clock: clock.NewFake(memorytest.Epoch), Evaluator: ev})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hasProfile(s *memory.Self, c cid.Cid) bool {
	id, ok := s.Index().ID(c.KeyString())
	return ok && s.Evals.ProfileOf(id) != nil
}

func metaOf(t *testing.T, s *memory.Self, c cid.Cid) *messages.MemoryMeta {
	t.Helper()
	meta, err := s.Memories.Meta(c)
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

func TestEvaluationIsStoredSeedsImportanceAndSurvivesReopen(t *testing.T) {
	cfg := memorytest.Config(t.TempDir())
	ev := eumas.NewHeuristic(cfg.Evaluation.Archetypes)
	s := openEvaluated(t, cfg, ev)
	o := memorytest.NewOwner(t, s, "ella")
	moved := o.Text("I felt so happy and loved when we finally adopted the puppy.")
	plain := o.Text("The meeting is at ten.")
	ctx := context.Background()

	// The evaluator actor's batch shares a later group commit
	// (UpdateDeferred) unless more memories wait for the next batch.
	deferred := func() uint64 { return s.Store().CommitStats().Deferred }
	d0 := deferred()
	step, err := s.Evals.EvaluatePending(ctx, ev, 1)
	if err != nil {
		t.Fatal(err)
	}
	if step.Evaluated != 1 || !step.More || step.Watermark != 1 {
		t.Fatalf("first step = %+v, want one memory and more to come", step)
	}
	if metaOf(t, s, plain).Evaluation != nil {
		t.Fatal("the second memory was evaluated in a batch of one")
	}
	d1 := deferred()
	if step, err = s.Evals.EvaluatePending(ctx, ev, 10); err != nil || step.Evaluated != 1 || step.More {
		t.Fatalf("second step = %+v, %v", step, err)
	}
	if d0 != d1 || deferred() != d1+1 {
		t.Fatalf("deferred writes committed: %d by a batch with more to come, %d by the last, want 0 and 1", d1-d0, deferred()-d1)
	}
	if step, err = s.Evals.EvaluatePending(ctx, ev, 10); err != nil || step.Evaluated != 0 || step.Watermark != 2 {
		t.Fatalf("a step with nothing to do = %+v, %v", step, err)
	}

	meta := metaOf(t, s, moved)
	sum := meta.Evaluation
	if sum == nil || sum.Failed || sum.Metrics["emotional_depth"] == 0 || sum.Priority.Score == 0 {
		t.Fatalf("evaluation in the metadata = %v", sum)
	}
	if want := cfg.Evaluation.ImportanceSeed * sum.Priority.Score; meta.Importance != want {
		t.Errorf("importance = %v, want seeded %v", meta.Importance, want)
	}
	full, err := s.Evals.Evaluation(moved)
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Archetypes) != len(cfg.Evaluation.Archetypes) || full.Evaluator != eumas.HeuristicName || full.EvaluatedAt != memorytest.Epoch.Unix() {
		t.Errorf("stored evaluation = %v", full)
	}
	if got := eumas.Aggregate(full).String(); got != sum.String() {
		t.Errorf("the metadata's aggregate %v is not the stored evaluation's %v", sum, got)
	}
	if !hasProfile(s, moved) {
		t.Error("the evaluated memory has no metric profile")
	}
	if hasProfile(s, plain) {
		t.Error("a memory in which nothing stands out has a metric profile")
	}
	before := s.Evals.Profiles()

	// The decay of a memory that matters is slower.
	slow, normal := recall.DecayOf(cfg.Recall.Lambda, meta, 10), recall.Decay(cfg.Recall.Lambda, meta.Importance, false, 10, meta.LastAccessTick)
	if sum.Priority.DecayRate < 0.5 && slow <= normal {
		t.Errorf("decay with decay_rate %v = %v, not slower than %v", sum.Priority.DecayRate, slow, normal)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openEvaluated(t, cfg, ev)
	defer s.Close()
	if s.Evals.Profiles() != before {
		t.Errorf("after reopen %d metric profiles, want %d", s.Evals.Profiles(), before)
	}
	if step, err := s.Evals.EvaluatePending(ctx, ev, 10); err != nil || step.Evaluated != 0 {
		t.Errorf("after reopen the watermark was lost: %+v, %v", step, err)
	}
}

// garbage is a model whose structured replies never fit.
type garbage struct{ calls int }

func (g *garbage) Complete(context.Context, llm.Request) (llm.Response, error) {
	g.calls++
	return llm.Response{Content: `{"metrics": "lots"}`, Model: "garbage-1", StopReason: llm.StopEndTurn}, nil
}

func TestFailedEvaluationIsRecordedNotStoredAsMetrics(t *testing.T) {
	cfg := memorytest.Config(t.TempDir())
	s := openEvaluated(t, cfg, nil)
	defer s.Close()
	c := memorytest.NewOwner(t, s, "ella").Text("I was so happy today.")
	model := &garbage{}
	ev := eumas.NewLLM(model, cfg.Evaluation.Archetypes, 0, nil)
	step, err := s.Evals.EvaluatePending(context.Background(), ev, 10)
	if err != nil {
		t.Fatal(err)
	}
	if step.Evaluated != 1 || step.Failed != 1 {
		t.Fatalf("step = %+v", step)
	}
	if want := 2 * len(cfg.Evaluation.Archetypes); model.calls != want {
		t.Errorf("the model was asked %d times, want %d (each archetype twice)", model.calls, want)
	}
	meta := metaOf(t, s, c)
	if !meta.Evaluation.GetFailed() || len(meta.Evaluation.Metrics) != 0 || meta.Importance != 0 {
		t.Errorf("metadata of a failed evaluation = %v (importance %v)", meta.Evaluation, meta.Importance)
	}
	full, err := s.Evals.Evaluation(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Archetypes) != 0 || len(full.Failures) != len(cfg.Evaluation.Archetypes) {
		t.Errorf("stored evaluation = %v", full)
	}
	if hasProfile(s, c) {
		t.Error("a failed evaluation has a metric profile")
	}
}

func TestConcurrentEvaluatorsNeverWriteTwice(t *testing.T) {
	cfg := memorytest.Config(t.TempDir())
	s := openEvaluated(t, cfg, nil)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "ella")
	for i := range 20 {
		o.Text(fmt.Sprintf("I felt happy and curious about the new book, chapter %d.", i))
	}
	ev := eumas.NewHeuristic(cfg.Evaluation.Archetypes)
	ctx := context.Background()
	results := make(chan error, 2)
	counts := make(chan int, 2)
	for range 2 {
		go func() {
			total := 0
			for {
				step, err := s.Evals.EvaluatePending(ctx, ev, 3)
				if errors.Is(err, eumas.ErrConflict) {
					continue
				}
				if err != nil || !step.More {
					counts <- total + step.Evaluated
					results <- err
					return
				}
				total += step.Evaluated
			}
		}()
	}
	total := 0
	for range 2 {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
		total += <-counts
	}
	_, n := s.Counts()
	if int64(total) != n {
		t.Errorf("the two evaluators evaluated %d memories together, want each of the %d once", total, n)
	}
}

// A crafted case: by BM25 alone the shorter memory ranks first; the
// metric path (the query asks how something felt) brings up the one that
// says how it felt.
func TestMetricPathChangesRanking(t *testing.T) {
	cfg := memorytest.Config(t.TempDir())
	cfg.Evaluation.ImportanceSeed = 0 // the ranking must move by the metric path alone
	ev := eumas.NewHeuristic(cfg.Evaluation.Archetypes)
	s := openEvaluated(t, cfg, ev)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "ella")
	felt := o.Text("The party was at the lake house, I loved it and felt happy.")
	plain := o.Text("The party was at the lake house.") // later, so also more recent
	d0 := s.Store().CommitStats().Deferred
	if err := s.Evals.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := s.Store().CommitStats().Deferred - d0; d != 0 { // its caller waits for every batch
		t.Fatalf("Settle: %d deferred writes committed, want none", d)
	}
	if err := s.Text.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	// recall returns the two memories by score, best first (recall
	// itself returns them in topological order).
	recallWith := func(metric float64) []*recall.Recalled {
		t.Helper()
		rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "how did the party at the lake house feel", K: 2, Peek: true,
			Paths: &recall.Paths{Weights: config.PathWeights{BM25: 1, Metric: metric}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 2 {
			t.Fatalf("recalled %v", memorytest.Describe(rs))
		}
		if rs[1].Score > rs[0].Score {
			rs[0], rs[1] = rs[1], rs[0]
		}
		return rs
	}
	rs := recallWith(0)
	if rs[0].CID != plain {
		t.Fatalf("without the metric path the best is %s, want the plain memory %s", rs[0].CID, plain)
	}
	if rs[0].Explain.Evidence.MetricRank != 0 || rs[1].Explain.Contrib.Metric != 0 {
		t.Errorf("the metric path ran at weight 0: %+v", rs[1].Explain)
	}
	rs = recallWith(1)
	if rs[0].CID != felt {
		t.Fatalf("with the metric path the best is %s, want the felt memory %s", rs[0].CID, felt)
	}
	if e := rs[0].Explain; e.Evidence.MetricRank != 1 || e.Evidence.Metric <= 0 || e.Contrib.Metric <= 0 {
		t.Errorf("the felt memory's explanation = %+v", e)
	}
}

// TestEmbeddingInTheValueLog: a memory's embedding, written through the
// self's own paths, is in Badger's value log (the store's valueLogSpaces
// name its key space), its evaluation and metadata in the tree.
func TestEmbeddingInTheValueLog(t *testing.T) {
	cfg := memorytest.Config(t.TempDir())
	ev := eumas.NewHeuristic(cfg.Evaluation.Archetypes)
	s := openEvaluated(t, cfg, ev)
	defer s.Close()
	c := memorytest.NewOwner(t, s, "ella").Text("The meeting is at ten.")
	if _, err := s.Evals.EvaluatePending(context.Background(), ev, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Store().DB().View(func(txn *badger.Txn) error {
		for key, inLog := range map[string]bool{
			string(meta.VectorKey(c)): true,
			string(eumas.EvalKey(c)):  false,
			string(meta.Key(c)):       false,
		} {
			item, err := txn.Get([]byte(key))
			if err != nil {
				return fmt.Errorf("%q: %w", key, err)
			}
			if got := store.InValueLog(item); got != inLog {
				t.Errorf("%q in the value log: %v, want %v", key[:2], got, inLog)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
