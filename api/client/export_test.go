package client_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/messages"
)

// An export that fails after its first byte is cut short: over HTTP the
// body ends in an error, in process the call fails; neither hands out a
// document that parses.
func TestExportCutShortIsAnError(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Server.TransferTimeout = config.Duration(time.Nanosecond) // expires once the header is out
	a, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	ctx := context.Background()
	if _, err := a.Self.Sonas.Create(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	data, _ := structpb.NewStruct(map[string]any{"kind": "text", "content": "one memory"})
	if _, err := client.Embedded(a.API).Insert(ctx, &messages.InsertRequest{Sona: "alice", Data: data}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.API)
	t.Cleanup(srv.Close)

	// Over HTTP the connection ends early: before the status when nothing
	// was flushed yet, or in the middle of the body.
	var body []byte
	rc, err := client.New(srv.URL, srv.Client()).Export(ctx, "", true)
	if err == nil {
		body, err = io.ReadAll(rc)
		rc.Close()
	}
	if err == nil || json.Valid(body) {
		t.Fatalf("over HTTP: error %v after %q", err, body)
	}
	if _, err := client.Embedded(a.API).Export(ctx, "", true); err == nil || !strings.Contains(err.Error(), "cut the response short") {
		t.Fatalf("in process: %v", err)
	}
}
