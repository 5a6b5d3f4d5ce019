package app

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/otlp"
	"github.com/memoria-ai/memoria/internal/otlp/otlptest"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// logLines are the JSON log lines of logs with msg.
func logLines(t *testing.T, logs *otlptest.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for l := range strings.Lines(logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// traced is a served process whose OTEL_* variables are vars.
type traced struct {
	app   *App
	srv   *httptest.Server
	logs  *otlptest.Buffer
	close func() error // stops the server, then closes the app (once)
}

func openTraced(t *testing.T, vars map[string]string) *traced {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Evaluation.Mode = "off"
	cfg.Log = config.Log{Level: "debug", Format: "json"}
	logs := &otlptest.Buffer{}
	log, flush := NewLogger(cfg.Log, logs)
	a, err := Open(context.Background(), cfg, log, Options{Getenv: func(k string) string { return vars[k] }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.API)
	close := sync.OnceValue(func() error {
		srv.Close()
		defer flush()
		return a.Close()
	})
	t.Cleanup(func() { close() })
	return &traced{app: a, srv: srv, logs: logs, close: close}
}

// do sends a request with headers (name, value, …) and returns the
// response with its body read.
func (p *traced) do(t *testing.T, method, path, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, p.srv.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := p.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
	callerParent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// TestTracingRequests: requests through the real server (REST, MCP,
// gateway, an unknown route) reach an OTLP collector as server spans named
// by route, under the caller's traceparent, with the sona they worked on,
// and the request's log line carries the span's ids.
func TestTracingRequests(t *testing.T) {
	c := otlptest.New(t)
	p := openTraced(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": c.URL, "OTEL_SERVICE_NAME": "memoria-it"})
	if p.app.Tracing == nil {
		t.Fatal("tracing is off with an endpoint set")
	}

	resp, body := p.do(t, "POST", "/sonas", `{"name":"bob"}`)
	var sona struct{ UUID string }
	if resp.StatusCode != 201 || json.Unmarshal(body, &sona) != nil || sona.UUID == "" {
		t.Fatalf("create sona: %d %s", resp.StatusCode, body)
	}
	resp, body = p.do(t, "POST", "/memories", `{"sona":"bob","kind":"fact","data":{"kind":"text","content":"The shed key hangs by the door."}}`)
	var mem struct{ CID string }
	if resp.StatusCode != 201 && resp.StatusCode != 200 || json.Unmarshal(body, &mem) != nil || mem.CID == "" {
		t.Fatalf("insert: %d %s", resp.StatusCode, body)
	}
	resp, body = p.do(t, "POST", "/sona/"+sona.UUID+"/recall", `{"query":"where is the key?","k":5}`, "traceparent", callerParent)
	if resp.StatusCode != 200 {
		t.Fatalf("recall: %d %s", resp.StatusCode, body)
	}
	if tp := resp.Header.Get("traceparent"); tp != "" {
		t.Errorf("traceparent %q in a response", tp)
	}
	p.do(t, "GET", "/ipfs/"+mem.CID, "", "Accept", "application/vnd.ipld.raw")
	p.do(t, "GET", "/no/such/route", "")
	resp, body = p.do(t, "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"recall","arguments":{"sona":"bob","query":"key"}}}`,
		"Accept", "application/json, text/event-stream")
	if resp.StatusCode != 200 || bytes.Contains(body, []byte(`"isError":true`)) {
		t.Fatalf("mcp recall: %d %s", resp.StatusCode, body)
	}
	if err := p.app.Tracing.Provider.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}

	one := func(name string) otlptest.Span {
		t.Helper()
		s := c.Named(name)
		if len(s) != 1 {
			var names []string
			for _, s := range c.Spans() {
				names = append(names, s.Name)
			}
			t.Fatalf("%d spans named %q; spans: %q", len(s), name, names)
		}
		return s[0]
	}
	recall := one("POST /sona/{uuid}/recall")
	if recall.TraceID() != callerTrace || recall.ParentID() != callerSpan || recall.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("recall span: trace %s parent %s kind %v; want the caller's trace and span", recall.TraceID(), recall.ParentID(), recall.Kind)
	}
	for k, want := range map[string]string{"http.route": "/sona/{uuid}/recall", "http.request.method": "POST",
		"url.path": "/sona/" + sona.UUID + "/recall", "memoria.sona.uuid": sona.UUID, "client.address": "127.0.0.1"} {
		if got := recall.Attr(k).GetStringValue(); got != want {
			t.Errorf("recall span %s = %q, want %q", k, got, want)
		}
	}
	if code := recall.Attr("http.response.status_code").GetIntValue(); code != 200 {
		t.Errorf("status code %d", code)
	}
	if recall.Resource["service.name"].GetStringValue() != "memoria-it" {
		t.Errorf("resource %v", recall.Resource)
	}
	if insert := one("POST /memories"); insert.Attr("memoria.sona.uuid").GetStringValue() != sona.UUID || insert.ParentID() != "" ||
		insert.TraceID() == callerTrace {
		t.Errorf("insert: sona %v, parent %q (a request without traceparent starts a trace)", insert.Attr("memoria.sona.uuid"), insert.ParentID())
	}
	one("POST /sonas")
	one("GET /ipfs/{path...}")
	if nf := one("GET"); nf.Attr("http.response.status_code").GetIntValue() != 404 || nf.Status.GetCode() != tracepb.Status_STATUS_CODE_UNSET ||
		nf.Attr("http.route") != nil {
		t.Errorf("unmatched route: status %v, span status %v, route %v", nf.Attr("http.response.status_code"), nf.Status, nf.Attr("http.route"))
	}
	mcpReq, tool := one("POST /mcp"), one("tools/call recall")
	if tool.ParentID() != mcpReq.SpanID() || tool.TraceID() != mcpReq.TraceID() || tool.Attr("gen_ai.tool.name").GetStringValue() != "recall" {
		t.Errorf("MCP tool span: parent %s (request %s), tool %v", tool.ParentID(), mcpReq.SpanID(), tool.Attr("gen_ai.tool.name"))
	}
	if tool.Attr("memoria.sona.uuid").GetStringValue() != sona.UUID {
		t.Errorf("the MCP tool span does not name the sona: %v", tool.Attributes)
	}

	// The request's log line carries its span's ids.
	var found bool
	for _, l := range logLines(t, p.logs, "request") {
		if l["path"] == "/sona/"+sona.UUID+"/recall" {
			found = true
			if l["trace_id"] != callerTrace || l["span_id"] != recall.SpanID() {
				t.Errorf("log line %v; want trace %s span %s", l, callerTrace, recall.SpanID())
			}
		}
	}
	if !found {
		t.Error("no request log line for the recall")
	}
	if l := logLines(t, p.logs, "mcp request"); len(l) != 1 || l[0]["span_id"] != tool.SpanID() {
		t.Errorf("mcp log lines %v; want the tool span %s", l, tool.SpanID())
	}
}

// TestTracingChat: a chat through the real server reaches the collector
// as its request's span with the advance under it, a span per step, the
// recall's stages under the recall, and the group commits that made the
// two memories durable linked to the appends.
func TestTracingChat(t *testing.T) {
	c := otlptest.New(t)
	p := openTraced(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": c.URL})
	resp, body := p.do(t, "POST", "/sonas", `{"name":"bob"}`)
	var sona struct{ UUID string }
	if resp.StatusCode != 201 || json.Unmarshal(body, &sona) != nil {
		t.Fatalf("create sona: %d %s", resp.StatusCode, body)
	}
	resp, body = p.do(t, "POST", "/sona/"+sona.UUID+"/chat", `{"content":"I keep my bicycle in the blue shed"}`, "traceparent", callerParent)
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
	if err := p.app.Tracing.Provider.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// in the order they started (the input's append ends after the steps
	// its commit overlaps)
	children := func(parent otlptest.Span) []string {
		var spans []otlptest.Span
		for _, s := range c.Spans() {
			if s.ParentID() == parent.SpanID() && s.TraceID() == parent.TraceID() {
				spans = append(spans, s)
			}
		}
		slices.SortStableFunc(spans, func(a, b otlptest.Span) int { return cmp.Compare(a.StartTimeUnixNano, b.StartTimeUnixNano) })
		var out []string
		for _, s := range spans {
			out = append(out, s.Name)
		}
		return out
	}
	chat := c.Named("POST /sona/{uuid}/chat")
	if len(chat) != 1 || chat[0].TraceID() != callerTrace {
		t.Fatalf("chat spans %v", chat)
	}
	if got := children(chat[0]); fmt.Sprint(got) != "[advance]" {
		t.Fatalf("under the request: %v", got)
	}
	advance := c.Named("advance")[0]
	if got := fmt.Sprint(children(advance)); got != "[embed append recall tiers chat embed append]" {
		t.Fatalf("the advance's steps: %s", got)
	}
	recall := c.Named("recall")[0]
	if got := fmt.Sprint(children(recall)); !strings.Contains(got, "recall.dense") || !strings.Contains(got, "recall.bm25") ||
		!strings.Contains(got, "recall.fusion") || !strings.Contains(got, "recall.select") {
		t.Errorf("the recall's stages: %s", got)
	}
	appends := map[string]bool{}
	for _, s := range c.Named("append") {
		if s.ParentID() == advance.SpanID() {
			appends[s.SpanID()] = false
		}
	}
	for _, s := range c.Named("store.commit") {
		if s.ParentID() != "" {
			t.Errorf("a group commit with a parent")
		}
		for _, l := range s.Links {
			if _, ok := appends[fmt.Sprintf("%x", l.SpanId)]; ok {
				appends[fmt.Sprintf("%x", l.SpanId)] = true
			}
		}
	}
	if len(appends) != 2 {
		t.Fatalf("%d appends", len(appends))
	}
	for id, linked := range appends {
		if !linked {
			t.Errorf("append %s: no group commit links to it", id)
		}
	}
}

// TestTracingOffByDefault: without an endpoint, or with the SDK disabled,
// no tracer provider runs, no collector hears anything (even at Close,
// which flushes), and log lines carry no trace ids even when the caller
// sends a traceparent.
func TestTracingOffByDefault(t *testing.T) {
	c := otlptest.New(t)
	for _, vars := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": c.URL, "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": c.URL, "OTEL_TRACES_EXPORTER": "none"},
	} {
		p := openTraced(t, vars)
		if p.app.Tracing != nil {
			t.Errorf("%v: tracing is on", vars)
		}
		if resp, body := p.do(t, "POST", "/sonas", `{"name":"bob"}`, "traceparent", callerParent); resp.StatusCode != 201 {
			t.Fatalf("%v: %d %s", vars, resp.StatusCode, body)
		}
		if err := p.close(); err != nil {
			t.Fatal(err)
		}
		lines := logLines(t, p.logs, "request")
		if len(lines) != 1 {
			t.Fatalf("%v: request lines %v", vars, lines)
		}
		if _, ok := lines[0]["trace_id"]; ok {
			t.Errorf("%v: a trace id in the log while tracing is off: %v", vars, lines[0])
		}
	}
	if n := len(c.Requests()); n != 0 {
		t.Errorf("the collector got %d requests with tracing off", n)
	}
}

// TestTracingBadConfig: an OTEL_* value Memoria cannot honour stops Open
// with an error naming it, before anything is written.
func TestTracingBadConfig(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	log, flush := NewLogger(cfg.Log, io.Discard)
	defer flush()
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
	_, err := Open(context.Background(), cfg, log, Options{Getenv: func(k string) string { return vars[k] }})
	if !errors.Is(err, otlp.ErrConfig) || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Fatalf("Open: %v", err)
	}
	if _, err := os.Stat(cfg.DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the data directory was made: %v", err)
	}
}

// BenchmarkRequestTracing is the cost of tracing a request: GET /healthz
// and POST /sona/{uuid}/recall served in process (no network), with
// tracing off and exporting to a collector on loopback.
//
//	go test ./internal/app -run '^$' -bench RequestTracing -count 5
func BenchmarkRequestTracing(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		vars := map[string]string{}
		if mode == "on" {
			vars["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlptest.New(b).URL
		}
		cfg := config.Default()
		cfg.DataDir = b.TempDir()
		cfg.Evaluation.Mode = "off"
		log, flush := NewLogger(cfg.Log, io.Discard)
		a, err := Open(context.Background(), cfg, log, Options{Getenv: func(k string) string { return vars[k] }})
		if err != nil {
			b.Fatal(err)
		}
		serve := func(method, path, body string) int {
			req := httptest.NewRequest(method, "http://127.0.0.1:7777"+path, strings.NewReader(body))
			req.Header.Set("traceparent", callerParent)
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			w := httptest.NewRecorder()
			a.API.ServeHTTP(w, req)
			return w.Code
		}
		rec := httptest.NewRecorder()
		a.API.ServeHTTP(rec, httptest.NewRequest("POST", "http://127.0.0.1:7777/sonas", strings.NewReader(`{"name":"bob"}`)))
		var sona struct{ UUID string }
		if err := json.Unmarshal(rec.Body.Bytes(), &sona); err != nil || sona.UUID == "" {
			b.Fatalf("create sona: %s", rec.Body)
		}
		for i := range 50 {
			body := fmt.Sprintf(`{"sona":"bob","data":{"kind":"text","content":"memory %d about the %s"}}`, i, strings.Repeat("shed ", i%7+1))
			if code := serve("POST", "/memories", body); code != 201 && code != 200 {
				b.Fatalf("insert: %d", code)
			}
		}
		b.Run("healthz/"+mode, func(b *testing.B) {
			for b.Loop() {
				if code := serve("GET", "/healthz", ""); code != 200 {
					b.Fatal(code)
				}
			}
		})
		b.Run("recall/"+mode, func(b *testing.B) {
			for b.Loop() {
				if code := serve("POST", "/sona/"+sona.UUID+"/recall", `{"query":"memory number x","k":5}`); code != 200 {
					b.Fatal(code)
				}
			}
		})
		a.Close()
		flush()
	}
}
