package actors

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
)

// strategy is one-for-one supervision with a restart budget and an
// exponential backoff, on an injected clock. A child that fails more than
// maxRestarts times within window is stopped; otherwise it is restarted
// after backoff·2^(failures−1), capped at maxBackoff (0 = at once).
type strategy struct {
	maxRestarts int
	window      time.Duration
	backoff     time.Duration
	maxBackoff  time.Duration
	clock       clock.Clock

	mu       sync.Mutex
	failures map[string][]time.Time // by child PID id
}

var _ actor.SupervisorStrategy = (*strategy)(nil)

func newStrategy(maxRestarts int, window, backoff, maxBackoff time.Duration, clock clock.Clock) *strategy {
	return &strategy{
		maxRestarts: maxRestarts, window: window, backoff: backoff, maxBackoff: maxBackoff,
		clock: clock, failures: map[string][]time.Time{},
	}
}

// decide maps a failure to a directive: corruption stops the child (a
// restart would read the same bad data), everything else restarts it.
func decide(reason any) actor.Directive {
	if err, ok := reason.(error); ok && errors.Is(err, base.ErrCorrupt) {
		return actor.StopDirective
	}
	return actor.RestartDirective
}

// HandleFailure implements actor.SupervisorStrategy.
func (s *strategy) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, _ any) {
	directive := decide(reason)
	var delay time.Duration
	if directive == actor.RestartDirective {
		n := s.recordFailure(child.Id)
		if n > s.maxRestarts {
			directive = actor.StopDirective
			s.forget(child.Id)
		} else if s.backoff > 0 {
			delay = min(s.backoff<<(n-1), s.maxBackoff)
		}
	}
	sys.Logger().Warn("actor failed", "child", child.Id, "reason", fmt.Sprint(reason), "directive", directive.String(), "delay", delay)
	switch {
	case directive == actor.StopDirective:
		sup.StopChildren(child)
	case delay > 0:
		s.clock.AfterFunc(delay, func() { sup.RestartChildren(child) })
	default:
		sup.RestartChildren(child)
	}
	// Published once the decision is carried out (a delayed restart is on
	// its clock): a test that sees the event may move the clock past it.
	sys.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: directive})
}

// recordFailure notes a failure now and returns how many fell in the window.
func (s *strategy) recordFailure(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	kept := s.failures[id][:0]
	for _, t := range s.failures[id] {
		if now.Sub(t) < s.window {
			kept = append(kept, t)
		}
	}
	kept = append(kept, now)
	s.failures[id] = kept
	if len(s.failures) > 1024 {
		// Forget children whose failures all left the window (passivated
		// sonas never fail again under the same id).
		for other, times := range s.failures {
			if now.Sub(times[len(times)-1]) >= s.window {
				delete(s.failures, other)
			}
		}
	}
	return len(kept)
}

func (s *strategy) forget(id string) {
	s.mu.Lock()
	delete(s.failures, id)
	s.mu.Unlock()
}
