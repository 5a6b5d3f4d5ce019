// Package app wires a Memoria process together: logger, models, the self
// (store and index), the actor system and the REST API. The CLI and the
// end-to-end tests build on it.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/cluster"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/memlimit"
	"github.com/memoria-ai/memoria/internal/metrics"
	"github.com/memoria-ai/memoria/internal/otlp"
	"github.com/memoria-ai/memoria/internal/trace"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/llm/providers"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/anchor"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/vector"
)

// App is an open data directory with everything running on it.
type App struct {
	Config config.Config
	Log    *slog.Logger
	Self   *memory.Self
	System *actors.System
	API    *api.Server
	// Metrics are served at GET /metrics.
	Metrics *metrics.Set
	// Tracing exports spans by OTLP; nil when the OTEL_* variables leave
	// it off (the default).
	Tracing *otlp.Tracing
	// Cluster is this process's membership of a cluster; nil on a single
	// node (see Options.ClusterURL).
	Cluster *cluster.Cluster

	headroom *memlimit.Headroom // nil when GOGC is set or gc_headroom is off
}

// Options adjust Open.
type Options struct {
	Clock clock.Clock
	Knobs actors.TestingKnobs
	// Progress is told how rebuilding derived indexes advances.
	Progress func(stage string, done, total uint64)
	// AnchorSink hears the anchors (none by default).
	AnchorSink anchor.Sink
	// Getenv reads the providers' API keys and the OTEL_* variables
	// (default os.Getenv).
	Getenv func(string) string
	// HTTPClient replaces http.DefaultClient for the model providers.
	HTTPClient *http.Client
	// FreeSpace replaces the data directory's free space (tests).
	FreeSpace func() (uint64, error)
	// AcceptLoss opens a store that lost acknowledged writes (`memoria
	// repair --accept-loss`).
	AcceptLoss bool
	// ClusterURL, when set and cluster.etcd is configured, joins the
	// cluster with this URL as the member's API address (serve sets it;
	// the commands that open a data directory in process never join).
	ClusterURL string
}

// Open validates cfg, opens its data directory and starts the actors.
func Open(ctx context.Context, cfg config.Config, log *slog.Logger, o Options) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	tracing, err := otlp.New(log, otlp.Options{Getenv: getenv, Version: api.Version})
	if err != nil {
		return nil, err
	}
	a, err := open(ctx, cfg, log, o, tracing)
	if err != nil {
		shutdownTracing(tracing, log)
		return nil, err
	}
	return a, nil
}

func open(ctx context.Context, cfg config.Config, log *slog.Logger, o Options, tracing *otlp.Tracing) (a *App, err error) {
	m := metrics.New()
	model, emb, err := providers.New(cfg, providers.Options{Observer: m, Getenv: o.Getenv, HTTPClient: o.HTTPClient})
	if err != nil {
		return nil, err
	}
	reranker, err := providers.Reranker(cfg, providers.Options{Observer: m, Getenv: o.Getenv, HTTPClient: o.HTTPClient})
	if err != nil {
		return nil, err
	}
	var headroom *memlimit.Headroom
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(cfg.Server.GCPercent)
		if b, _ := cfg.Server.GCHeadroom.Parse(); b > 0 { // validated with the configuration
			headroom = memlimit.StartHeadroom(cfg.Server.GCPercent, b)
			log.Info("gc headroom", "mib", b>>20, "gc_percent", cfg.Server.GCPercent)
			defer func() {
				if a == nil {
					headroom.Stop()
				}
			}()
		}
	}
	if err := applyMemoryLimit(cfg.Server.MemoryLimit, log); err != nil {
		return nil, err
	}
	mo := memory.Options{Config: cfg, Embedder: emb, Reranker: reranker, Clock: o.Clock, Logger: log, Progress: o.Progress,
		Evaluator: Evaluator(cfg, model, o.Clock, m, log), Summarize: Summarizer(cfg, model),
		FreeSpace: o.FreeSpace, AcceptLoss: o.AcceptLoss, Prewarm: cfg.Store.Prewarm}
	if tracing != nil {
		mo.Tracer = tracing.Provider // the store's group commits
	}
	self, err := memory.Open(ctx, mo)
	if err != nil {
		return nil, err
	}
	var cl *cluster.Cluster
	var chains actors.ChainWriter
	var recaller actors.RecallFunc
	var tends func(context.Context, string) bool
	var backbone actors.BackboneWriter
	if o.ClusterURL != "" && cfg.Cluster.Enabled() {
		if cl, err = cluster.Start(ctx, cluster.Options{Config: cfg, Self: self, Log: log, Clock: o.Clock, URL: o.ClusterURL, Version: api.Version}); err != nil {
			self.Close()
			return nil, err
		}
		chains, recaller, tends, backbone = cl.Chains(), cl.Recall, cl.Tends, cl.Backbone()
	}
	sys, err := actors.Start(actors.Options{Self: self, LLM: model, Config: cfg, Clock: o.Clock, Logger: log, Knobs: o.Knobs,
		Metrics: m, AnchorSink: o.AnchorSink, Chains: chains, Recall: recaller, Tends: tends, Backbone: backbone})
	if err != nil {
		if cl != nil {
			cl.Close()
		}
		self.Close()
		return nil, err
	}
	srv := api.NewServer(self, sys, cfg, log)
	srv.ServeMetrics(m)
	if cl != nil {
		srv.Mux().Handle("GET /cluster", cl.StatusHandler())
		srv.CreateSonasWith(cl.CreateSona)
		cl.UseForget(cluster.LocalForget{Forget: sys.Forget, Apply: sys.ForgetApply})
		srv.ForgetWith(cl.Forget)
		srv.RecallWith(cl.Recall)
		srv.ListSonasWith(api.SonaLister(cl.ListSonas(cluster.LocalSonas(srv.LocalSonas))))
		// What the others forgot while this member was away goes before
		// it serves.
		if err := cl.SyncTombstones(ctx); err != nil {
			sys.Stop()
			cl.Close()
			self.Close()
			return nil, err
		}
	}
	if tracing != nil {
		srv.Trace(tracing.Provider)
	}
	m.WatchState(func() metrics.State {
		sonas, mems := self.Counts()
		st := self.Store()
		return metrics.State{Sonas: sonas, Memories: mems, Indexes: self.IndexSizes(), WritesRefused: st.CheckSpace() != nil,
			TextRebuilds: self.Text.Rebuilds(), RerankFallbacks: self.Recaller.RerankFallbacks(), Disk: diskParts(st, log), Spaces: spaces(st), GC: gcState(st),
			Caches: caches(self.CacheStats()), VectorFloats: vectorFloats(self.Index()), VectorPacks: self.Index().PackBytes(), Committer: committer(st.CommitStats()),
			RecallWorkers:    recallWorkers(self.Recaller.Workers()),
			Waiting:          map[string]int64{"coaccess_lists": int64(self.Assoc.Waiting()), "touches": int64(self.Memories.TouchesWaiting())},
			LinksBackWaiting: linksBackWaiting(self)}
	})
	return &App{Config: cfg, Log: log, Self: self, System: sys, API: srv, Metrics: m, Tracing: tracing, Cluster: cl, headroom: headroom}, nil
}

// linksBackWaiting is how many link lists wait for links back held in
// memory, for the metrics.
func linksBackWaiting(self *memory.Self) int64 {
	lists, _, _ := self.Assoc.LinksBackHeld()
	return int64(lists)
}

// recallWorkers are the recalls computing and waiting, for the metrics.
func recallWorkers(w recall.WorkerStats) metrics.RecallWorkers {
	return metrics.RecallWorkers{Workers: w.Workers, Busy: w.Busy, Waiting: w.Waiting, Waits: w.Waits, WaitSeconds: w.Waited.Seconds()}
}

// vectorFloats is where the vector index's float32 vectors are, for the
// metrics.
func vectorFloats(x *vector.Index) map[string]int64 {
	heap, spilled, _ := x.FloatBytes() // a stop was logged (SpillStopped)
	return map[string]int64{"heap": heap, "spill": spilled}
}

// diskParts are the store's files' sizes for the metrics.
func diskParts(st *store.Store, log *slog.Logger) map[string]int64 {
	d, err := st.DiskUsage()
	if err != nil {
		log.Warn("cannot measure the store's files", "err", err)
		return nil
	}
	return map[string]int64{"tables": d.Tables, "value_log": d.ValueLog, "wal": d.WAL, "other": d.Other}
}

// spaces are the key spaces the last pass of the store's garbage
// collection measured.
func spaces(st *store.Store) []metrics.Space {
	last := st.GCStats().Last
	if last == nil {
		return nil
	}
	out := make([]metrics.Space, len(last.Spaces))
	for i, sp := range last.Spaces {
		out[i] = metrics.Space{Name: sp.Space, Keys: sp.Keys, Bytes: sp.Bytes}
	}
	return out
}

// caches are the caches' reads for the metrics.
func caches(stats map[string]store.CacheStats) map[string]metrics.Cache {
	out := make(map[string]metrics.Cache, len(stats))
	for name, c := range stats {
		out[name] = metrics.Cache(c)
	}
	return out
}

func committer(c store.CommitStats) metrics.Committer {
	waits := make(map[string]metrics.Waits, store.WriteStages)
	for stage, name := range writeStages {
		waits[name] = metrics.Waits{Counts: c.Waits[stage].Counts[:], Seconds: c.Waits[stage].Total.Seconds()}
	}
	written := make(map[string]metrics.Written, len(c.Written))
	for _, w := range c.Written {
		written[w.Space] = metrics.Written{Keys: w.Keys, Bytes: w.Bytes}
	}
	return metrics.Committer{Commits: c.Commits, Ops: c.Ops, DeferredOps: c.Deferred, BusySeconds: c.Busy.Seconds(), CommitSeconds: c.Commit.Seconds(),
		BatchBounds: seconds(store.BatchBounds[:]), Batches: c.Batches[:], WaitBounds: seconds(store.WaitBounds[:]), Waits: waits,
		Stalls: c.Stalls, StallSeconds: c.Stalled.Seconds(), ReadsOpen: c.ReadsOpen, OldestReadBehind: c.OldestReadBehind, Written: written}
}

// writeStages are the names of the store's stages on /metrics (an array
// of the store's length: the two must agree to compile).
var writeStages [store.WriteStages]string = metrics.WriteStages

// seconds are ds in seconds.
func seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

func gcState(st *store.Store) metrics.GCState {
	g := st.GCStats()
	return metrics.GCState{Rewritten: g.Rewritten, Reclaimed: g.Reclaimed, Passes: map[string]int64{
		"failed": g.Failed, "skipped": g.Skipped, "reclaimed": g.Freeing, "nothing": g.Passes - g.Failed - g.Skipped - g.Freeing}}
}

// shutdownTracing exports the spans still held, giving the collector
// tracingFlush at most.
func shutdownTracing(t *otlp.Tracing, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlush)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("tracing shutdown", "err", err)
	}
}

// tracingFlush bounds the last export at Close.
const tracingFlush = 5 * time.Second

// applyMemoryLimit sets the runtime's soft memory limit (see memlimit). A
// machine whose memory cannot be read runs without one under "auto".
func applyMemoryLimit(ml config.MemoryLimit, log *slog.Logger) error {
	lim, err := memlimit.Apply(ml, os.Getenv, os.DirFS("/"))
	if err != nil {
		if spec, _ := ml.Parse(); spec.Auto && errors.Is(err, memlimit.ErrUnknown) {
			log.Warn("no memory limit: the memory available is unknown", "err", err)
			return nil
		}
		return err
	}
	log.Info("memory limit", "mib", lim.Bytes>>20, "from", lim.Source)
	return nil
}

// Close stops the actors, leaves the cluster (its sonas are free for the
// other members at once), then closes the store after every write, then
// exports the last spans.
func (a *App) Close() error {
	a.System.Stop()
	var err error
	if a.Cluster != nil {
		if err = a.Cluster.Close(); err != nil {
			a.Log.Warn("leaving the cluster", "err", err)
		}
	}
	err = errors.Join(err, a.Self.Close())
	shutdownTracing(a.Tracing, a.Log)
	if a.headroom != nil {
		a.headroom.Stop()
	}
	return err
}

// Evaluator is the configured EUMAS evaluator (evaluation.mode): the
// model with a JSON schema per archetype, falling back to the heuristic
// when it has no structured output; the heuristic; or none.
func Evaluator(cfg config.Config, model llm.LLM, clk clock.Clock, m *metrics.Set, log *slog.Logger) eumas.Evaluator {
	ec := cfg.Evaluation
	switch ec.Mode {
	case "llm":
		clk = clock.Or(clk)
		e := eumas.NewLLM(model, ec.Archetypes, cfg.LLM.MaxTokens, func() int64 { return clk.Now().Unix() })
		e.Failed = func(archetype string, err error) {
			m.EvaluationFailure(archetype)
			log.Warn("evaluation failed", "archetype", archetype, "err", err)
		}
		return e
	case "heuristic":
		return eumas.NewHeuristic(ec.Archetypes)
	}
	return nil
}

// Summarizer is Living Memory's LLM summary of the memories a compression
// or fold merges, with the configured model; nil with the offline model,
// whose replies quote rather than summarise (the merge is then summarised
// extractively).
func Summarizer(cfg config.Config, model llm.LLM) func(context.Context, []string) (string, error) {
	if cfg.LLM.Provider == "offline" {
		return nil
	}
	return func(ctx context.Context, texts []string) (string, error) {
		var b strings.Builder
		for i, t := range texts {
			fmt.Fprintf(&b, "[%d] %s\n", i+1, t)
		}
		resp, err := model.Complete(ctx, llm.Request{
			Messages: []llm.Message{
				{Role: llm.RoleSystem, Content: "You consolidate an AI agent's memories. Write one memory of at most five sentences that keeps every fact of the memories below (names, dates, numbers, decisions) and adds nothing."},
				{Role: llm.RoleUser, Content: b.String()},
			},
			MaxTokens: cfg.LLM.MaxTokens,
		})
		if err != nil {
			return "", err
		}
		if resp.StopReason == llm.StopMaxTokens {
			return "", errors.New("summary cut at max tokens")
		}
		return resp.Content, nil
	}
}

// NewLogger builds the process logger: zap, bridged to slog (which
// protoactor and the packages take), writing to w; a line logged with a
// context that carries a span gets its trace_id and span_id.
func NewLogger(c config.Log, w io.Writer) (*slog.Logger, func()) {
	level := zapcore.InfoLevel
	_ = level.Set(c.Level)
	enc := zap.NewDevelopmentEncoderConfig()
	var encoder zapcore.Encoder
	if c.Format == "json" {
		enc = zap.NewProductionEncoderConfig()
		enc.EncodeTime = zapcore.ISO8601TimeEncoder
		encoder = zapcore.NewJSONEncoder(enc)
	} else {
		enc.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		encoder = zapcore.NewConsoleEncoder(enc)
	}
	if w == nil {
		w = os.Stderr
	}
	core := zapcore.NewCore(encoder, zapcore.Lock(zapcore.AddSync(w)), level)
	z := zap.New(core)
	return slog.New(trace.LogHandler(zapslog.NewHandler(core))), func() { _ = z.Sync() }
}
