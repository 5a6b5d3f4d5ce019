package actors

import (
	"strings"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/memoria-ai/memoria/internal/metrics"
	"github.com/memoria-ai/memoria/memory/tiers"
)

// Actor metrics: restarts (from the supervisors' events) and mailbox
// depth (from a middleware on every mailbox), by actor kind.

// actorKind names the kind of actor a PID id belongs to: sona, tier, or
// the name of a singleton (root, sonas, heartbeat, consensus, evaluator,
// anchors).
func actorKind(id string) string {
	last := id[strings.LastIndexByte(id, '/')+1:]
	switch {
	case strings.HasPrefix(last, "sona-"):
		return "sona"
	case isTier(last):
		return "tier"
	}
	return last
}

func isTier(name string) bool {
	for _, n := range tiers.Names {
		if n == name {
			return true
		}
	}
	return false
}

// observeRestarts counts the restarts the supervisors decide.
func (s *System) observeRestarts() {
	if s.metrics == nil {
		return
	}
	s.as.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*actor.SupervisorEvent); ok && e.Directive == actor.RestartDirective && e.Child != nil {
			s.metrics.ActorRestart(actorKind(e.Child.Id))
		}
	})
}

// mailbox gives an actor kind's mailboxes a depth gauge, and runs them on
// the system's goroutines.
func (s *System) mailbox(kind string) actor.PropsOption {
	m := s.metrics
	mailbox := actor.WithMailbox(func() actor.Mailbox {
		if m == nil {
			return actor.Unbounded()()
		}
		return actor.Unbounded(&mailboxDepth{kind: kind, m: m})()
	})
	dispatcher := actor.WithDispatcher(s.goroutines)
	return func(p *actor.Props) {
		mailbox(p)
		dispatcher(p)
	}
}

// mailboxDepth mirrors one mailbox's waiting messages into its kind's
// gauge. When the mailbox reports itself empty its count is reset, so a
// message lost to a crash does not stay counted.
type mailboxDepth struct {
	kind string
	m    *metrics.Set
	n    atomic.Int64
}

func (d *mailboxDepth) MailboxStarted() {}

func (d *mailboxDepth) MessagePosted(any) {
	d.n.Add(1)
	d.m.MailboxPosted(d.kind)
}

func (d *mailboxDepth) MessageReceived(any) {
	d.n.Add(-1)
	d.m.MailboxReceived(d.kind)
}

func (d *mailboxDepth) MailboxEmpty() {
	if left := d.n.Swap(0); left != 0 {
		d.m.MailboxDepth.WithLabelValues(d.kind).Sub(float64(left))
	}
}
