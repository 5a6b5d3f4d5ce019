package actors

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/trace"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/tiers"
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

	inflight map[cid.Cid]Settling // appended, not yet durable
	requests map[string]Settling  // the in-flight appends that carry a request id, by id
	busy     int                  // advances in progress
	idleDue  bool                 // the idle time passed while work was in flight
	traffic  time.Time            // last append or advance
	idleTick clock.Timer          // sends IdleCheck
	stopping bool                 // passivate once idle
	down     bool                 // stopping now

	tiers [3]tierChild // the stm, mtm and lpm children, as tiers.Names
}

func init() {
	if len(sonaActor{}.tiers) != len(tiers.Names) {
		panic("actors: a sona holds a child for each of tiers.Names")
	}
}

// tierChild is the actor of one of a sona's tiers, as the sona sees it.
type tierChild struct {
	pid  *actor.PID // nil: not started, or stopped
	busy bool       // given work it has not reported done
	down bool       // stopped after repeated failures, until the next activation
}

func newSonaActor(sys *System, id string) *sonaActor {
	return &sonaActor{sys: sys, id: id}
}

func (a *sonaActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.reload(ctx)
		a.wakePendingTiers(ctx)
		a.traffic = a.sys.clock.Now()
		a.checkIdleIn(ctx, a.sys.cfg.Actors.SonaIdle.D())
	case *actor.Stopping, *actor.Restarting:
		a.down = true // the tier children stop with it (a restart respawns them)
		if a.idleTick != nil {
			a.idleTick.Stop()
		}
		if _, stopping := msg.(*actor.Stopping); stopping {
			a.sys.chains.Release(a.id)
		}
	case *messages.AppendMemory:
		a.traffic, a.idleDue = a.sys.clock.Now(), false
		a.appendMemory(ctx, msg)
	case *messages.Advance:
		a.traffic, a.idleDue = a.sys.clock.Now(), false
		a.advance(ctx, msg)
	case *messages.Reload:
		a.reload(ctx)
	case *messages.Passivate:
		a.stopping = true
		a.settle(ctx)
	case *messages.IdleCheck:
		idle := a.sys.cfg.Actors.SonaIdle.D()
		if quiet := a.sys.clock.Since(a.traffic); quiet < idle {
			a.checkIdleIn(ctx, idle-quiet)
			return
		}
		a.idleDue = true
		a.checkIdleIn(ctx, idle) // until the parent passivates it
		a.settle(ctx)
	case *messages.TierWake:
		a.wakeTier(ctx, msg.Tier)
	case *messages.TierIdle:
		if c := a.tierChild(msg.Tier); c != nil && c.pid != nil && c.pid.Equal(ctx.Sender()) {
			c.busy = false
			a.settle(ctx)
		}
	case *actor.Terminated:
		// A tier actor that failed more often than its restart budget
		// allows stays down until the sona is activated again; its work
		// waits in its inbox.
		for i := range a.tiers {
			if c := &a.tiers[i]; c.pid != nil && c.pid.Equal(msg.Who) && !a.down {
				a.sys.log.Error("tier actor stopped after repeated failures", "sona", a.id, "tier", tiers.Names[i])
				*c = tierChild{down: true}
			}
		}
		a.settle(ctx)
	}
}

// checkIdleIn sends the actor an IdleCheck after d.
func (a *sonaActor) checkIdleIn(ctx actor.Context, d time.Duration) {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	a.idleTick = a.sys.clock.AfterFunc(d, func() { root.Send(self, &messages.IdleCheck{}) })
}

func (a *sonaActor) idle() bool {
	if a.busy > 0 || len(a.inflight) > 0 {
		return false
	}
	for _, c := range a.tiers {
		if c.busy {
			return false
		}
	}
	return true
}

// wakePendingTiers wakes the tiers whose inboxes hold work (one read for
// the three): work may have waited there since before the sona was
// passivated or the process restarted.
func (a *sonaActor) wakePendingTiers(ctx actor.Context) {
	pending, err := a.sys.self.Tiers.Pending(a.id)
	if err != nil {
		a.sys.log.Error("tier inboxes unreadable: each tier reads its own", "sona", a.id, "err", err)
		pending = tiers.Names
	}
	for _, name := range pending {
		a.wakeTier(ctx, name)
	}
}

// wakeTier tells a tier that its inbox has work.
func (a *sonaActor) wakeTier(ctx actor.Context, name string) {
	a.tellTier(ctx, name, &messages.TierWake{Tier: name})
}

// tellTier sends a tier work (it counts as busy until it reports idle).
func (a *sonaActor) tellTier(ctx actor.Context, name string, msg proto.Message) {
	if c := a.startTier(ctx, name); c != nil {
		c.busy = true
		ctx.Send(c.pid, msg)
	}
}

// tierChild is the tier named name (nil for a name that is none).
func (a *sonaActor) tierChild(name string) *tierChild {
	if i := slices.Index(tiers.Names, name); i >= 0 {
		return &a.tiers[i]
	}
	return nil
}

// startTier is the tier named name with its actor started, which it is
// with the tier's first work: most sonas of a store are young, and their
// mtm and lpm have nothing to do (the three tier actors of every
// activated sona were a quarter of the live objects of an advance run's
// heap). nil while the sona goes down, and for a tier stopped after
// repeated failures: it stays down until the sona is activated again,
// and its work waits in its inbox. A tier started again after a failure
// looks at its inbox itself.
func (a *sonaActor) startTier(ctx actor.Context, name string) *tierChild {
	c := a.tierChild(name)
	switch {
	case c == nil || c.down:
		return nil
	case c.pid != nil:
		return c
	case a.down:
		return nil
	}
	restart := false // the producer makes the actor again on each restart
	props := actor.PropsFromProducer(func() actor.Actor {
		t := newTierActor(a.sys, a.id, name, restart)
		restart = true
		return t
	}, a.sys.mailbox("tier"))
	pid, err := ctx.SpawnNamed(props, name)
	if err != nil {
		panic(fmt.Errorf("actors: sona %s: spawn %s: %w", a.id, name, err))
	}
	c.pid = pid
	if k := a.sys.knobs.TierSpawned; k != nil {
		k(a.id, name)
	}
	return c
}

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

// reload waits until every write of the sona's chain in flight has
// settled (see flights), then reads the chain's committed state. It runs
// at start, after a restart, and after a failed append left the planned
// state ahead of the store.
func (a *sonaActor) reload(ctx actor.Context) {
	c, cancel := context.WithTimeout(context.Background(), a.sys.cfg.Actors.AskTimeout.D())
	defer cancel()
	if err := a.sys.flights.wait(c, a.id); err != nil {
		panic(fmt.Errorf("actors: sona %s cannot settle its writes: %w", a.id, err))
	}
	rec, err := a.sys.self.Sonas.State(a.id)
	if err != nil {
		panic(fmt.Errorf("actors: sona %s: %w", a.id, err))
	}
	a.name, a.length, a.head, a.last = rec.Name, rec.Length, rec.Head, rec.LastMemory
	a.inflight, a.requests = map[cid.Cid]Settling{}, map[string]Settling{}
	a.gen++
}

// hold makes this process the writer of the chain (see ChainWriter),
// reading the chain again when it was caught up.
func (a *sonaActor) hold(ctx actor.Context) error {
	c, cancel := context.WithTimeout(context.Background(), a.sys.cfg.Actors.AskTimeout.D())
	fresh, err := a.sys.chains.Acquire(c, a.id)
	cancel()
	if err == nil && fresh {
		a.reload(ctx) // caught up: the chain moved underneath
	}
	return err
}

// replay is the answer to request id when an append of this sona
// recorded it (an earlier attempt of the request): its memory, seq and
// ACT, and the answer it recorded. No result and no error: none did.
func (a *sonaActor) replay(id string) appended {
	seq, result, ok, err := a.sys.self.Chains.Request(a.id, id)
	if err != nil || !ok {
		return appended{nil, err}
	}
	page, err := a.sys.self.Sonas.Chain(a.id, seq, 1)
	if err != nil {
		return appended{nil, err}
	}
	if len(page.Items) == 0 || page.Items[0].Seq != seq {
		return appended{nil, fmt.Errorf("%w: request %q of sona %s names seq %d, which the chain lacks", base.ErrCorrupt, id, a.id, seq)}
	}
	e := page.Items[0]
	return appended{&messages.Appended{Cid: e.Memory.String(), Seq: proto.Int64(seq), Act: e.Act.String(), Replayed: true, Result: result}, nil}
}

// appended is the outcome of one append, once durable (or failed).
type appended struct {
	result *messages.Appended
	err    error
}

// append plans item on the head this actor holds, submits it, and calls
// done in the actor's context once it is durable or failed. A memory
// already in the chain (durably or in flight) is not appended again.
// step, when set, is the advance's span: the append is a child of it,
// linked from the group commit that writes it, and ends when the write
// settles. With early set (see advance.Append), done comes as soon as the
// write is submitted, after early is told the write and a func to call
// once it settled (which ends the span; the actor calls it too, whichever
// comes first).
func (a *sonaActor) append(ctx actor.Context, item *model.Prepared, step *advanceSpan, early func(Settling, func(error)), done func(appended)) {
	settled, submitted := func(error) {}, false
	if step != nil {
		span := step.child(context.Background(), "append")
		var once sync.Once
		settled = func(err error) {
			once.Do(func() {
				trace.Fail(span, err)
				span.End()
			})
		}
		next := done
		done = func(r appended) {
			if !submitted || early == nil {
				settled(r.err)
			}
			next(r)
		}
		step = &advanceSpan{span}
	}
	if err := a.hold(ctx); err != nil {
		done(appended{nil, err})
		return
	}
	if r := item.Request; r != nil {
		if p, ok := a.requests[r.ID]; ok {
			// The same request is in flight: its answer is this one's.
			a.await(ctx, p, func(err error) {
				if err != nil {
					done(appended{nil, err})
					return
				}
				done(a.replay(r.ID))
			})
			return
		}
		if res := a.replay(r.ID); res.err != nil || res.result != nil {
			done(res)
			return
		}
	}
	if item.ExpectSeq != nil && *item.ExpectSeq != a.length {
		done(appended{nil, fmt.Errorf("%w: sona %s is at seq %d, the append expected %d", base.ErrChainConflict, a.id, a.length, *item.ExpectSeq)})
		return
	}
	if p, ok := a.inflight[item.CID]; ok {
		a.await(ctx, p, func(err error) {
			done(appended{&messages.Appended{Cid: item.CID.String()}, err})
		})
		return
	}
	in, err := a.sys.self.Memories.InSona(item.CID, a.id)
	if err != nil || in {
		done(appended{&messages.Appended{Cid: item.CID.String()}, err})
		return
	}
	inline := func(c cid.Cid) bool {
		f := item.Memory.Data.File
		return item.File != nil && f != nil && f.Content == c
	}
	// A forgotten memory links to nothing: it has no content. A
	// replicated one's links were checked where they were made.
	if item.Forgotten == nil && !item.Replicated {
		linked := func(c cid.Cid) bool {
			// An import keeps the edges to its forgotten memories.
			return a.inflight[c] != nil || inline(c) || item.Imported && a.sys.self.Chains.Forgotten(c)
		}
		if err := a.sys.self.Chains.CheckLinks(item.Memory, linked); err != nil {
			done(appended{nil, err})
			return
		}
	}
	if k := a.sys.knobs.BeforeAppend; k != nil {
		k(a.id, a.length)
	}
	plan, err := model.PlanAppend(a.id, a.head, a.length, item, a.sys.clock.Now().Unix())
	if err != nil {
		done(appended{nil, err})
		return
	}
	p := a.sys.chains.Write(step.context(context.Background()), plan)
	flight := a.sys.flights.add(a.id, p)
	submitted = true
	a.head, a.length = plan.Next()
	// A copy: a pointer into item would keep the whole prepared memory
	// (its block, its vector) alive until the sona's next append.
	last := item.CID
	a.last = &last
	a.inflight[item.CID] = p
	if item.Request != nil {
		a.requests[item.Request.ID] = p
	}
	gen := a.gen
	res := &messages.Appended{Cid: item.CID.String(), Seq: proto.Int64(plan.Seq), Act: plan.Act.String()}
	if early != nil {
		early(p, settled)
		done(appended{res, nil})
	}
	a.await(ctx, p, func(err error) {
		a.sys.flights.done(a.id, flight)
		if gen == a.gen {
			delete(a.inflight, item.CID)
			if item.Request != nil {
				delete(a.requests, item.Request.ID)
			}
			if err != nil {
				// The planned head is ahead of the store: resync.
				a.reload(ctx)
			}
		}
		if err == nil {
			a.sys.wakeEvaluator()
		}
		settled(err)
		if early == nil {
			done(appended{res, err})
		}
	})
}

// tell replies to a requester, if there is one.
func tell(ctx actor.Context, to *actor.PID, msg proto.Message) {
	if to != nil {
		ctx.Send(to, msg)
	}
}

// await calls cont in the actor's context once p settles. The wait is
// bounded by a step's timeout, not an ask's: a write that takes longer to
// become durable than an ask may wait (a busy disk) still settles, and
// giving up on it early would report as failed a write that then lands.
func (a *sonaActor) await(ctx actor.Context, p Settling, cont func(error)) {
	f := actor.NewFuture(ctx.ActorSystem(), a.sys.stepTimeout())
	settled := func() { ctx.ActorSystem().Root.Send(f.PID(), &messages.Settled{}) }
	if t, ok := p.(interface{ Then(func()) }); ok {
		t.Then(settled) // the store's acknowledger tells the future itself
	} else {
		go func() {
			<-p.Done()
			settled()
		}()
	}
	ctx.ReenterAfter(f, func(_ any, err error) {
		if err == nil {
			err = p.Err()
		}
		cont(err)
	})
}

// async runs fn off the mailbox, with a context that ends after timeout
// or when the system stops, and calls cont in the actor's context with
// its result.
func async[T any](ctx actor.Context, sys *System, timeout time.Duration, fn func(context.Context) (T, error), cont func(T, error)) {
	c, cancel := context.WithTimeout(sys.base, timeout)
	asyncIn(ctx, sys, c, timeout, func(c context.Context) (T, error) {
		defer cancel()
		return fn(c)
	}, cont)
}

// asyncIn runs fn off the mailbox with context c and calls cont in the
// actor's context with its result, or with an error when it has not
// returned after timeout.
func asyncIn[T any](ctx actor.Context, sys *System, c context.Context, timeout time.Duration, fn func(context.Context) (T, error), cont func(T, error)) {
	f := actor.NewFuture(ctx.ActorSystem(), timeout)
	var (
		res T
		err error
	)
	if !sys.off(func() {
		res, err = fn(c)
		ctx.ActorSystem().Root.Send(f.PID(), &messages.Settled{})
	}) { // stopping: fn is not run, and cont hears why
		err = sys.base.Err()
		ctx.ActorSystem().Root.Send(f.PID(), &messages.Settled{})
	}
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
	var item *model.Prepared
	var err error
	if p, ok := a.sys.prepared.LoadAndDelete(msg); ok {
		item = p.(*model.Prepared) // System.Append's, prepared in this process
	} else if item, err = prepareAppend(a.sys.self, msg); err != nil {
		ctx.Respond(failure(err))
		return
	}
	a.append(ctx, item, nil, nil, func(r appended) {
		if r.err != nil {
			tell(ctx, sender, failure(r.err))
		} else {
			tell(ctx, sender, r.result)
		}
		a.settle(ctx)
	})
}

// stored is a memory this store holds, ready to be an advance's input.
func (a *sonaActor) stored(ref string) (*model.Prepared, error) {
	c, err := cid.Decode(ref)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", base.ErrCorrupt, err)
	}
	self := a.sys.self
	block, err := self.Block(c)
	if err != nil {
		return nil, err
	}
	vec, err := self.Memories.Vector(c)
	if err != nil {
		return nil, err
	}
	meta, err := self.Memories.Meta(c)
	if err != nil {
		return nil, err
	}
	return self.Chains.PrepareBlock(block, vec, meta)
}

// prepareAppend reads an AppendMemory into the memory to append.
func prepareAppend(self *memory.Self, msg *messages.AppendMemory) (*model.Prepared, error) {
	if t := msg.Forgotten; t != nil {
		c, err := cid.Decode(t.Cid)
		if err != nil {
			return nil, fmt.Errorf("%w: forgotten memory %q: %v", base.ErrInvalid, t.Cid, err)
		}
		return &model.Prepared{CID: c, Forgotten: t, ExpectSeq: msg.ExpectSeq, Imported: msg.Imported}, nil
	}
	item, err := self.Chains.PrepareBlock(msg.Block, msg.Embedding, msg.Meta)
	if err != nil {
		return nil, err
	}
	item.ExpectSeq, item.Imported, item.File = msg.ExpectSeq, msg.Imported, msg.File
	if msg.RequestId != "" {
		item.Request = &model.Request{ID: msg.RequestId, Result: msg.RequestResult}
	}
	for _, n := range msg.Neighbors {
		c, err := cid.Cast(n.Cid)
		if err != nil {
			return nil, fmt.Errorf("%w: neighbour cid: %v", base.ErrInvalid, err)
		}
		item.Neighbors = append(item.Neighbors, model.Neighbor{CID: c, Sim: n.Sim})
	}
	item.Archive, err = castCIDs(msg.Archive)
	return item, err
}

// appendMessage is the AppendMemory that carries p to sona's writer.
func appendMessage(sona string, p *model.Prepared) *messages.AppendMemory {
	msg := &messages.AppendMemory{Sona: sona, Block: p.Block, Embedding: p.Vector, Meta: p.Meta,
		ExpectSeq: p.ExpectSeq, Imported: p.Imported, File: p.File, Forgotten: p.Forgotten}
	if p.Request != nil {
		msg.RequestId, msg.RequestResult = p.Request.ID, p.Request.Result
	}
	for _, c := range p.Archive {
		msg.Archive = append(msg.Archive, c.Bytes())
	}
	for _, n := range p.Neighbors {
		msg.Neighbors = append(msg.Neighbors, &messages.Neighbor{Cid: n.CID.Bytes(), Sim: n.Sim})
	}
	return msg
}

// castCIDs reads CIDs carried as bytes.
func castCIDs(raw [][]byte) ([]cid.Cid, error) {
	if len(raw) == 0 {
		return nil, nil // no archive: not a merge
	}
	out := make([]cid.Cid, len(raw))
	for i, b := range raw {
		c, err := cid.Cast(b)
		if err != nil {
			return nil, fmt.Errorf("%w: cid: %v", base.ErrInvalid, err)
		}
		out[i] = c
	}
	return out, nil
}
