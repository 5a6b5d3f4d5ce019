package actors

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/advance"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

// advance runs one step (DESIGN.md §4.1): store the input linked to the
// previous step; recall for it; call the model; store the response with
// edges to the recalled memories weighted by score and to the input; bump
// the importance of what was used. The reply comes once both memories are
// durable. If the model fails, the input stays (it happened) and no
// response is written.
//
// What to do is planned by advance.Machine (pure); the actor carries out
// its effects and feeds their results back, always in its own context.
// Embedding, recall, the tiers' recall and the model call run off the
// mailbox; a run of them shares one step timeout, as one thought.
func (a *sonaActor) advance(ctx actor.Context, msg *messages.Advance) {
	a.busy++
	caller := a.sys.callOf(msg.Call)
	r := &advanceRun{
		a: a, sender: ctx.Sender(), caller: caller, step: startAdvance(caller, a.id),
		m: advance.New(a.id, msg.GetRequest(), a.sys.self.Chains.Prepare),
	}
	r.carry(ctx, r.m.Start(a.state()))
}

// state is what an advance sees of the sona when a result arrives.
func (a *sonaActor) state() advance.State {
	return advance.State{Last: a.last, Name: a.name, Now: a.sys.clock.Now().Unix()}
}

// advanceRun carries out one advance's effects.
type advanceRun struct {
	a      *sonaActor
	m      *advance.Machine
	sender *actor.PID
	caller *call
	step   *advanceSpan

	// thought is the context of the current run of effects off the
	// mailbox; nil between runs.
	thought context.Context
	cancel  context.CancelFunc
	// early is the input's append, submitted but maybe not yet durable
	// (advance.Append's Early): the reply waits for it.
	early        Settling
	earlySettled func(error)

	// gathered are the memories the step's gathered recall returned
	// (noteGathered).
	gathered map[cid.Cid]bool
}

// carry carries out effects in order; only the last one can have a
// result, which is fed back to the machine in the actor's context.
func (r *advanceRun) carry(ctx actor.Context, effects []advance.Effect) {
	a := r.a
	for _, e := range effects {
		switch e := e.(type) {
		case advance.Replay:
			r.endThought()
			res := appended{}
			if err := a.hold(ctx); err != nil {
				res.err = err
			} else {
				res = a.replay(e.ID)
			}
			r.feed(ctx, advance.Replayed{Result: res.result, Err: res.err})
		case advance.Append:
			r.endThought()
			var early func(Settling, func(error))
			if e.Early {
				early = func(p Settling, settled func(error)) { r.early, r.earlySettled = p, settled }
			}
			r.linkGathered(e.Item)
			a.append(ctx, e.Item, r.step, early, func(res appended) {
				r.feed(ctx, advance.Appended{Result: res.result, Err: res.err})
			})
		case advance.Load:
			item, err := a.stored(e.CID)
			r.feed(ctx, advance.Loaded{Item: item, Err: err})
		case advance.Submit:
			e.Trace.Submit(a.sys.self.Store())
		case advance.Embed:
			r.think(ctx, func(c context.Context) advance.Result {
				vec, err := r.embed(c, e.Text)
				return advance.Embedded{Vector: vec, Err: err}
			})
		case advance.Recall:
			r.think(ctx, func(c context.Context) advance.Result {
				start := a.sys.clock.Now()
				recalled, trace, err := a.sys.recall(c, r.caller.context(), e.Query)
				a.sys.metrics.ObserveRecall("chat", a.sys.clock.Since(start))
				return advance.Recalled{Recalled: recalled, Trace: trace, Err: err}
			})
		case advance.RecallTiers:
			r.think(ctx, func(c context.Context) advance.Result {
				tr, err := a.sys.tierRecall(c, a.id, e.Text, e.Vector)
				return advance.TiersRecalled{Tiers: tr, Err: err}
			})
		case advance.Complete:
			r.think(ctx, func(c context.Context) advance.Result {
				lc, onToken, release := r.caller.bind(c)
				defer release()
				resp, err := a.sys.complete(lc, e.Name, e.Recalled, e.Tiers, e.Request, onToken)
				return advance.Completed{Response: resp, Err: err}
			})
		case advance.Reinforce:
			// Off the mailbox: for a long-lived sona the walk to the
			// memories its response reached reads hundreds of records
			// (meta.Store.Reinforce), which the reply need not wait for.
			a.sys.off(func() { a.sys.self.Memories.Reinforce(e.Used) })
		case advance.Wake:
			a.wakeTier(ctx, e.Tier)
		case advance.Visit:
			a.tellTier(ctx, tiers.MTM, &messages.SegmentsVisited{Ids: e.Segments, At: e.At})
		case advance.Reply:
			r.endThought()
			answer := func(input error) {
				if r.earlySettled != nil {
					r.earlySettled(input)
				}
				if input != nil {
					r.reply(ctx, failure(input))
				} else {
					r.reply(ctx, failureOr(e.Answer, e.Err))
				}
			}
			// Not before the early append is durable: a step that failed
			// keeps its input, and one whose input failed did not.
			switch {
			case r.early == nil:
				answer(nil)
			case settledNow(r.early):
				answer(r.early.Err()) // as always once the response is durable
			default:
				a.await(ctx, r.early, answer)
			}
		}
	}
}

// settledNow reports whether p has settled.
func settledNow(p Settling) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// reply ends the step.
func (r *advanceRun) reply(ctx actor.Context, reply proto.Message) {
	r.step.end(reply)
	tell(ctx, r.sender, reply)
	r.a.busy--
	r.a.settle(ctx)
}

func (r *advanceRun) feed(ctx actor.Context, res advance.Result) {
	if rc, ok := res.(advance.Recalled); ok {
		r.noteGathered(rc.Recalled)
	}
	r.carry(ctx, r.m.Next(res, r.a.state()))
}

// think runs fn off the mailbox in the current thought (a new one if
// none) and feeds its result back in the actor's context. A thought that
// timed out fails the step.
func (r *advanceRun) think(ctx actor.Context, fn func(context.Context) advance.Result) {
	sys := r.a.sys
	if r.thought == nil {
		r.thought, r.cancel = context.WithTimeout(sys.base, sys.stepTimeout())
	}
	asyncIn(ctx, sys, r.thought, sys.stepTimeout(), func(c context.Context) (advance.Result, error) {
		return fn(r.step.context(c)), nil
	}, func(res advance.Result, err error) {
		if err != nil {
			r.carry(ctx, r.m.Fail(err))
			return
		}
		r.feed(ctx, res)
	})
}

func (r *advanceRun) endThought() {
	if r.cancel != nil {
		r.cancel()
		r.thought, r.cancel = nil, nil
	}
}

// embed embeds one text within the model timeout.
func (r *advanceRun) embed(c context.Context, text string) ([]float32, error) {
	c, cancel := context.WithTimeout(c, r.a.sys.cfg.LLM.Timeout.D())
	defer cancel()
	vecs, err := r.a.sys.self.Embed(c, text)
	if err != nil {
		return nil, err
	}
	return vecs[0], nil
}

// failureOr is the reply of a step: its answer, or its failure.
func failureOr(answer *messages.ChatResponse, err error) proto.Message {
	if err != nil {
		return failure(err)
	}
	return answer
}
