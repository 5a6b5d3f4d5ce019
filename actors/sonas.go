package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/messages"
)

// sonasActor supervises the sona actors and routes messages to them,
// activating a sona on its first message and passivating it when idle. At
// most one actor per sona is alive: while one is stopping, messages for
// its sona wait here and go to its successor.
type sonasActor struct {
	sys      *System
	children map[string]*child // by sona uuid
	byPID    map[string]string // child PID id → sona uuid
}

type child struct {
	pid      *actor.PID
	stopping bool
	waiting  []envelope
}

type envelope struct {
	msg    proto.Message
	sender *actor.PID
}

func newSonasActor(sys *System) *sonasActor {
	return &sonasActor{sys: sys, children: map[string]*child{}, byPID: map[string]string{}}
}

func (a *sonasActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *messages.Advance:
		a.route(ctx, msg.Sona, msg)
	case *messages.AppendMemory:
		a.route(ctx, msg.Sona, msg)
	case *messages.CountActive:
		ctx.Respond(&messages.ActiveCount{Sonas: int64(len(a.children))})
	case *messages.TierWake: // from the heartbeat: to every active sona
		for _, c := range a.children {
			if !c.stopping {
				ctx.Send(c.pid, msg)
			}
		}
	case *messages.Idle:
		c := a.children[msg.Sona]
		if c != nil && !c.stopping && c.pid.Equal(ctx.Sender()) {
			c.stopping = true
			ctx.Send(c.pid, &messages.Passivate{Sona: msg.Sona})
		}
	case *actor.Terminated:
		id, ok := a.byPID[msg.Who.Id]
		if !ok {
			return
		}
		delete(a.byPID, msg.Who.Id)
		c := a.children[id]
		delete(a.children, id)
		for _, e := range c.waiting {
			a.deliver(ctx, id, e)
		}
	}
}

// route forwards msg to the sona's actor, spawning it if needed.
func (a *sonasActor) route(ctx actor.Context, id string, msg proto.Message) {
	a.deliver(ctx, id, envelope{msg: msg, sender: ctx.Sender()})
}

func (a *sonasActor) deliver(ctx actor.Context, id string, e envelope) {
	c := a.children[id]
	if c == nil {
		if _, err := a.sys.self.Sonas.Get(id); err != nil {
			if e.sender != nil {
				ctx.Send(e.sender, failure(err))
			}
			return
		}
		ac := a.sys.cfg.Actors
		props := actor.PropsFromProducer(func() actor.Actor { return newSonaActor(a.sys, id) }, a.sys.mailbox("sona"),
			// for the sona's tier actors: restart with backoff
			actor.WithSupervisor(newStrategy(ac.MaxRestarts, ac.RestartWindow.D(), ac.RestartBackoff.D(), ac.MaxBackoff.D(), a.sys.clock)))
		pid := ctx.SpawnPrefix(props, "sona-"+id+"-")
		ctx.Watch(pid)
		c = &child{pid: pid}
		a.children[id] = c
		a.byPID[pid.Id] = id
	}
	if c.stopping {
		c.waiting = append(c.waiting, e)
		return
	}
	ctx.RequestWithCustomSender(c.pid, e.msg, e.sender)
}
