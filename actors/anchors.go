package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/memoria-ai/memoria/messages"
)

// anchorsActor hands the anchor list to the configured anchor.Sink
// (XmetaV pins a significant memory to IPFS and anchors its CID on chain;
// such a bridge is a sink). It runs only when a sink is configured. An
// append records its anchor in its own transaction and acknowledges
// without waiting for the sink; the commit wakes this actor, which offers
// the sink every anchor after the durable cursor (anchor.List.Cursor),
// in list order, moving the cursor after each one the sink accepts. The
// sink is called off the mailbox. A failure is logged and the anchor is
// offered again at the next wake (a new anchor or a heartbeat tick):
// delivery is at least once, and the list never loses an entry.
type anchorsActor struct {
	sys   *System
	steps drain
}

// anchorPage bounds one delivery pass.
const anchorPage = 16

func (a *anchorsActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started, *messages.AnchorsAdded:
		a.steps.wake(ctx, a.sys, drainStep{
			timeout: 2 * a.sys.cfg.Actors.AskTimeout.D(),
			run:     a.pass,
			failed: func(err error) bool {
				a.sys.log.Warn("anchor sink failed; the anchor stays listed and is offered again at the next wake", "err", err)
				return false // not before a wake
			},
		})
	}
}

// pass offers the sink the anchors after the cursor, up to a page; more
// reports that others wait.
func (a *anchorsActor) pass(ctx context.Context) (bool, error) {
	self := a.sys.self
	cursor, err := self.Anchors.Cursor()
	if err != nil {
		return false, err
	}
	page, err := self.Anchors.Page(cursor, anchorPage)
	if err != nil {
		return false, err
	}
	for _, an := range page.Items {
		if err := a.sys.anchorSink.Anchor(ctx, an); err != nil {
			return false, fmt.Errorf("anchor %s (%s): %w", an.CID, an.Category, err)
		}
		if err := self.Anchors.SetCursor(ctx, an.Seq); err != nil {
			return false, err
		}
	}
	return page.Next != "", nil
}

// wakeAnchors tells the anchors actor that anchors may wait (without a
// sink, there is none to tell).
func (s *System) wakeAnchors() {
	if s.anchors != nil {
		s.as.Root.Send(s.anchors, &messages.AnchorsAdded{})
	}
}
