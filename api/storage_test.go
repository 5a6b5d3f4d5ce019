package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
)

// Below the free-space reserve, writes answer 507 insufficient_storage
// (through the sona actors too), reads answer, /healthz says degraded;
// once space returns, writes are accepted again.
func TestDiskFullAnswers507(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	var free atomic.Uint64
	free.Store(1 << 40)
	a, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler),
		app.Options{FreeSpace: func() (uint64, error) { return free.Load(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.API)
	t.Cleanup(func() {
		srv.Close()
		if err := a.Close(); err != nil {
			t.Errorf("app.Close: %v", err)
		}
	})
	h := &harness{t: t, app: a, url: srv.URL, hc: srv.Client()}
	sona := h.newSona("alice")
	insert := func(content string) response {
		return h.post("/memories", map[string]any{"sona": sona, "data": map[string]any{"kind": "text", "content": content}})
	}
	kept := str(t, insert("The shed key hangs by the door.").obj(t, http.StatusCreated)["cid"])

	free.Store(uint64(cfg.Store.MinFreeMB)<<20 - 1)
	r := insert("This one does not fit.")
	wantError(t, r, http.StatusInsufficientStorage, "insufficient_storage")
	if !strings.Contains(string(r.body), "store.min_free_mb") {
		t.Fatalf("the error does not say why: %s", r.body)
	}
	wantError(t, h.post("/sonas", map[string]any{"name": "bob"}), http.StatusInsufficientStorage, "insufficient_storage")
	wantError(t, h.post("/sona/"+sona+"/chat", map[string]any{"content": "Where is the key?"}), http.StatusInsufficientStorage, "insufficient_storage")
	h.get("/memory/"+kept).obj(t, http.StatusOK)
	h.post("/sona/"+sona+"/recall", map[string]any{"query": "shed key"}).obj(t, http.StatusOK)
	health := h.get("/healthz").obj(t, http.StatusOK)
	if health["status"] != "degraded" || health["reason"] != "disk_full" || num(t, health["memories"]) != 1 {
		t.Fatalf("healthz while full: %v", health)
	}

	free.Store(1 << 40)
	if health := h.get("/healthz").obj(t, http.StatusOK); health["status"] != "ok" {
		t.Fatalf("healthz after space returned: %v", health)
	}
	insert("Space came back.").obj(t, http.StatusCreated)
	if n := h.memoryCount(); n != 2 {
		t.Fatalf("%d memories, want 2", n)
	}
}
