package app

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/memlimit"
	"github.com/memoria-ai/memoria/llm"
)

// echo answers every request with a fixed reply and keeps the last one.
type echo struct {
	reply llm.Response
	last  llm.Request
}

func (e *echo) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	e.last = req
	return e.reply, nil
}

func TestSummarizer(t *testing.T) {
	cfg := config.Default()
	if Summarizer(cfg, llm.NewOffline()) != nil {
		t.Fatal("the offline model summarises merges; it only quotes")
	}
	cfg.LLM.Provider = "remote"
	model := &echo{reply: llm.Response{Content: "Bob planted tomatoes.", StopReason: llm.StopEndTurn}}
	sum := Summarizer(cfg, model)
	got, err := sum(context.Background(), []string{"Bob planted tomatoes.", "In May."})
	if err != nil || got != "Bob planted tomatoes." {
		t.Fatalf("summary %q, %v", got, err)
	}
	if user := model.last.Messages[1].Content; user != "[1] Bob planted tomatoes.\n[2] In May.\n" {
		t.Errorf("prompt %q", user)
	}
	model.reply.StopReason = llm.StopMaxTokens
	if _, err := sum(context.Background(), []string{"x"}); err == nil || !strings.Contains(err.Error(), "max tokens") {
		t.Errorf("a cut summary was accepted: %v", err)
	}
}

// TestNoClusterWithoutServe: with cluster.etcd set, only a process given
// a ClusterURL (serve) joins; the commands that open the data directory in
// process stay single nodes, and a single node has no GET /cluster.
func TestNoClusterWithoutServe(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Cluster.Etcd = "127.0.0.1:1" // nothing listens: joining would fail
	cfg.Evaluation.Mode = "off"
	a, err := Open(context.Background(), cfg, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Cluster != nil {
		t.Fatal("joined a cluster without a ClusterURL")
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/cluster", nil)
	req.Host = "127.0.0.1:7777"
	a.API.ServeHTTP(rec, req)
	if rec.Code != 404 {
		t.Fatalf("GET /cluster on a single node: %d", rec.Code)
	}
}

// TestOpenSetsTheGCTarget: the server runs with server.gc_percent as the
// Go GC target unless GOGC is set, and the default is Go's own 100 — the
// target under which a durable insert took the least server CPU over
// HTTP (README, issue 15: 400 cost 15–35% more, the heap growing into
// fresh pages).
func TestOpenSetsTheGCTarget(t *testing.T) {
	if got := config.Default().Server.GCPercent; got != 100 {
		t.Fatalf("default server.gc_percent %d, want 100 (see README, issue 15's inserts)", got)
	}
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	open := func(gogc string, percent int) int {
		t.Helper()
		t.Setenv("GOGC", gogc)
		debug.SetGCPercent(37) // neither the default nor the setting
		cfg := config.Default()
		cfg.DataDir = t.TempDir()
		cfg.Evaluation.Mode = "off"
		cfg.Server.GCPercent = percent
		cfg.Server.GCHeadroom = "off" // gc_percent alone (the headroom: below)
		a, err := Open(context.Background(), cfg, slog.New(slog.DiscardHandler), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		return debug.SetGCPercent(100)
	}
	if got := open("", 250); got != 250 {
		t.Errorf("GC target %d after Open with server.gc_percent 250, want 250", got)
	}
	if got := open("80", 250); got != 37 {
		t.Errorf("GC target %d after Open with GOGC set, want it left alone (37)", got)
	}
}

// TestOpenBoundsTheGCHeadroom: with server.gc_headroom the target falls
// once the live heap is large (here 256 MiB against a 16 MiB headroom:
// the floor, 10%), and is server.gc_percent again after Close; GOGC set,
// the headroom is left alone too.
func TestOpenBoundsTheGCHeadroom(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	gogc := func() int {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int(s[0].Value.Uint64())
	}
	open := func(env string) *App {
		t.Helper()
		t.Setenv("GOGC", env)
		cfg := config.Default()
		cfg.DataDir = t.TempDir()
		cfg.Evaluation.Mode = "off"
		cfg.Server.GCHeadroom = "16MiB"
		a, err := Open(context.Background(), cfg, slog.New(slog.DiscardHandler), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	live := make([]byte, 256<<20) // live, though untouched

	a := open("")
	for deadline := time.Now().Add(10 * time.Second); gogc() != memlimit.MinPercent; runtime.GC() {
		if time.Now().After(deadline) {
			a.Close()
			t.Fatalf("GC target %d with 256 MiB live and a 16 MiB headroom, want %d", gogc(), memlimit.MinPercent)
		}
	}
	a.Close()
	if got := gogc(); got != 100 {
		t.Fatalf("GC target %d after Close, want server.gc_percent (100)", got)
	}

	debug.SetGCPercent(37)
	a = open("80")
	defer a.Close()
	for range 3 {
		runtime.GC()
	}
	if got := gogc(); got != 37 {
		t.Fatalf("GC target %d with GOGC set, want it left alone (37)", got)
	}
	runtime.KeepAlive(live)
}
