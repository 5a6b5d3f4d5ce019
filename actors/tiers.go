package actors

import (
	"context"
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

// tierActor runs one MemoryOS tier of a sona — stm, mtm or lpm (DESIGN.md
// §4.2) — as a child of the sona's actor. It works through the tier's
// durable inbox one step at a time, off its mailbox, and tells its sona
// which tiers a step gave work to and when its inbox is empty. It holds
// nothing but what is running: the tier state and the work between tiers
// are in the store, so after a failed step (the actor panics and its
// supervisor restarts it, with backoff) or a restart of the process it
// resumes from the inbox, and no page is lost. The mtm actor also records
// the visits of retrievals, between its steps, so that both change the
// segments one at a time (visits are statistics: a restart forgets those
// not yet recorded).
type tierActor struct {
	sys     *System
	sona    string
	tier    string
	restart bool                        // started again after a failure
	running bool                        // a step is in flight
	again   bool                        // woken while running: look again
	visits  []*messages.SegmentsVisited // mtm: to record before the next step
}

func newTierActor(sys *System, sona, tier string, restart bool) *tierActor {
	return &tierActor{sys: sys, sona: sona, tier: tier, restart: restart}
}

func (a *tierActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		if !a.restart {
			return // started for the work the sona sends next (startTier)
		}
		// Work may have waited in the inbox since the failure, and the
		// step that failed may have handed work on without waking the
		// tiers after this one.
		for _, t := range tiers.Names[slices.Index(tiers.Names, a.tier)+1:] {
			ctx.Send(ctx.Parent(), &messages.TierWake{Tier: t})
		}
		a.wake(ctx)
	case *messages.TierWake:
		a.wake(ctx)
	case *messages.SegmentsVisited:
		if a.tier == tiers.MTM {
			a.visits = append(a.visits, msg)
			a.wake(ctx)
		}
	}
}

func (a *tierActor) wake(ctx actor.Context) {
	if a.running {
		a.again = true
		return
	}
	a.step(ctx)
}

// step runs one step — the visits waiting to be recorded, then the oldest
// inbox entry — and goes on while there is work.
func (a *tierActor) step(ctx actor.Context) {
	if k := a.sys.knobs.TierStep; k != nil {
		k(a.sona, a.tier, "before")
	}
	a.running, a.again = true, false
	// The visits waiting are recorded at once (RecordVisits), and the
	// step goes on to the inbox: a sona's every advance asks for a visit,
	// and recorded one a step, first, they kept a busy sona's MTM from
	// its pages (issue 15, stop 102).
	var visits []tiers.Visits
	for _, v := range a.visits {
		visits = append(visits, tiers.Visits{IDs: v.Ids, At: v.At})
	}
	self, model, timeout := a.sys.self, a.sys.tierModel, a.sys.tierTimeout()
	async(ctx, a.sys, timeout, func(c context.Context) (tiers.Step, error) {
		var seen tiers.Step
		if len(visits) > 0 {
			var err error
			if seen, err = self.Tiers.RecordVisits(c, a.sona, visits); err != nil {
				return seen, err
			}
		}
		res, err := self.Tiers.Step(c, a.sona, a.tier, model)
		res.Events = append(seen.Events, res.Events...)
		for _, t := range seen.Wake {
			if !slices.Contains(res.Wake, t) {
				res.Wake = append(res.Wake, t)
			}
		}
		return res, err
	}, func(res tiers.Step, err error) {
		a.running = false
		if err != nil {
			a.sys.metrics.TierFailure(a.tier)
			panic(fmt.Errorf("actors: %s tier of sona %s: %w", a.tier, a.sona, err))
		}
		if k := a.sys.knobs.TierStep; k != nil && res.Done {
			k(a.sona, a.tier, "after")
		}
		a.visits = a.visits[len(visits):]
		for _, e := range res.Events {
			a.sys.metrics.TierTransition(e.Kind)
			a.sys.log.Debug("tier transition", "sona", e.Sona, "tier", a.tier, "kind", e.Kind, "segment", e.Segment, "page", e.Page)
		}
		for _, t := range res.Wake {
			ctx.Send(ctx.Parent(), &messages.TierWake{Tier: t})
		}
		if res.More || a.again || len(a.visits) > 0 {
			a.step(ctx)
			return
		}
		ctx.Request(ctx.Parent(), &messages.TierIdle{Tier: a.tier}) // Request: the sona checks the sender
	})
}
