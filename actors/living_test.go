package actors_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/consensus"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/messages"
)

func startClocked(t *testing.T, cfg config.Config, clock clock.Clock, knobs actors.TestingKnobs) *env {
	t.Helper()
	self, err := memory.Open(context.Background(), memory.Options{Config: cfg, Embedder: llm.NewHashedEmbedder(llm.DefaultDims), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := actors.Start(actors.Options{Self: self, LLM: llm.NewOffline(), Config: cfg, Clock: clock, Knobs: knobs})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{self: self, sys: sys}
	t.Cleanup(e.close)
	return e
}

func appendText(t *testing.T, e *env, sona, text, kind string) {
	t.Helper()
	ctx := context.Background()
	vecs, err := e.self.Embed(ctx, text)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.self.Chains.Prepare(&model.Memory{Data: model.Data{Text: &model.TextData{Content: text}}}, vecs[0], &messages.MemoryMeta{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sys.Append(ctx, sona, p); err != nil {
		t.Fatal(err)
	}
}

func TestDreamAfterTheIdleWindowAndNotBefore(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := clock.NewFake(t0)
	cfg := testConfig(t.TempDir())
	cfg.Heartbeat.Interval = config.Duration(365 * 24 * time.Hour) // ticks only when asked
	e := startClocked(t, cfg, clock, actors.TestingKnobs{})
	ctx := context.Background()
	rec, err := e.self.Sonas.Create(ctx, "ops")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"The deploy failed on gas.", "Retry the deploy with more gas.", "The deploy succeeded."} {
		appendText(t, e, rec.Uuid, s, "outcome")
	}

	clock.Set(t0.Add(6*time.Hour - time.Second))
	rep, err := e.sys.Heartbeat(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Dreamed || len(rep.Insights) != 0 {
		t.Fatalf("dreamed before the idle window: %+v", rep)
	}
	clock.Set(t0.Add(6 * time.Hour))
	if rep, err = e.sys.Heartbeat(ctx, false); err != nil {
		t.Fatal(err)
	}
	if !rep.Dreamed || len(rep.Insights) == 0 {
		t.Fatalf("no dream after the idle window: %+v", rep)
	}
	stored, err := e.self.Living.Insights(100)
	if err != nil || len(stored) != len(rep.Insights) {
		t.Fatalf("insights stored %d, reported %d (%v)", len(stored), len(rep.Insights), err)
	}
	for _, in := range stored {
		if in.Sona != rec.Uuid || len(in.Sources) == 0 || in.Category == "" {
			t.Fatalf("insight %+v", in)
		}
	}
	// The insights are the heartbeat's own writes, not activity; and the
	// sona has not grown since: the next dream has nothing to add.
	clock.Set(t0.Add(12*time.Hour + time.Second))
	if rep, err = e.sys.Heartbeat(ctx, false); err != nil || !rep.Dreamed || len(rep.Insights) != 0 {
		t.Fatalf("second dream: %+v %v", rep, err)
	}
}

func TestHeartbeatAndConsensusRestartKeepingState(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Actors.AskTimeout = config.Duration(time.Second)
	var ticks, contributions atomic.Int32
	clock := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := startClocked(t, cfg, clock, actors.TestingKnobs{
		BeforeTick: func() {
			if ticks.Add(1) == 3 {
				panic("heartbeat crash (test)")
			}
		},
		BeforeConsensus: func() {
			if contributions.Add(1) == 2 {
				panic("consensus crash (test)")
			}
		},
	})
	ctx := context.Background()
	// The heartbeat ticks on its interval and restarts after its crash on
	// the supervisor's backoff, both on the clock this test moves.
	testutil.Eventually(t, "heartbeat ticks after its crash", func() bool {
		clock.Advance(cfg.Heartbeat.Interval.D())
		return ticks.Load() >= 6
	})
	st, err := e.self.Living.HeartbeatState()
	if err != nil || st.Passes < 4 {
		t.Fatalf("passes %d after 6 ticks with one crash (%v)", st.GetPasses(), err)
	}

	contribute := func(agent string) (*messages.ContributeResult, error) {
		return e.sys.Contribute(ctx, &messages.Contribute{AgentId: agent, ConceptKey: "k", Content: "Ship it on Friday."})
	}
	if r, err := contribute("a"); err != nil || r.Status != consensus.StatusPending {
		t.Fatalf("first contribution: %+v %v", r, err)
	}
	var restarts atomic.Int32
	e.sys.ActorSystem().EventStream.Subscribe(func(evt any) {
		if ev, ok := evt.(*actor.SupervisorEvent); ok && strings.Contains(ev.Child.Id, "consensus") {
			restarts.Add(1)
		}
	})
	if _, err := contribute("x"); !errors.Is(err, actors.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) && err == nil {
		t.Fatalf("crashed contribution answered: %v", err)
	}
	testutil.Eventually(t, "the consensus actor's restart to be scheduled", func() bool { return restarts.Load() > 0 })
	clock.Advance(time.Minute) // past its backoff
	r, err := contribute("b")
	if err != nil || r.Status != consensus.StatusCommitted {
		t.Fatalf("after the crash: %+v %v (the pending version of a was lost?)", r, err)
	}
}

func TestBackboneSonaIsWrittenOnlyByConsensus(t *testing.T) {
	e := start(t, testConfig(t.TempDir()), nil, actors.TestingKnobs{})
	ctx := context.Background()
	w, err := e.sys.WriteBackbone(ctx, &messages.WriteBackbone{AgentId: "a", Content: "The user is Demos."})
	if err != nil || w.Existed {
		t.Fatalf("write: %+v %v", w, err)
	}
	if again, err := e.sys.WriteBackbone(ctx, &messages.WriteBackbone{AgentId: "a", Content: "The user is Demos."}); err != nil || !again.Existed || again.Cid != w.Cid {
		t.Fatalf("rewrite: %+v %v", again, err)
	}
	id := e.self.Backbone.Sona()
	_, err = e.sys.Advance(ctx, id, &messages.ChatRequest{Content: "hi"})
	if !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("chat on the backbone sona: %v", err)
	}
	if _, err := e.sys.WriteBackbone(ctx, &messages.WriteBackbone{AgentId: "a", Content: "  "}); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("empty content: %v", err)
	}
}
