package actors_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/eumas"
)

// startEvaluated starts a system whose self has ev as its evaluator (nil:
// evaluation waits).
func startEvaluated(t testing.TB, cfg config.Config, ev eumas.Evaluator, knobs actors.TestingKnobs) *env {
	t.Helper()
	self, err := memory.Open(context.Background(), memory.Options{Config: cfg, Embedder: llm.NewHashedEmbedder(llm.DefaultDims), Evaluator: ev})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := actors.Start(actors.Options{Self: self, LLM: llm.NewOffline(), Config: cfg, Knobs: knobs})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{self: self, sys: sys}
	t.Cleanup(e.close)
	return e
}

func allEvaluated(t *testing.T, e *env, sona string) func() bool {
	return func() bool {
		for _, c := range walkChain(t, e.self, sona) {
			if meta, err := e.self.Memories.Meta(c); err != nil || meta.Evaluation == nil {
				return false
			}
		}
		return true
	}
}

// The evaluator follows the writes, a crash of it loses nothing, and what
// was stored while no evaluator ran is evaluated after a restart.
func TestEvaluatorActorFollowsWritesAcrossCrashAndRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Evaluation.Batch = 2
	ev := eumas.NewHeuristic(cfg.Evaluation.Archetypes)
	var steps atomic.Int64
	e := startEvaluated(t, cfg, ev, actors.TestingKnobs{BeforeEvaluate: func() {
		if steps.Add(1) == 2 {
			panic("evaluator crash (test)")
		}
	}})
	rec, err := e.self.Sonas.Create(context.Background(), "ella")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 9 {
		appendText(t, e, rec.Uuid, fmt.Sprintf("I felt happy about the new plan number %d.", i), "note")
	}
	testutil.Eventually(t, "every memory evaluated", allEvaluated(t, e, rec.Uuid))
	if steps.Load() < 5 {
		t.Errorf("%d evaluator steps for 9 memories in batches of 2", steps.Load())
	}
	e.close()

	// Stored while nothing evaluates…
	e = startEvaluated(t, cfg, nil, actors.TestingKnobs{})
	for i := range 3 {
		appendText(t, e, rec.Uuid, fmt.Sprintf("A curious new idea, %d.", i), "note")
	}
	last := walkChain(t, e.self, rec.Uuid)
	waiting := last[len(last)-1]
	if meta, err := e.self.Memories.Meta(waiting); err != nil || meta.Evaluation != nil {
		t.Fatalf("evaluated with no evaluator: %v %v", meta, err)
	}
	e.close()

	// …is evaluated once one runs again.
	e = startEvaluated(t, cfg, ev, actors.TestingKnobs{})
	testutil.Eventually(t, "the memories stored meanwhile evaluated", allEvaluated(t, e, rec.Uuid))
	full, err := e.self.Evals.Evaluation(waiting)
	if err != nil || full.Evaluator != eumas.HeuristicName {
		t.Fatalf("evaluation of %s: %v %v", waiting, full, err)
	}
}
