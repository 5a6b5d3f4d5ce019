package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// drain runs an actor's background work one step at a time, off its
// mailbox: a wake while a step runs makes one more step after it, and
// steps go on while one reports more. The evaluator and the anchors actor
// drain their store-kept queues this way.
type drain struct {
	running bool // a step is under way
	again   bool // woken while it ran
}

// drainStep is what a drain runs.
type drainStep struct {
	timeout time.Duration
	// before, when set, runs in the actor before each step.
	before func()
	// run is the step, off the mailbox; more: work remains.
	run func(context.Context) (more bool, err error)
	// failed hears a step's error in the actor and says whether to step
	// again at once (else at the next wake).
	failed func(error) bool
}

func (d *drain) wake(ctx actor.Context, sys *System, s drainStep) {
	if d.running {
		d.again = true
		return
	}
	if s.before != nil {
		s.before()
	}
	d.running, d.again = true, false
	async(ctx, sys, s.timeout, s.run, func(more bool, err error) {
		d.running = false
		if sys.base.Err() != nil {
			return // stopping
		}
		if err != nil {
			more = s.failed(err)
		}
		if more || d.again {
			d.wake(ctx, sys, s)
		}
	})
}
