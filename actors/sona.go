package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/messages"
)

// sonaActor owns one sona's ACT chain. Its state is a cache of the store:
// the head and length it has planned up to (ahead of the store while
// appends are in flight), and the last memory, which a new input links to.
type sonaActor struct {
	sys  *System
	id   string
	name string

	head   *cid.Cid
	length int64
	last   *cid.Cid
	gen    int // bumped on every reload; older append results are stale

	inflight map[cid.Cid]*memory.Pending // appended, not yet durable
	busy     int                         // advances in progress
	idleDue  bool                        // the idle time passed while work was in flight
	stopping bool                        // passivate once idle
}

func newSonaActor(sys *System, id string) *sonaActor {
	return &sonaActor{sys: sys, id: id}
}

func (a *sonaActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.reload(ctx)
		ctx.SetReceiveTimeout(a.sys.cfg.Actors.SonaIdle.D())
	case *messages.AppendMemory:
		a.idleDue = false
		a.appendMemory(ctx, msg)
	case *messages.Advance:
		a.idleDue = false
		a.advance(ctx, msg)
	case *messages.Reload:
		a.reload(ctx)
	case *messages.Passivate:
		a.stopping = true
		a.settle(ctx)
	case *actor.ReceiveTimeout:
		a.idleDue = true
		a.settle(ctx)
	}
}

func (a *sonaActor) idle() bool { return a.busy == 0 && len(a.inflight) == 0 }

// settle runs whenever work finishes: an idle actor that was told to
// passivate stops, and one whose idle time passed (possibly while work
// was still in flight) asks its parent to passivate it.
func (a *sonaActor) settle(ctx actor.Context) {
	switch {
	case !a.idle():
	case a.stopping:
		ctx.Stop(ctx.Self())
	case a.idleDue:
		a.idleDue = false
		ctx.Request(ctx.Parent(), &messages.Idle{Sona: a.id}) // Request: the parent checks the sender
	}
}

// reload waits until every write submitted so far has settled, then reads
// the chain's committed state. It runs at start, after a restart, and after
// a failed append left the planned state ahead of the store.
func (a *sonaActor) reload(ctx actor.Context) {
	c, cancel := context.WithTimeout(context.Background(), a.sys.cfg.Actors.AskTimeout.D())
	defer cancel()
	if err := a.sys.self.Store().Barrier(c); err != nil {
		panic(fmt.Errorf("actors: sona %s cannot settle the store: %w", a.id, err))
	}
	rec, err := a.sys.self.Sona(a.id)
	if err != nil {
		panic(fmt.Errorf("actors: sona %s: %w", a.id, err))
	}
	a.name, a.length, a.head, a.last = rec.Name, rec.Length, nil, nil
	if rec.Head != nil {
		a.head = mustCID(*rec.Head)
	}
	if rec.LastMemory != nil {
		a.last = mustCID(*rec.LastMemory)
	}
	a.inflight = map[cid.Cid]*memory.Pending{}
	a.gen++
}

func mustCID(s string) *cid.Cid {
	c, err := cid.Decode(s)
	if err != nil {
		panic(fmt.Errorf("%w: stored CID %q: %v", memory.ErrCorrupt, s, err))
	}
	return &c
}

// appended is the outcome of one append, once durable (or failed).
type appended struct {
	result *messages.Appended
	err    error
}

// append plans item on the head this actor holds, submits it, and calls
// done in the actor's context once it is durable or failed. A memory
// already in the chain (durably or in flight) is not appended again.
func (a *sonaActor) append(ctx actor.Context, item *memory.Prepared, done func(appended)) {
	if p, ok := a.inflight[item.CID]; ok {
		a.await(ctx, p, func(err error) {
			done(appended{&messages.Appended{Cid: item.CID.String()}, err})
		})
		return
	}
	in, err := a.sys.self.InSona(item.CID, a.id)
	if err != nil || in {
		done(appended{&messages.Appended{Cid: item.CID.String()}, err})
		return
	}
	if err := a.sys.self.CheckLinks(item.Memory, func(c cid.Cid) bool { return a.inflight[c] != nil }); err != nil {
		done(appended{nil, err})
		return
	}
	if k := a.sys.knobs.BeforeAppend; k != nil {
		k(a.id, a.length)
	}
	plan, err := memory.PlanAppend(a.id, a.head, a.length, item, a.sys.clock.Now().Unix())
	if err != nil {
		done(appended{nil, err})
		return
	}
	p := a.sys.self.Store().Submit(a.sys.self.AppendOp(plan))
	a.head, a.length = plan.Next()
	a.last = &item.CID
	a.inflight[item.CID] = p
	gen := a.gen
	a.await(ctx, p, func(err error) {
		if gen == a.gen {
			delete(a.inflight, item.CID)
			if err != nil {
				// The planned head is ahead of the store: resync.
				a.reload(ctx)
			}
		}
		done(appended{&messages.Appended{Cid: item.CID.String(), Seq: proto.Int64(plan.Seq), Act: plan.Act.String()}, err})
	})
}

// tell replies to a requester, if there is one.
func tell(ctx actor.Context, to *actor.PID, msg proto.Message) {
	if to != nil {
		ctx.Send(to, msg)
	}
}

// await calls cont in the actor's context once p settles.
func (a *sonaActor) await(ctx actor.Context, p *memory.Pending, cont func(error)) {
	f := actor.NewFuture(ctx.ActorSystem(), a.sys.cfg.Actors.AskTimeout.D())
	go func() {
		<-p.Done()
		ctx.ActorSystem().Root.Send(f.PID(), &messages.Settled{})
	}()
	ctx.ReenterAfter(f, func(_ any, err error) {
		if err == nil {
			err = p.Err()
		}
		cont(err)
	})
}

// async runs fn off the mailbox and calls cont in the actor's context with
// its result.
func async[T any](ctx actor.Context, timeout time.Duration, fn func() (T, error), cont func(T, error)) {
	f := actor.NewFuture(ctx.ActorSystem(), timeout)
	var (
		res T
		err error
	)
	go func() {
		res, err = fn()
		ctx.ActorSystem().Root.Send(f.PID(), &messages.Settled{})
	}()
	ctx.ReenterAfter(f, func(_ any, ferr error) {
		if ferr != nil {
			var zero T
			cont(zero, ferr)
			return
		}
		cont(res, err)
	})
}

func (a *sonaActor) appendMemory(ctx actor.Context, msg *messages.AppendMemory) {
	sender := ctx.Sender()
	item, err := a.sys.self.PrepareBlock(msg.Block, msg.Embedding, msg.Meta)
	if err != nil {
		ctx.Respond(failure(err))
		return
	}
	a.append(ctx, item, func(r appended) {
		if r.err != nil {
			tell(ctx, sender, failure(r.err))
		} else {
			tell(ctx, sender, r.result)
		}
		a.settle(ctx)
	})
}

// advance runs one step (DESIGN.md §4.1): store the input linked to the
// previous step; recall for it; call the model; store the response with
// edges to the recalled memories weighted by score and to the input; bump
// the importance of what was used. The reply comes once both memories are
// durable. If the model fails, the input stays (it happened) and no
// response is written.
func (a *sonaActor) advance(ctx actor.Context, msg *messages.Advance) {
	sender := ctx.Sender()
	req := msg.GetRequest()
	self := a.sys.self
	a.busy++
	finish := func(reply proto.Message) {
		tell(ctx, sender, reply)
		a.busy--
		a.settle(ctx)
	}
	timeout := a.sys.stepTimeout()
	received := a.sys.clock.Now().Unix()
	meta := &messages.MemoryMeta{AgentId: req.AgentId}

	embed := func(text string) func() ([]float32, error) {
		return func() ([]float32, error) {
			c, cancel := context.WithTimeout(context.Background(), a.sys.cfg.LLM.Timeout.D())
			defer cancel()
			vecs, err := self.Embed(c, text)
			if err != nil {
				return nil, err
			}
			return vecs[0], nil
		}
	}

	// 1. Store the input, linked to the previous step.
	async(ctx, timeout, embed(req.Content), func(vec []float32, err error) {
		if err != nil {
			finish(failure(err))
			return
		}
		var edges []memory.Edge
		if a.last != nil {
			edges = []memory.Edge{{Target: *a.last, Weight: 1}}
		}
		input, err := self.Prepare(memory.TextMemory(req.Content, req.Name, received, edges), vec, meta)
		if err != nil {
			finish(failure(err))
			return
		}
		input.EdgeType = memory.AssocSequential
		a.append(ctx, input, func(r appended) {
			if r.err != nil {
				finish(failure(r.err))
				return
			}
			a.respond(ctx, req, input, finish, embed)
		})
	})
}

// respond is steps 2–4 of advance, once the input is durable.
func (a *sonaActor) respond(ctx actor.Context, req *messages.ChatRequest, input *memory.Prepared,
	finish func(proto.Message), embed func(string) func() ([]float32, error)) {
	self := a.sys.self
	name := a.name
	type thought struct {
		recalled []*memory.Recalled
		resp     llm.Response
		vec      []float32
	}
	async(ctx, a.sys.stepTimeout(), func() (thought, error) {
		c, cancel := context.WithTimeout(context.Background(), a.sys.stepTimeout())
		defer cancel()
		recalled, err := self.Recall(c, memory.Query{
			Sona: a.id, Text: req.Content, Vector: input.Vector, AgentID: req.AgentId,
			K: int(req.K), Budget: int(req.BudgetChars), Exclude: []cid.Cid{input.CID},
		})
		if err != nil {
			return thought{}, err
		}
		resp, err := a.sys.complete(c, name, recalled, req)
		if err != nil {
			return thought{}, err
		}
		vec, err := embed(resp.Content)()
		if err != nil {
			return thought{}, err
		}
		return thought{recalled, resp, vec}, nil
	}, func(t thought, err error) {
		if err != nil {
			finish(failure(err))
			return
		}
		edges := []memory.Edge{{Target: input.CID, Weight: 1}}
		for _, r := range t.recalled {
			edges = append(edges, memory.Edge{Target: r.CID, Weight: r.Score})
		}
		resp := memory.ResponseMemory(name, t.resp, a.sys.clock.Now().Unix(), edges)
		out, err := self.Prepare(resp, t.vec, &messages.MemoryMeta{AgentId: req.AgentId})
		if err != nil {
			finish(failure(err))
			return
		}
		out.EdgeType = memory.AssocCausal
		a.append(ctx, out, func(r appended) {
			if r.err != nil {
				finish(failure(r.err))
				return
			}
			self.Reinforce(t.recalled)
			finish(&messages.ChatResponse{
				Input: &messages.MemoryRef{Cid: input.CID.String()},
				Response: &messages.Reply{
					Cid: out.CID.String(), Content: t.resp.Content,
					Model: t.resp.Model, StopReason: string(t.resp.StopReason),
				},
				Recalled: scoredRefs(t.recalled),
			})
		})
	})
}
