package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/messages"
)

// evaluatorActor runs EUMAS evaluation behind the writes: woken after
// each acknowledged append, by every heartbeat tick and when it starts, it
// evaluates the insertion log behind its watermark one batch at a time,
// off its mailbox, until it has caught up. Its state is the watermark in
// the store, so a restart loses nothing; a failed step panics, and the
// root restarts it with backoff. Acknowledgements never wait for it.
type evaluatorActor struct {
	sys   *System
	steps drain
}

func (a *evaluatorActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started, *messages.EvaluatorWake:
		sys := a.sys
		ev := sys.self.Evals.Evaluator()
		if ev == nil {
			return
		}
		a.steps.wake(ctx, sys, drainStep{
			timeout: sys.evalTimeout(),
			before:  sys.knobs.BeforeEvaluate,
			run: func(c context.Context) (bool, error) {
				res, err := sys.self.Evals.EvaluatePending(c, ev, sys.cfg.Evaluation.Batch)
				if err == nil {
					sys.metrics.Evaluated(res.Evaluated, res.Failed)
				}
				return res.More, err
			},
			failed: func(err error) bool {
				if errors.Is(err, eumas.ErrConflict) {
					return true // a step of the instance before a restart committed first
				}
				panic(fmt.Errorf("actors: evaluator: %w", err))
			},
		})
	}
}

// evalTimeout bounds one evaluator step: per memory of the batch and
// archetype, two model calls; then a durable write.
func (s *System) evalTimeout() time.Duration {
	ec := s.cfg.Evaluation
	calls := time.Duration(2 * ec.Batch * max(1, len(ec.Archetypes)))
	return calls*s.cfg.LLM.Timeout.D() + s.cfg.Actors.AskTimeout.D()
}

// wakeEvaluator tells the evaluator that memories await evaluation.
func (s *System) wakeEvaluator() {
	if s.ready.Load() {
		s.as.Root.Send(s.evaluator, &messages.EvaluatorWake{})
	}
}
