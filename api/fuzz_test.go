package api_test

// Fuzz targets of what clients send: every JSON body of the REST API, the
// JSON import, and the MCP tools' arguments. Each runs against a real
// server (store, actors, offline models) in the fuzzing process and
// checks what every answer must keep: no 5xx, the JSON error shape, and
// nothing written by a refused request.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
)

// fuzzApp opens an app for a fuzz target, with one sona "alice" holding a
// memory, and a backbone memory.
func fuzzApp(f *testing.F) (*app.App, string, string) {
	cfg := config.Default()
	cfg.DataDir = f.TempDir()
	cfg.Evaluation.Mode = "off"
	cfg.Store.MaxBlockBytes = 64 << 10
	a, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler), app.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { a.Close() })
	h := a.API
	call := func(method, path, body string) map[string]any {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, jsonRequest(method, path, body))
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code >= 300 {
			f.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		return out
	}
	id := call("POST", "/sonas", `{"name":"alice"}`)["uuid"].(string)
	mem := call("POST", "/memories", `{"sona":"alice","data":{"kind":"text","content":"alice keeps the red key"}}`)["cid"].(string)
	call("POST", "/backbone", `{"agent_id":"ops","content":"the team values candour"}`)
	return a, id, mem
}

// jsonRequest is a request to the in-process server, as a local client
// sends it.
func jsonRequest(method, path, body string) *http.Request {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = "localhost"
	req.Header.Set("Content-Type", "application/json")
	return req
}

// checkAnswer checks one answer of the server to a fuzzed request: below
// 500, JSON, an error body on errors, and nothing written by an error.
func checkAnswer(t *testing.T, a *app.App, before [2]int64, rec *httptest.ResponseRecorder, what string) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("%s: %d %s", what, rec.Code, rec.Body)
	}
	if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") && rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s: Content-Type %q: %s", what, rec.Header().Get("Content-Type"), rec.Body)
	}
	if rec.Code < 400 {
		return
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("%s: error body %q", what, rec.Body)
	}
	if sonas, mems := a.Self.Counts(); sonas != before[0] || mems != before[1] {
		t.Fatalf("%s: refused (%d) but wrote: sonas %d→%d, memories %d→%d", what, rec.Code, before[0], sonas, before[1], mems)
	}
}

func counts(a *app.App) [2]int64 {
	s, m := a.Self.Counts()
	return [2]int64{s, m}
}

// FuzzRESTBodies sends fuzzed JSON bodies to every route that reads one.
func FuzzRESTBodies(f *testing.F) {
	a, id, mem := fuzzApp(f)
	routes := []string{
		"/sonas", "/memories", "/sona/" + id + "/chat", "/sona/" + id + "/query", "/sona/" + id + "/recall",
		"/backbone", "/backbone/contribute", "/conflicts/c1/resolve",
	}
	seeds := []string{
		`{"name":"bob"}`,
		`{"sona":"alice","data":{"kind":"text","content":"hello"}}`,
		`{"sona":"alice","kind":"fact","labels":{"a":"b"},"agent_id":"x","data":{"kind":"other","name":"Bo","content":"hi"},"edges":[{"target":{"/":"` + mem + `"},"weight":0.5}]}`,
		`{"sona":"alice","data":{"kind":"self","name":"m","parts":[{"content":"x","model":"y"}],"stop_reason":"endTurn"},"timestamp":12}`,
		`{"sona":"alice","data":{"kind":"file","content":{"/":"bafkqaaa"}}}`,
		`{"content":"what is the key?","k":3,"budget_chars":100,"scope":"sona","agent_id":"a"}`,
		`{"query":"key","explain":true,"as_of":1,"include_hidden":true}`,
		`{"agent_id":"a","content":"x","concept_key":"k","stakes":"high"}`,
		`{"content":"resolved","agent_id":"ops"}`,
		`{"content":"x","agent_id":"\u0000"}`,
		`[]`, `null`, `{"sona":1}`, `{"content":"` + strings.Repeat("é", 300) + `"}`,
	}
	for i, s := range seeds {
		for r := range routes {
			if i%len(routes) == r || r == 1 {
				f.Add(uint8(r), []byte(s))
			}
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := routes[int(route)%len(routes)]
		before := counts(a)
		rec := httptest.NewRecorder()
		a.API.ServeHTTP(rec, jsonRequest("POST", path, string(body)))
		checkAnswer(t, a, before, rec, "POST "+path)
	})
}

// FuzzImportJSON sends fuzzed JSON exports to POST /import: what is
// refused writes nothing.
func FuzzImportJSON(f *testing.F) {
	a, _, _ := fuzzApp(f)
	rec := httptest.NewRecorder()
	a.API.ServeHTTP(rec, jsonRequest("GET", "/export?all=1", ""))
	if rec.Code != 200 {
		f.Fatalf("export: %d %s", rec.Code, rec.Body)
	}
	export := rec.Body.String()
	f.Add([]byte(export))
	f.Add([]byte(strings.Replace(export, `"alice"`, `"alice2"`, 1)))
	f.Add([]byte(`{"format":"memoria-export/1","sonas":[],"memories":[]}`))
	f.Add([]byte(`{"format":"memoria-export/1","sonas":[{"uuid":"00000000-0000-4000-8000-000000000001","name":"x","chain":[{"memory":{"/":"bafkqaaa"}}]}]}`))
	f.Add([]byte(`{"format":"other"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		before := counts(a)
		rec := httptest.NewRecorder()
		a.API.ServeHTTP(rec, jsonRequest("POST", "/import", string(body)))
		checkAnswer(t, a, before, rec, "POST /import")
	})
}

// FuzzMCPTools calls every MCP tool with fuzzed JSON arguments: a refused
// call is a tool error or an invalid-params error, writes nothing, and
// the server keeps answering.
func FuzzMCPTools(f *testing.F) {
	a, id, mem := fuzzApp(f)
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := a.API.MCPServer(api.Local).Connect(ctx, st, nil)
	if err != nil {
		f.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fuzz", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { cs.Close(); ss.Wait() })
	tools := []string{"recall", "insert", "query", "chat", "list_sonas", "create_sona"}
	for _, s := range []string{
		`{"sona":"alice","query":"key","k":3}`,
		`{"sona":"` + id + `","content":"a fact","kind":"fact","edges":[{"target":"` + mem + `","weight":1}]}`,
		`{"sona":"alice","file":{"base64":"aGk=","mime_type":"text/plain","name":"a.txt"}}`,
		`{"sona":"alice","content":"hi","agent_id":"a","scope":"sona"}`,
		`{"limit":2}`, `{"name":"carol"}`, `{}`, `{"sona":"alice","content":"x","agent_id":"\u0000"}`,
	} {
		for i := range tools {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, tool uint8, args []byte) {
		var m map[string]any
		if json.Unmarshal(args, &m) != nil {
			return // the SDK's client sends only JSON objects
		}
		name := tools[int(tool)%len(tools)]
		before := counts(a)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: m})
		refused := err != nil || res.IsError
		if err != nil && !strings.Contains(err.Error(), "invalid") {
			t.Fatalf("%s %s: protocol error %v", name, args, err)
		}
		if refused {
			if c := counts(a); c != before {
				t.Fatalf("%s %s: refused but wrote: %v → %v (%v)", name, args, before, c, fmt.Sprint(err, toolText(res)))
			}
		}
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatalf("the server stopped answering after %s %s: %v", name, args, err)
		}
	})
}
