package actors

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/consensus"
	"github.com/memoria-ai/memoria/memory/living"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/messages"
)

// heartbeatActor ticks every heartbeat.interval (XmetaV): a bounded sweep
// (TTL, pruning, branch statistics), a wake of the active sonas' mid-term
// tiers, Living Memory compression of oversized branches and, after
// heartbeat.dream_idle without activity, dream mode. Its state is in the
// store (memory/living's HeartbeatState), so a restart loses nothing. The merges
// and insights it makes are appended through the sonas' own actors, so a
// tick never writes to a chain behind its owner's back, and sona traffic
// never waits for a tick.
type heartbeatActor struct {
	sys   *System
	timer clock.Timer
}

// tick is the heartbeat's own timer message (never sent from outside).
type tick struct{}

func (a *heartbeatActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.schedule(ctx)
	case *actor.Stopping, *actor.Restarting:
		if a.timer != nil {
			a.timer.Stop()
		}
	case tick:
		if a.sys.ready.Load() { // Start has wired the tree
			if _, err := a.tick(false, false); errors.Is(err, errImportRunning) {
				a.sys.log.Debug("heartbeat tick skipped: an import is running")
			} else if err != nil {
				a.sys.log.Warn("heartbeat tick failed", "err", err)
			}
		}
		a.schedule(ctx)
	case *messages.Heartbeat:
		r, err := a.tick(msg.Dream, false)
		respondTo(ctx, r, err)
	case *messages.Compact:
		r, err := a.tick(false, true)
		respondTo(ctx, r, err)
	}
}

func (a *heartbeatActor) schedule(ctx actor.Context) {
	self, as := ctx.Self(), ctx.ActorSystem()
	a.timer = a.sys.clock.AfterFunc(a.sys.cfg.Heartbeat.Interval.D(), func() { as.Root.Send(self, tick{}) })
}

// tick runs one heartbeat. dream forces dream mode; compact sweeps a whole
// pass first and folds cold branches.
func (a *heartbeatActor) tick(dream, compact bool) (*messages.TickReport, error) {
	sys, self, hb := a.sys, a.sys.self, a.sys.cfg.Heartbeat
	// An import replays chains with exact seqs: a merge or an insight
	// appended meanwhile would make it fail. Ticks wait for it to end.
	if !sys.upkeep.TryLock() {
		return nil, errImportRunning
	}
	defer sys.upkeep.Unlock()
	if sys.knobs.BeforeTick != nil {
		sys.knobs.BeforeTick()
	}
	sys.wakeAnchors() // anchors a failing sink left behind are offered again
	ctx, cancel := context.WithTimeout(sys.base, sys.tickTimeout())
	defer cancel()
	now := sys.clock.Now()
	rep := &messages.TickReport{At: now.Unix()}
	for {
		sw, err := self.Living.Sweep(ctx, hb.SweepBatch)
		if err != nil {
			return nil, err
		}
		rep.Swept += sw.Swept
		rep.Expired += sw.Expired
		rep.Pruned += sw.Pruned
		rep.PruneThreshold = sw.Threshold.Value
		rep.PassComplete = rep.PassComplete || sw.PassComplete
		if !compact || sw.PassComplete {
			break
		}
	}
	sys.wakeEvaluator()
	if n, err := sys.ActiveSonas(); err == nil && n > 0 {
		sys.as.Root.Send(sys.sonas, &messages.TierWake{Tier: "mtm"})
		rep.TierWakes = int64(n)
	}
	merges, err := self.Living.PlanCompressions(ctx, hb.MaxCompressions)
	if err != nil {
		return nil, err
	}
	if rep.Compressions, err = a.apply(ctx, merges); err != nil {
		return rep, err
	}

	st, err := self.Living.HeartbeatState()
	if err != nil {
		return nil, err
	}
	idleSince := self.LastActivity()
	if last := time.Unix(st.LastDream, 0); last.After(idleSince) {
		idleSince = last
	}
	if dream || now.Sub(idleSince) >= hb.DreamIdle.D() {
		if err := a.dream(ctx, rep); err != nil {
			return rep, err
		}
		compact = true // a dream is a session boundary
	}
	if compact {
		folds, err := self.Living.PlanFolds(ctx, hb.MaxCompressions)
		if err != nil {
			return nil, err
		}
		if rep.Folds, err = a.apply(ctx, folds); err != nil {
			return rep, err
		}
	}
	sys.log.Debug("heartbeat", "swept", rep.Swept, "expired", rep.Expired, "pruned", rep.Pruned,
		"compressions", len(rep.Compressions), "dreamed", rep.Dreamed, "insights", len(rep.Insights), "folds", len(rep.Folds))
	return rep, nil
}

// apply appends each merge through its sona's actor.
func (a *heartbeatActor) apply(ctx context.Context, merges []*living.Merge) ([]*messages.Compression, error) {
	var out []*messages.Compression
	for _, m := range merges {
		if !a.sys.tending(ctx, m.Sona) {
			continue
		}
		r, err := a.sys.Append(ctx, m.Sona, m.Prepared)
		if errors.Is(err, ErrUnavailable) {
			// A cluster member that does not own the sona (another does):
			// the owner merges it, and the merge reaches this copy.
			a.sys.log.Debug("merge skipped", "sona", m.Sona, "err", err)
			continue
		}
		if err != nil {
			return out, err
		}
		c := &messages.Compression{Sona: m.Sona, Cid: r.Cid}
		for _, s := range m.Sources {
			c.Sources = append(c.Sources, s.String())
		}
		out = append(out, c)
	}
	return out, nil
}

// tending reports whether this process does sona's upkeep writes
// (Options.Tends).
func (s *System) tending(ctx context.Context, sona string) bool {
	return s.tends == nil || s.tends(ctx, sona)
}

// dream stores each sona's insights and records that it dreamed.
func (a *heartbeatActor) dream(ctx context.Context, rep *messages.TickReport) error {
	self := a.sys.self
	plans, err := self.Living.PlanDream(ctx)
	if err != nil {
		return err
	}
	for _, p := range plans {
		if len(p.Insights) > 0 && !a.sys.tending(ctx, p.Sona) {
			continue // the member that tends it dreams it; its insights reach this copy
		}
		for _, in := range p.Insights {
			_, err := a.sys.Append(ctx, p.Sona, in)
			if errors.Is(err, ErrUnavailable) {
				a.sys.log.Debug("insight skipped", "sona", p.Sona, "err", err) // another member owns the sona
				continue
			}
			if err != nil {
				return err
			}
			rep.Insights = append(rep.Insights, living.InsightOf(in.CID, in.Memory, in.Meta.Insight, p.Sona, rep.At).View())
		}
	}
	rep.Dreamed = true
	return self.Living.NoteDream(ctx, plans, a.sys.clock.Now())
}

// BackboneWriter carries out the consensus actor's writes of the
// backbone (Options.Backbone). The default writes this store's backbone
// and ledger (one node). A cluster member's (package cluster) writes the
// cluster's one backbone when this member owns it (a retryable error
// when another member does), through its chain writer.
type BackboneWriter interface {
	// Write writes content by agent straight to the backbone; existed
	// when that memory already was on it.
	Write(ctx context.Context, agent, content string, labels map[string]string) (c cid.Cid, existed bool, err error)
	// Contribute records an agent's version of a concept and decides.
	Contribute(ctx context.Context, c *messages.Contribute) (*messages.ContributeResult, error)
	// Resolve settles a conflict by writing content to the backbone.
	Resolve(ctx context.Context, conflictID, content, agent string) (cid.Cid, error)
	// Append appends a prepared memory to the backbone's chain (an
	// import replaying it).
	Append(ctx context.Context, p *model.Prepared) (*messages.Appended, error)
}

// localBackbone is this store's backbone and consensus ledger.
type localBackbone struct{ self *memory.Self }

func (l localBackbone) Write(ctx context.Context, agent, content string, labels map[string]string) (cid.Cid, bool, error) {
	return l.self.Backbone.Write(ctx, agent, content, labels)
}

func (l localBackbone) Contribute(ctx context.Context, c *messages.Contribute) (*messages.ContributeResult, error) {
	return l.self.Consensus.Contribute(ctx, c)
}

func (l localBackbone) Resolve(ctx context.Context, conflictID, content, agent string) (cid.Cid, error) {
	return l.self.Consensus.Resolve(ctx, conflictID, content, agent)
}

func (l localBackbone) Append(ctx context.Context, p *model.Prepared) (*messages.Appended, error) {
	return l.self.Backbone.Append(ctx, p)
}

// consensusActor is the one writer of the backbone (Living Memory): direct
// single-agent writes, multi-agent contributions and conflict resolutions,
// one at a time, each one durable transaction. Pending concepts and
// conflicts are in the store, so a restart loses nothing.
type consensusActor struct {
	sys *System
}

func (a *consensusActor) Receive(ctx actor.Context) {
	self := a.sys.self
	switch msg := ctx.Message().(type) {
	case *messages.Contribute:
		if a.sys.knobs.BeforeConsensus != nil {
			a.sys.knobs.BeforeConsensus()
		}
		c, cancel := context.WithTimeout(a.sys.base, a.sys.cfg.Actors.AskTimeout.D())
		defer cancel()
		r, err := a.sys.backbone.Contribute(c, msg)
		respondTo(ctx, r, err)
	case *messages.WriteBackbone:
		c, cancel := context.WithTimeout(a.sys.base, a.sys.cfg.Actors.AskTimeout.D())
		defer cancel()
		labels := msg.Labels
		if msg.ConceptKey != "" { // the field wins over a label of the same name
			labels = maps.Clone(msg.Labels)
			if labels == nil {
				labels = map[string]string{}
			}
			labels[consensus.LabelConcept] = msg.ConceptKey
		}
		id, existed, err := a.sys.backbone.Write(c, msg.AgentId, msg.Content, labels)
		respondTo(ctx, &messages.BackboneWritten{Cid: id.String(), Existed: existed}, err)
	case *messages.AppendMemory: // an import replaying the backbone's chain
		c, cancel := context.WithTimeout(a.sys.base, a.sys.cfg.Actors.AskTimeout.D())
		defer cancel()
		p, err := prepareAppend(self, msg)
		if err != nil {
			respondTo[*messages.Appended](ctx, nil, err)
			return
		}
		r, err := a.sys.backbone.Append(c, p)
		respondTo(ctx, r, err)
	case *messages.Resolve:
		c, cancel := context.WithTimeout(a.sys.base, a.sys.cfg.Actors.AskTimeout.D())
		defer cancel()
		id, err := a.sys.backbone.Resolve(c, msg.ConflictId, msg.Content, msg.AgentId)
		respondTo(ctx, &messages.BackboneWritten{Cid: id.String()}, err)
	}
}

func respondTo[T any](ctx actor.Context, r T, err error) {
	if err != nil {
		ctx.Respond(failure(err))
		return
	}
	ctx.Respond(r)
}
