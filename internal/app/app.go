// Package app wires a Memoria process together: logger, models, the self
// (store and index), the actor system and the REST API. The CLI and the
// end-to-end tests build on it.
package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/metrics"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
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
}

// Options adjust Open.
type Options struct {
	Clock memory.Clock
	Knobs actors.TestingKnobs
	// Progress is told how rebuilding derived indexes advances.
	Progress func(stage string, done, total uint64)
	// AnchorSink hears the anchors (none by default).
	AnchorSink memory.AnchorSink
}

// Open validates cfg, opens its data directory and starts the actors.
func Open(ctx context.Context, cfg config.Config, log *slog.Logger, o Options) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	model, emb, err := Models(cfg)
	if err != nil {
		return nil, err
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(cfg.Server.GCPercent)
	}
	self, err := memory.Open(ctx, memory.Options{Config: cfg, Embedder: emb, Clock: o.Clock, Logger: log, Progress: o.Progress})
	if err != nil {
		return nil, err
	}
	m := metrics.New()
	sys, err := actors.Start(actors.Options{Self: self, LLM: model, Config: cfg, Clock: o.Clock, Logger: log, Knobs: o.Knobs,
		Metrics: m, AnchorSink: o.AnchorSink})
	if err != nil {
		self.Close()
		return nil, err
	}
	srv := api.NewServer(self, sys, cfg, log)
	srv.ServeMetrics(m.Handler())
	return &App{Config: cfg, Log: log, Self: self, System: sys, API: srv, Metrics: m}, nil
}

// Close stops the actors, then closes the store after every write.
func (a *App) Close() error {
	a.System.Stop()
	return a.Self.Close()
}

// Models returns the configured model and embedder.
func Models(cfg config.Config) (llm.LLM, llm.Embedder, error) {
	var model llm.LLM
	switch cfg.LLM.Provider {
	case "offline":
		model = llm.NewOffline()
	default:
		return nil, nil, fmt.Errorf("config: llm.provider %q is not available", cfg.LLM.Provider)
	}
	var emb llm.Embedder
	switch cfg.Embedder.Provider {
	case "hashed":
		emb = llm.NewHashedEmbedder(cfg.Embedder.Dims)
	default:
		return nil, nil, fmt.Errorf("config: embedder.provider %q is not available", cfg.Embedder.Provider)
	}
	return model, emb, nil
}

// NewLogger builds the process logger: zap, bridged to slog (which
// protoactor and the packages take), writing to w.
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
	return slog.New(zapslog.NewHandler(core)), func() { _ = z.Sync() }
}
