package api_test

// MCP tool validation through the Go SDK's client over an in-memory
// transport to the real server (store, actors): every tool's bad input is
// a tool error with a clear message, nothing is written, and the server
// keeps answering.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
)

// mcpLocal connects a client to the harness's MCP server as the local
// principal (what `memoria mcp` serves over stdio).
func mcpLocal(t *testing.T, h *harness) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := h.app.API.MCPServer(api.Local).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	var out map[string]any
	if res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(raw, &out)
	}
	return res, out
}

func TestMCPToolValidation(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.Evaluation.Mode = "off"
		c.Server.MaxK = 20
		c.Server.MaxBudgetChars = 5000
		c.Server.MaxListLimit = 10
		c.Store.MaxBlockBytes = 200
	})
	cs := mcpLocal(t, h)
	res, sona := callTool(t, cs, "create_sona", map[string]any{"name": "valid"})
	if res.IsError {
		t.Fatalf("create_sona: %s", toolText(res))
	}
	id := sona["uuid"].(string)
	const missing = "00000000-0000-4000-8000-000000000000"

	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"create_sona", map[string]any{}, "name"},
		{"create_sona", map[string]any{"name": ""}, "invalid"},
		{"create_sona", map[string]any{"name": 7}, "name"},
		{"create_sona", map[string]any{"name": "valid"}, "exists"}, // names are unique
		{"create_sona", map[string]any{"name": "valid", "allow_duplicate": "yes"}, "allow_duplicate"},
		{"list_sonas", map[string]any{"limit": 11}, "limit must be within 1..10"},
		{"list_sonas", map[string]any{"limit": -1}, "limit must be within"},
		{"recall", map[string]any{"query": "x"}, "sona"},
		{"recall", map[string]any{"sona": id}, "query"},
		{"recall", map[string]any{"sona": id, "query": " "}, "query must not be empty"},
		{"recall", map[string]any{"sona": id, "query": "x", "k": 21}, "k must be within 0..20"},
		{"recall", map[string]any{"sona": id, "query": "x", "k": -1}, "k must be within"},
		{"recall", map[string]any{"sona": id, "query": "x", "k": 1 << 40}, "k must be within"},
		{"recall", map[string]any{"sona": id, "query": "x", "budget_chars": 5001}, "budget_chars must be within 0..5000"},
		{"recall", map[string]any{"sona": id, "query": "x", "scope": "all"}, "scope: enum"},
		{"recall", map[string]any{"sona": missing, "query": "x"}, "not_found"},
		{"recall", map[string]any{"sona": "", "query": "x"}, "sona is required"},
		{"recall", map[string]any{"sona": id, "query": "x", "extra": 1}, "extra"},
		{"insert", map[string]any{"sona": id}, "content must not be empty"},
		{"insert", map[string]any{"sona": id, "content": "  "}, "content must not be empty"},
		{"insert", map[string]any{"sona": missing, "content": "x"}, "not_found"},
		{"insert", map[string]any{"sona": id, "content": "x", "kind": "gossip"}, "kind"},
		{"insert", map[string]any{"sona": id, "content": "x", "edges": []any{map[string]any{"target": "zzz", "weight": 1}}}, "malformed CID"},
		{"insert", map[string]any{"sona": id, "content": "x", "file": map[string]any{"base64": "aGk="}}, "not both"},
		{"insert", map[string]any{"sona": id, "file": map[string]any{"base64": "***"}}, "not valid base64"},
		{"insert", map[string]any{"sona": id, "file": map[string]any{"base64": strings.Repeat("QUFB", 80)}}, "exceeds the block limit of 200 bytes"},
		{"insert", map[string]any{"sona": id, "content": "x", "agent_id": strings.Repeat("a", 10000)}, "agent"},
		{"query", map[string]any{"sona": id}, "content"},
		{"query", map[string]any{"sona": id, "content": ""}, "content must not be empty"},
		{"query", map[string]any{"sona": id, "content": "x", "k": 21}, "k must be within"},
		{"query", map[string]any{"sona": missing, "content": "x"}, "not_found"},
		{"chat", map[string]any{"sona": id, "content": "\n"}, "content must not be empty"},
		{"chat", map[string]any{"sona": id, "content": "x", "budget_chars": -5}, "budget_chars must be within"},
		{"chat", map[string]any{"sona": id, "content": "x", "scope": "everyone"}, "scope: enum"},
		{"chat", map[string]any{"sona": "not a sona", "content": "x"}, "not_found"},
		// Every field is checked before the input is stored (issue 13 #1).
		{"chat", map[string]any{"sona": id, "content": "x", "agent_id": "\x00"}, "agent_id"},
		{"chat", map[string]any{"sona": id, "content": "x", "agent_id": strings.Repeat("a", 201)}, "agent_id"},
		{"chat", map[string]any{"sona": id, "content": "x", "name": "\u202eevil"}, "name"},
	}
	for _, c := range cases {
		res, _ := callTool(t, cs, c.tool, c.args)
		if !res.IsError {
			t.Errorf("%s %v: want a tool error, got %s", c.tool, c.args, toolText(res))
			continue
		}
		if msg := toolText(res); !strings.Contains(msg, c.want) {
			t.Errorf("%s %v: error %q does not mention %q", c.tool, c.args, msg, c.want)
		}
	}

	// Nothing was written by the refused calls, and the server still works.
	res, out := callTool(t, cs, "list_sonas", map[string]any{})
	if res.IsError {
		t.Fatal(toolText(res))
	}
	sonas := out["sonas"].([]any)
	if len(sonas) != 1 || sonas[0].(map[string]any)["length"].(float64) != 0 {
		t.Fatalf("after refused calls: %v", sonas)
	}
	if _, mems := h.app.Self.Counts(); mems != 0 {
		t.Fatalf("refused calls stored %d memories", mems)
	}
	res, out = callTool(t, cs, "insert", map[string]any{"sona": "valid", "content": "a valid memory", "kind": "fact"})
	if res.IsError || out["seq"].(float64) != 0 {
		t.Fatalf("insert after errors: %s %v", toolText(res), out)
	}
	// A second "valid" is refused above; asked for, it is made.
	if res, twin := callTool(t, cs, "create_sona", map[string]any{"name": "valid", "allow_duplicate": true}); res.IsError || twin["uuid"] == id {
		t.Fatalf("create_sona asking for a duplicate name: %s", toolText(res))
	}
}

func TestMCPResources(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Evaluation.Mode = "off" })
	cs := mcpLocal(t, h)
	ctx := context.Background()
	tpl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, rt := range tpl.ResourceTemplates {
		got[rt.URITemplate] = rt.MIMEType
	}
	want := map[string]string{"ipfs://{cid}": "application/vnd.ipld.raw", "memoria://memory/{cid}": "application/json",
		"memoria://file/{cid}": "", "memoria://sona/{uuid}": "application/json"}
	for k, v := range want {
		if mt, ok := got[k]; !ok || mt != v {
			t.Errorf("template %s: got %q (present %v), want %q", k, mt, ok, v)
		}
	}
	_, sona := callTool(t, cs, "create_sona", map[string]any{"name": "res"})
	_, ins := callTool(t, cs, "insert", map[string]any{"sona": sona["uuid"], "file": map[string]any{"base64": "AAECAw==", "mime_type": "application/octet-stream", "name": "b.bin"}})
	r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "memoria://file/" + ins["cid"].(string)})
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Contents[0]; c.MIMEType != "application/octet-stream" || string(c.Blob) != "\x00\x01\x02\x03" || c.Text != "" {
		t.Fatalf("binary file resource: %+v", c)
	}
	for _, uri := range []string{
		"memoria://memory/not-a-cid", "memoria://sona/not-a-uuid", "ipfs://",
	} {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err == nil || !strings.Contains(err.Error(), "invalid") {
			t.Errorf("%s: want an invalid-params error, got %v", uri, err)
		}
	}
	// A raw block's CID is not a memory.
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "memoria://memory/bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"})
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("raw CID as a memory: %v", err)
	}
}

// lockedBuffer collects log output written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines are the JSON log lines of the MCP component so far.
func (l *lockedBuffer) mcpLines(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["component"] == "mcp" {
			out = append(out, rec)
		}
	}
	return out
}

// A stateless MCP request over HTTP logs nothing at INFO (the SDK's
// session lines were three a request) and one DEBUG line at debug level.
func TestMCPHTTPLogging(t *testing.T) {
	for _, level := range []string{"info", "debug"} {
		t.Run(level, func(t *testing.T) {
			var buf lockedBuffer
			log, flush := app.NewLogger(config.Log{Level: level, Format: "json"}, &buf)
			cfg := config.Default()
			cfg.DataDir = t.TempDir()
			cfg.Evaluation.Mode = "off"
			a, err := app.Open(context.Background(), cfg, log, app.Options{})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(a.API)
			defer func() { srv.Close(); a.Close(); flush() }()
			before := len(buf.mcpLines(t))
			for i, body := range []string{
				`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
				`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_sonas","arguments":{}}}`,
			} {
				req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("request %d: %d", i, resp.StatusCode)
				}
			}
			lines := buf.mcpLines(t)[before:]
			want := map[string]int{"info": 0, "debug": 2}[level]
			if len(lines) != want {
				t.Fatalf("%d MCP log lines at %s, want %d: %v", len(lines), level, want, lines)
			}
			if level == "debug" {
				if lines[0]["method"] != "tools/list" || lines[1]["tool"] != "list_sonas" || lines[1]["msg"] != "mcp request" {
					t.Fatalf("debug lines: %v", lines)
				}
			}
		})
	}
}

// MCP's insert and chat take a request id as REST does: a call sent again
// with it is answered with the first one's append, never appended twice.
func TestMCPRequestIDs(t *testing.T) {
	h := newHarness(t, quiet)
	cs := mcpLocal(t, h)
	id := h.newSona("idem")
	args := map[string]any{"sona": id, "content": "written once", "request_id": "ins-1"}
	res1, out1 := callTool(t, cs, "insert", args)
	res2, out2 := callTool(t, cs, "insert", args)
	if res1.IsError || res2.IsError || out1["cid"] != out2["cid"] || out1["seq"] != out2["seq"] {
		t.Fatalf("insert twice with one request id: %v / %v", out1, out2)
	}
	if n := h.sonaLength(id); n != 1 {
		t.Fatalf("the sona has %d ACTs after the same insert twice, want 1", n)
	}
	chat := map[string]any{"sona": id, "content": "hello there", "request_id": "step-1"}
	res1, out1 = callTool(t, cs, "chat", chat)
	res2, out2 = callTool(t, cs, "chat", chat)
	if res1.IsError || res2.IsError || out1["response_cid"] != out2["response_cid"] || out1["response_cid"] == nil {
		t.Fatalf("chat twice with one request id: %v / %v", out1, out2)
	}
	if n := h.sonaLength(id); n != 3 {
		t.Fatalf("the sona has %d ACTs after the same chat step twice, want 3", n)
	}
	if res, _ := callTool(t, cs, "query", map[string]any{"sona": id, "content": "hi", "request_id": "q"}); !res.IsError {
		t.Fatal("a query with a request id was taken")
	}
	if res, _ := callTool(t, cs, "insert", map[string]any{"sona": id, "content": "x", "request_id": strings.Repeat("x", 300)}); !res.IsError {
		t.Fatal("an over-long request id was taken")
	}
}
