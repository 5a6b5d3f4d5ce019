package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/metrics"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/advance"
	"github.com/memoria-ai/memoria/memory/anchor"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/prompt"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

// Options configure the actor system.
type Options struct {
	Self   *memory.Self
	LLM    llm.LLM
	Config config.Config
	Clock  clock.Clock
	Logger *slog.Logger
	Knobs  TestingKnobs
	// Metrics, when set, count tier transitions and failures.
	Metrics *metrics.Set
	// TierModel does the tiers' language work; nil: the LLM with a JSON
	// schema per decision, falling back to the offline heuristic.
	TierModel tiers.Model
	// AnchorSink, when set, hears every anchor (XmetaV's significant
	// memories) from an anchors actor, off the appends' acknowledgement
	// path. None by default.
	AnchorSink anchor.Sink
	// Chains carries out the sonas' appends; nil: the store (one node).
	// A cluster member passes its own (see ChainWriter).
	Chains ChainWriter
	// Recall runs the recalls of chat steps and queries, submitting
	// their traces itself; nil: this store's recall (one node). A cluster
	// member passes its own, which gathers a self-scope recall from every
	// member (see Recall).
	Recall RecallFunc
	// Tends, when set, reports whether this process does a sona's upkeep
	// writes (the heartbeat's merges and folds, a dream's insights); the
	// others are left to the process that tends them. nil: every sona (one
	// node). A cluster member passes its own (one member tends a sona).
	Tends func(ctx context.Context, sona string) bool
	// Backbone carries out the consensus actor's writes; nil: this
	// store's backbone (one node). A cluster member passes its own (see
	// BackboneWriter).
	Backbone BackboneWriter
}

// TestingKnobs let tests inject faults. They are nil in production.
type TestingKnobs struct {
	// BeforeAppend runs in a sona actor before it plans an append of the
	// memory at seq; a panic here crashes the actor.
	BeforeAppend func(sona string, seq int64)
	// TierStep runs in a tier actor before each step (when "before") and
	// after each step that did work, before its result is passed on
	// (when "after"); a panic here crashes the tier actor.
	TierStep func(sona, tier, when string)
	// TierSpawned runs in a sona actor when it starts the actor of one of
	// its tiers.
	TierSpawned func(sona, tier string)
	// BeforeTick runs in the heartbeat actor before each tick, and
	// BeforeConsensus in the consensus actor before each contribution; a
	// panic there crashes the actor.
	BeforeTick      func()
	BeforeConsensus func()
	// BeforeEvaluate runs in the evaluator actor before each step.
	BeforeEvaluate func()
}

// System is the running actor tree and the entry point for writes to
// sonas. Reads (recall, get, list) do not go through actors: use the
// memory.Self directly.
type System struct {
	as        *actor.ActorSystem
	root      *actor.PID
	sonas     *actor.PID
	heartbeat *actor.PID
	consensus *actor.PID
	evaluator *actor.PID
	anchors   *actor.PID // nil without an anchor sink
	self      *memory.Self
	llm       llm.LLM
	cfg       config.Config
	clock     clock.Clock
	log       *slog.Logger
	knobs     TestingKnobs

	metrics    *metrics.Set
	tierModel  tiers.Model
	anchorSink anchor.Sink
	chains     ChainWriter
	flights    flights // the chains' writes in flight, by sona
	recaller   RecallFunc
	tends      func(ctx context.Context, sona string) bool
	backbone   BackboneWriter

	// importing is set while an import runs (one at a time); upkeep is
	// held by a heartbeat tick and by an import, which never overlap.
	importing atomic.Bool
	upkeep    sync.Mutex

	// base is cancelled by Stop, which then waits for work, the steps
	// running off the actors' mailboxes.
	base   context.Context
	cancel context.CancelFunc

	// calls are the callers of AdvanceStream waiting in this process, by
	// Advance.call: their contexts and token sinks.
	calls sync.Map // uint64 → *call
	// prepared holds the memory of an Append in flight, prepared already,
	// under its message (delivered by pointer in this process), so that
	// the sona actor does not decode and hash its block again.
	prepared sync.Map // *messages.AppendMemory → *model.Prepared
	nextCall atomic.Uint64
	// work counts the steps running off the mailboxes (begin); Stop waits
	// for them once stopping is set, after which none begins: an actor's
	// continuation can still run while the tree stops, and a WaitGroup's
	// Add must not race its Wait.
	work     sync.WaitGroup
	workMu   sync.Mutex
	stopping bool
	stop     sync.Once
	// goroutines run the mailboxes and the steps off them.
	goroutines *goroutines
	ready      atomic.Bool // the PIDs above are set
}

// Start builds the actor tree.
func Start(o Options) (*System, error) {
	if o.Self == nil || o.LLM == nil {
		return nil, fmt.Errorf("actors: Start needs a Self and an LLM")
	}
	o.Clock = clock.Or(o.Clock)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	logger := o.Logger.With("component", "actors")
	as := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }),
		actor.WithDeadLetterRequestLogging(false),
	)
	s := &System{as: as, self: o.Self, llm: o.LLM, cfg: o.Config, clock: o.Clock, log: logger, knobs: o.Knobs,
		metrics: o.Metrics, tierModel: o.TierModel, anchorSink: o.AnchorSink, chains: o.Chains, recaller: o.Recall, tends: o.Tends, backbone: o.Backbone}
	if s.chains == nil {
		s.chains = localChains{o.Self}
	}
	if s.backbone == nil {
		s.backbone = localBackbone{o.Self}
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.goroutines = newGoroutines()
	if s.tierModel == nil {
		s.tierModel = &tiers.LLMModel{LLM: o.LLM, MaxTokens: o.Config.LLM.MaxTokens, Fallback: func(op string, err error) {
			s.metrics.TierFallback(op)
			logger.Debug("tier model fell back to the heuristic", "op", op, "err", err)
		}}
	}

	ac := o.Config.Actors
	s.observeRestarts()
	rootProps := actor.PropsFromProducer(func() actor.Actor { return &rootActor{sys: s} }, s.mailbox("root"),
		actor.WithSupervisor(newStrategy(ac.MaxRestarts, ac.RestartWindow.D(), ac.RestartBackoff.D(), ac.MaxBackoff.D(), o.Clock)))
	root, err := as.Root.SpawnNamed(rootProps, "root")
	if err != nil {
		return nil, fmt.Errorf("actors: spawn root: %w", err)
	}
	s.root = root
	children := map[string]**actor.PID{"sonas": &s.sonas, "heartbeat": &s.heartbeat, "consensus": &s.consensus, "evaluator": &s.evaluator}
	if s.anchorSink != nil {
		children["anchors"] = &s.anchors
	}
	for name, dst := range children {
		res, err := as.Root.RequestFuture(root, &messages.Lookup{Name: name}, ac.AskTimeout.D()).Result()
		pid, ok := res.(*actor.PID)
		if err != nil || !ok {
			as.Shutdown()
			return nil, fmt.Errorf("actors: root did not start %s: %v", name, err)
		}
		*dst = pid
	}
	if s.anchors != nil {
		s.self.Anchors.OnAdded(s.wakeAnchors)
		s.wakeAnchors() // anchors made while no sink listened
	}
	s.ready.Store(true)
	return s, nil
}

// Stop stops every actor, waiting for the tree to shut down, then cancels
// the work still running off the mailboxes and waits for it. Calling it
// again does nothing.
func (s *System) Stop() {
	s.stop.Do(func() {
		_ = s.as.Root.StopFuture(s.root).Wait()
		s.cancel()
		s.workMu.Lock()
		s.stopping = true
		s.workMu.Unlock()
		s.work.Wait()
		s.as.Shutdown()
		s.goroutines.stop()
	})
}

// begin counts a step that is to run off the mailboxes; false once the
// system is stopping (the step must not run).
func (s *System) begin() bool {
	s.workMu.Lock()
	defer s.workMu.Unlock()
	if s.stopping {
		return false
	}
	s.work.Add(1)
	return true
}

// off runs fn off the mailboxes, counted in work; false, and fn not run,
// once the system is stopping.
func (s *System) off(fn func()) bool {
	if !s.begin() {
		return false
	}
	s.goroutines.Schedule(func() {
		defer s.work.Done()
		fn()
	})
	return true
}

// ActorSystem exposes the protoactor system (for cluster wiring and tests).
func (s *System) ActorSystem() *actor.ActorSystem { return s.as }

// rootActor supervises the top-level actors.
type rootActor struct {
	sys      *System
	children map[string]*actor.PID
}

func (r *rootActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		ac := r.sys.cfg.Actors
		props := actor.PropsFromProducer(func() actor.Actor { return newSonasActor(r.sys) }, r.sys.mailbox("sonas"),
			actor.WithSupervisor(newStrategy(ac.MaxRestarts, ac.RestartWindow.D(), 0, 0, r.sys.clock)))
		// The heartbeat, consensus and evaluator actors restart with
		// backoff: their state is in the store.
		backoff := newStrategy(ac.MaxRestarts, ac.RestartWindow.D(), ac.RestartBackoff.D(), ac.ServiceMaxBackoff.D(), r.sys.clock)
		r.children = map[string]*actor.PID{}
		children := map[string]*actor.Props{
			"sonas":     props,
			"heartbeat": actor.PropsFromProducer(func() actor.Actor { return &heartbeatActor{sys: r.sys} }, r.sys.mailbox("heartbeat"), actor.WithSupervisor(backoff)),
			"consensus": actor.PropsFromProducer(func() actor.Actor { return &consensusActor{sys: r.sys} }, r.sys.mailbox("consensus"), actor.WithSupervisor(backoff)),
			"evaluator": actor.PropsFromProducer(func() actor.Actor { return &evaluatorActor{sys: r.sys} }, r.sys.mailbox("evaluator"), actor.WithSupervisor(backoff)),
		}
		if r.sys.anchorSink != nil {
			children["anchors"] = actor.PropsFromProducer(func() actor.Actor { return &anchorsActor{sys: r.sys} }, r.sys.mailbox("anchors"), actor.WithSupervisor(backoff))
		}
		for name, p := range children {
			pid, err := ctx.SpawnNamed(p, name)
			if err != nil {
				panic(fmt.Sprintf("actors: spawn %s: %v", name, err))
			}
			r.children[name] = pid
		}
	case *messages.Lookup:
		if pid, ok := r.children[msg.Name]; ok {
			ctx.Respond(pid)
		} else {
			ctx.Respond(&messages.Failure{Code: CodeNotFound, Message: "no child " + msg.Name})
		}
	}
}

// ask sends msg to the sonas supervisor and waits for the reply.
func ask[T any](s *System, msg proto.Message, timeout time.Duration) (T, error) {
	return askPID[T](s, s.sonas, msg, timeout)
}

// Advance runs one step of a sona (DESIGN.md §4.1) and returns once the
// input and response memories are durable.
func (s *System) Advance(ctx context.Context, sona string, req *messages.ChatRequest) (*messages.ChatResponse, error) {
	return s.AdvanceStream(ctx, sona, req, nil)
}

// AdvanceStream runs one step like Advance; onToken, when set, hears the
// reply as the model generates it (from another goroutine; an error from
// it ends the model call). ctx reaches the model call: cancelling it (a
// client that went away) cancels the call, and the step then fails with
// its input kept. While the model's circuit breaker is open it fails at
// once with an error wrapping llm.ErrCircuitOpen, before anything is
// written.
func (s *System) AdvanceStream(ctx context.Context, sona string, req *messages.ChatRequest, onToken func(string) error) (*messages.ChatResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.checkNotBackbone(sona); err != nil {
		return nil, err
	}
	if err := s.modelAvailable(); err != nil {
		return nil, err
	}
	id := s.nextCall.Add(1)
	s.calls.Store(id, &call{ctx: ctx, token: onToken})
	defer s.calls.Delete(id)
	return ask[*messages.ChatResponse](s, &messages.Advance{Sona: sona, Request: req, Call: id}, s.stepTimeout())
}

// modelAvailable fails when the model's circuit breaker is open.
func (s *System) modelAvailable() error {
	if av, ok := s.llm.(llm.Availability); ok {
		if err := av.Available(); err != nil {
			return fmt.Errorf("%w: %w", ErrLLM, err)
		}
	}
	return nil
}

// call is a caller waiting for an advance in this process.
type call struct {
	ctx   context.Context
	token func(string) error
}

// callOf returns the caller registered as id, or nil.
func (s *System) callOf(id uint64) *call {
	if id == 0 {
		return nil
	}
	if c, ok := s.calls.Load(id); ok {
		return c.(*call)
	}
	return nil
}

// bind returns ctx, also cancelled when the caller's context ends (with its
// cause), and the caller's token sink.
func (c *call) bind(ctx context.Context) (context.Context, func(string) error, context.CancelFunc) {
	if c == nil {
		return ctx, nil, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(c.ctx, func() { cancel(context.Cause(c.ctx)) })
	return ctx, c.token, func() { stop(); cancel(nil) }
}

// stepTimeout bounds a whole advance: two embeddings, recall, the model
// call and two durable writes.
func (s *System) stepTimeout() time.Duration {
	return s.cfg.LLM.Timeout.D() + 2*s.cfg.Actors.AskTimeout.D()
}

// tierTimeout bounds one tier step: a model call and a durable write.
func (s *System) tierTimeout() time.Duration {
	return s.cfg.LLM.Timeout.D() + s.cfg.Actors.AskTimeout.D()
}

// Append adds a prepared memory to a sona's chain and returns once it is
// durable. A memory already in the sona is not appended again.
func (s *System) Append(ctx context.Context, sona string, p *model.Prepared) (*messages.Appended, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.checkNotBackbone(sona); err != nil {
		return nil, err
	}
	msg := appendMessage(sona, p)
	if p.Forgotten == nil {
		s.prepared.Store(msg, p)
		defer s.prepared.Delete(msg)
	}
	return ask[*messages.Appended](s, msg, s.cfg.Actors.AskTimeout.D())
}

// ActiveSonas returns how many sona actors are alive (not passivated).
func (s *System) ActiveSonas() (int, error) {
	r, err := ask[*messages.ActiveCount](s, &messages.CountActive{}, s.cfg.Actors.AskTimeout.D())
	if err != nil {
		return 0, err
	}
	return int(r.Sonas), nil
}

// Query recalls and answers like Advance but stores nothing. It needs no
// actor: it only reads.
func (s *System) Query(ctx context.Context, sona string, req *messages.ChatRequest) (*messages.QueryResponse, error) {
	rec, err := s.self.Sonas.Get(sona)
	if err != nil {
		return nil, err
	}
	vecs, err := s.self.Embed(ctx, req.Content)
	if err != nil {
		return nil, err
	}
	start := s.clock.Now()
	recalled, _, err := s.recall(ctx, ctx, recall.Query{
		Sona: sona, Text: req.Content, Vector: vecs[0], K: int(req.K), Budget: int(req.BudgetChars), Expand: advance.ExpandOf(req),
		AgentID: req.AgentId, Scope: req.Scope, Peek: true, // a query leaves no trace
	})
	s.metrics.ObserveRecall("query", s.clock.Since(start))
	if err != nil {
		return nil, err
	}
	tr, err := s.tierRecall(ctx, sona, req.Content, vecs[0])
	if err != nil {
		return nil, err
	}
	resp, err := s.complete(ctx, rec.Name, recalled, tr, req, nil)
	if err != nil {
		return nil, err
	}
	return &messages.QueryResponse{
		Response: &messages.Reply{Content: resp.Content, Model: resp.Model, StopReason: string(resp.StopReason)},
		Recalled: advance.ScoredRefs(recalled),
	}, nil
}

// complete builds the step's prompt and calls the model, streaming the
// reply to onToken when it is set.
func (s *System) complete(ctx context.Context, sonaName string, recalled []*recall.Recalled, tr *tiers.Recall, req *messages.ChatRequest,
	onToken func(string) error) (llm.Response, error) {
	msgs := prompt.Build(prompt.Input{
		SonaName:      sonaName,
		Recalled:      recalled,
		Tiers:         tr,
		Input:         req.Content,
		InputName:     req.Name,
		MaxTokens:     s.cfg.LLM.MaxTokens,
		ContextTokens: s.cfg.LLM.ContextTokens,
	})
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LLM.Timeout.D())
	defer cancel()
	ctx, span := startModelCall(ctx, s.cfg.LLM, msgs)
	var resp llm.Response
	var err error
	if onToken != nil {
		resp, err = llm.Stream(ctx, s.llm, msgs, onToken)
	} else {
		resp, err = s.llm.Complete(ctx, msgs)
	}
	endModelCall(span, resp, err)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%v)", cause, err)
		}
		return resp, fmt.Errorf("%w: %w", ErrLLM, err)
	}
	return resp, nil
}

// tickTimeout bounds one heartbeat tick: the sweep, the merges and the
// insights it appends.
func (s *System) tickTimeout() time.Duration {
	return s.tierTimeout() + time.Duration(s.cfg.Heartbeat.MaxCompressions+1)*s.cfg.Actors.AskTimeout.D()
}

// askPID sends msg to pid and waits for the reply.
func askPID[T any](s *System, pid *actor.PID, msg proto.Message, timeout time.Duration) (T, error) {
	return reply[T](s.as.Root.RequestFuture(pid, msg, timeout).Result())
}

// Heartbeat runs one heartbeat tick now; dream forces dream mode.
func (s *System) Heartbeat(ctx context.Context, dream bool) (*messages.TickReport, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return askPID[*messages.TickReport](s, s.heartbeat, &messages.Heartbeat{Dream: dream}, 2*s.tickTimeout())
}

// Compact sweeps every memory and folds the cold branches now.
func (s *System) Compact(ctx context.Context) (*messages.TickReport, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return askPID[*messages.TickReport](s, s.heartbeat, &messages.Compact{}, 2*s.tickTimeout()+s.cfg.Actors.AskTimeout.D())
}

// Contribute offers an agent's version of a concept to the backbone.
func (s *System) Contribute(ctx context.Context, c *messages.Contribute) (*messages.ContributeResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return askPID[*messages.ContributeResult](s, s.consensus, c, 2*s.cfg.Actors.AskTimeout.D())
}

// WriteBackbone writes one agent's memory straight to the backbone.
func (s *System) WriteBackbone(ctx context.Context, w *messages.WriteBackbone) (*messages.BackboneWritten, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return askPID[*messages.BackboneWritten](s, s.consensus, w, 2*s.cfg.Actors.AskTimeout.D())
}

// Resolve settles a conflict by writing content to the backbone.
func (s *System) Resolve(ctx context.Context, r *messages.Resolve) (*messages.BackboneWritten, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return askPID[*messages.BackboneWritten](s, s.consensus, r, 2*s.cfg.Actors.AskTimeout.D())
}

// checkNotBackbone refuses chain writes to the backbone's sona from
// anywhere but the consensus actor.
func (s *System) checkNotBackbone(sona string) error {
	if s.self.Backbone.Is(sona) {
		return fmt.Errorf("%w: the backbone sona is written through /backbone and /backbone/contribute", base.ErrInvalid)
	}
	return nil
}
