package api_test

// Auth: the matrix of every route × token (none, invalid, read, write,
// admin, and read/write tokens limited to sona A) against a real server
// with two sonas, A and B; the same for the MCP tools and resources; the
// exposure rule; the limits.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
)

// authWorld is a server with tokens and two populated sonas.
type authWorld struct {
	*harness
	a, b             string // sona uuids
	memA, memB       string // a memory of each
	fileMemA, rawCID string // a file memory of A, and its raw block
	backboneMem      string
}

// principals of the matrix: token name → (token, scope, limited to A).
type principal struct {
	name   string
	token  string
	scope  int // 0 none, 1 read, 2 write, 3 admin; -1 invalid token
	scoped bool
}

var principals = []principal{
	{"none", "", 0, false},
	{"invalid", "mem_not-a-token", -1, false},
	{"reader", "mem_reader", 1, false},
	{"writer", "mem_writer", 2, false},
	{"admin", "mem_admin", 3, false},
	{"reader-A", "mem_reader-a", 1, true},
	{"writer-A", "mem_writer-a", 2, true},
	{"admin-A", "mem_admin-a", 3, true},
}

func newAuthWorld(t *testing.T) *authWorld {
	t.Helper()
	dir := t.TempDir()
	base := config.Default()
	base.DataDir = dir
	base.Evaluation.Mode = "off"

	// Populate without tokens, then reopen with tokens naming sona A.
	w := &authWorld{}
	{
		a, err := app.Open(context.Background(), base, slog.New(slog.DiscardHandler), app.Options{})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(a.API)
		h := &harness{t: t, app: a, url: srv.URL, hc: srv.Client()}
		w.a = str(t, h.post("/sonas", map[string]any{"name": "alpha"}).obj(t, 201)["uuid"])
		w.b = str(t, h.post("/sonas", map[string]any{"name": "beta"}).obj(t, 201)["uuid"])
		w.memA = str(t, h.post("/memories", map[string]any{"sona": w.a, "data": map[string]any{"kind": "text", "content": "alpha keeps the red key"}}).obj(t, 201)["cid"])
		w.memB = str(t, h.post("/memories", map[string]any{"sona": w.b, "data": map[string]any{"kind": "text", "content": "beta keeps the secret red code 4711"}}).obj(t, 201)["cid"])
		w.rawCID = str(t, h.do("POST", "/files", []byte("alpha's file")).obj(t, 201)["cid"])
		w.fileMemA = str(t, h.post("/memories", map[string]any{"sona": w.a, "data": map[string]any{"kind": "file", "name": "a.txt", "mimeType": "text/plain", "content": map[string]any{"/": w.rawCID}}}).obj(t, 201)["cid"])
		w.backboneMem = str(t, h.post("/backbone", map[string]any{"agent_id": "ops", "content": "the team values candour"}).obj(t, 201)["cid"])
		srv.Close()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := base
	scopes := []string{"", "read", "write", "admin"}
	for _, p := range principals {
		if p.scope <= 0 {
			continue
		}
		tok := config.Token{Name: p.name, Hash: api.HashToken(p.token), Scopes: []string{scopes[p.scope]}}
		if p.scoped {
			tok.Sonas = []string{w.a}
		}
		cfg.Server.Auth.Tokens = append(cfg.Server.Auth.Tokens, tok)
	}
	a, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// What a cluster member mounts (package cluster's status), here a
	// stand-in: the policy is the API's.
	a.API.Mux().Handle("GET /cluster", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	srv := httptest.NewServer(a.API)
	t.Cleanup(func() {
		srv.Close()
		if err := a.Close(); err != nil {
			t.Errorf("app.Close: %v", err)
		}
	})
	w.harness = &harness{t: t, app: a, url: srv.URL, hc: srv.Client()}
	return w
}

// as sends a request with p's token.
func (w *authWorld) as(p principal, method, path string, body any) response {
	w.t.Helper()
	if p.token == "" {
		return w.do(method, path, body)
	}
	return w.do(method, path, body, "Authorization", "Bearer "+p.token)
}

// Route relations to sonas, for the matrix.
const (
	relPublic = iota // no token needed
	relGlobal        // not tied to a sona: refused to sona-scoped tokens
	relA             // about sona A (allowed to the A-scoped tokens)
	relB             // about sona B (refused to the A-scoped tokens)
	relAny           // bound, but open to sona-scoped tokens (uploads, filtered lists, /mcp)
)

type routeCase struct {
	pattern string // the policy it exercises
	method  string
	path    string
	body    any
	scope   int // needed: 0 none, 1 read, 2 write, 3 admin
	rel     int
	ok      int // status when allowed (0: any status below 500 but 401/403)
}

func TestAuthMatrix(t *testing.T) {
	w := newAuthWorld(t)
	text := func(sona, content string) map[string]any {
		return map[string]any{"sona": sona, "data": map[string]any{"kind": "text", "content": content}}
	}
	mcpInit := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	cases := []routeCase{
		{"GET /healthz", "GET", "/healthz", nil, 0, relPublic, 200},
		{"GET /ui", "GET", "/ui", nil, 0, relPublic, 200}, // redirected to /ui/
		{"GET /ui/{file...}", "GET", "/ui/js/main.js", nil, 0, relPublic, 200},
		{"GET /metrics", "GET", "/metrics", nil, 3, relGlobal, 200},
		{"GET /memory/{cid}", "GET", "/memory/" + w.memA, nil, 1, relA, 200},
		{"GET /memory/{cid}", "GET", "/memory/" + w.memB, nil, 1, relB, 200},
		{"GET /memory/{cid}", "GET", "/memory/" + w.backboneMem, nil, 1, relA, 200}, // the backbone is every sona's
		{"GET /memory/{cid}/evaluation", "GET", "/memory/" + w.memA + "/evaluation", nil, 1, relA, 0},
		{"GET /memory/{cid}/evaluation", "GET", "/memory/" + w.memB + "/evaluation", nil, 1, relB, 0},
		{"GET /memory/{cid}/links", "GET", "/memory/" + w.memA + "/links", nil, 1, relA, 200},
		{"GET /memory/{cid}/links", "GET", "/memory/" + w.memB + "/links", nil, 1, relB, 200},
		{"GET /memories/list", "GET", "/memories/list", nil, 1, relGlobal, 200},
		{"GET /memories/list", "GET", "/memories/list?sona=" + w.a, nil, 1, relA, 200},
		{"GET /memories/list", "GET", "/memories/list?sona=" + w.b, nil, 1, relB, 200},
		{"GET /memories/list", "GET", "/memories/list?sona=beta", nil, 1, relB, 200},
		{"POST /memories", "POST", "/memories", text(w.a, "written into alpha"), 2, relA, 0},
		{"POST /memories", "POST", "/memories", text(w.b, "written into beta"), 2, relB, 0},
		{"POST /memories", "POST", "/memories", text("beta", "written into beta by name"), 2, relB, 0},
		{"GET /sona/{uuid}", "GET", "/sona/" + w.a, nil, 1, relA, 200},
		{"GET /sona/{uuid}", "GET", "/sona/" + w.b, nil, 1, relB, 200},
		{"GET /sona/{uuid}", "GET", "/sona/alpha", nil, 1, relA, 200}, // by name
		{"GET /sona/{uuid}", "GET", "/sona/beta", nil, 1, relB, 200},
		{"GET /sona/{uuid}/tiers", "GET", "/sona/" + w.a + "/tiers", nil, 1, relA, 200},
		{"GET /sona/{uuid}/tiers", "GET", "/sona/" + w.b + "/tiers", nil, 1, relB, 200},
		{"GET /sonas/list", "GET", "/sonas/list", nil, 1, relAny, 200},
		{"POST /sonas", "POST", "/sonas", map[string]any{"name": "gamma", "allow_duplicate": true}, 2, relGlobal, 201},
		{"POST /sona/{uuid}/chat", "POST", "/sona/" + w.a + "/chat", map[string]any{"content": "what key?"}, 2, relA, 200},
		{"POST /sona/{uuid}/chat", "POST", "/sona/" + w.b + "/chat", map[string]any{"content": "what code?"}, 2, relB, 200},
		{"POST /sona/{uuid}/query", "POST", "/sona/" + w.a + "/query", map[string]any{"content": "what key?"}, 1, relA, 200},
		{"POST /sona/{uuid}/query", "POST", "/sona/" + w.b + "/query", map[string]any{"content": "what code?"}, 1, relB, 200},
		{"POST /sona/{uuid}/recall", "POST", "/sona/" + w.a + "/recall", map[string]any{"query": "red"}, 1, relA, 200},
		{"POST /sona/{uuid}/recall", "POST", "/sona/" + w.b + "/recall", map[string]any{"query": "red"}, 1, relB, 200},
		{"POST /files", "POST", "/files", []byte("an upload"), 2, relAny, 201},
		{"GET /file/{cid}", "GET", "/file/" + w.fileMemA, nil, 1, relA, 200},
		{"GET /file/{cid}", "GET", "/file/" + w.rawCID, nil, 1, relGlobal, 200}, // a raw block: no sona
		{"GET /ipfs/", "GET", "/ipfs/" + w.memA + "?format=raw", nil, 1, relGlobal, 200},
		{"GET /ipfs/", "GET", "/ipfs/" + w.memB + "?format=raw", nil, 1, relGlobal, 200},
		{"POST /admin/heartbeat", "POST", "/admin/heartbeat", nil, 3, relGlobal, 200},
		{"POST /admin/compact", "POST", "/admin/compact", nil, 3, relGlobal, 200},
		{"POST /admin/gc", "POST", "/admin/gc", nil, 3, relGlobal, 200},
		{"GET /admin/storage", "GET", "/admin/storage", nil, 3, relGlobal, 200},
		{"POST /admin/backup", "POST", "/admin/backup", nil, 3, relGlobal, 200},
		{"GET /insights", "GET", "/insights", nil, 1, relGlobal, 200},
		{"POST /backbone", "POST", "/backbone", map[string]any{"agent_id": "ops", "content": "ship small changes"}, 3, relGlobal, 0},
		{"GET /backbone", "GET", "/backbone", nil, 1, relGlobal, 200},
		{"POST /backbone/contribute", "POST", "/backbone/contribute", map[string]any{"agent_id": "x", "concept_key": "k", "content": "c"}, 2, relGlobal, 200},
		{"GET /backbone/pending", "GET", "/backbone/pending", nil, 1, relGlobal, 200},
		{"GET /conflicts", "GET", "/conflicts", nil, 1, relGlobal, 200},
		{"POST /conflicts/{id}/resolve", "POST", "/conflicts/nope/resolve", map[string]any{"content": "x", "agent_id": "a"}, 3, relGlobal, 404},
		{"GET /export", "GET", "/export?sona=" + w.a, nil, 3, relGlobal, 200},
		{"POST /import", "POST", "/import", map[string]any{}, 3, relGlobal, 400},
		{"GET /anchors", "GET", "/anchors", nil, 1, relGlobal, 200},
		{"GET /cluster", "GET", "/cluster", nil, 1, relGlobal, 200},
		{"POST /forget", "POST", "/forget", map[string]any{"cids": []string{w.memA}, "dry_run": true}, 2, relA, 200},
		{"POST /forget", "POST", "/forget", map[string]any{"cids": []string{w.memB}, "dry_run": true}, 2, relB, 200},
		{"POST /forget", "POST", "/forget", map[string]any{"sona": "beta", "dry_run": true}, 2, relB, 200},
		{"GET /forgotten", "GET", "/forgotten", nil, 3, relGlobal, 200},
		{"/mcp", "POST", "/mcp", mcpInit, 1, relAny, 200},
		{"", "GET", "/no/such/route", nil, 0, relGlobal, 404}, // unknown routes still need a token
	}

	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.pattern] = true
	}
	for _, p := range api.PolicyPatterns() {
		if !covered[p] {
			t.Errorf("route %q has a policy but no case in the auth matrix", p)
		}
	}

	for _, c := range cases {
		for _, p := range principals {
			t.Run(fmt.Sprintf("%s %s as %s", c.method, c.path, p.name), func(t *testing.T) {
				w.t = t
				headers := []string{}
				if c.pattern == "/mcp" {
					headers = append(headers, "Accept", "application/json, text/event-stream")
				}
				if p.token != "" {
					headers = append(headers, "Authorization", "Bearer "+p.token)
				}
				r := w.do(c.method, c.path, c.body, headers...)
				switch want := expect(c, p); want {
				case 401:
					wantError(t, r, 401, "unauthorized")
					if r.header.Get("WWW-Authenticate") == "" {
						t.Fatalf("401 without WWW-Authenticate: %s", r)
					}
				case 403:
					wantError(t, r, 403, "forbidden")
				default:
					if c.ok != 0 && r.status != c.ok {
						t.Fatalf("want %d: %s", c.ok, r)
					}
					if r.status == 401 || r.status == 403 || r.status >= 500 {
						t.Fatalf("want allowed: %s", r)
					}
				}
			})
		}
	}
}

// expect is the status class a principal gets on a route: 401, 403, or 0
// (allowed).
func expect(c routeCase, p principal) int {
	if c.rel == relPublic && c.pattern != "" {
		return 0
	}
	if p.scope <= 0 {
		return 401
	}
	if c.pattern == "" {
		return 0
	}
	if p.scope < c.scope {
		return 403
	}
	if p.scoped && (c.rel == relGlobal || c.rel == relB) {
		return 403
	}
	return 0
}

// A sona-scoped token lists and recalls only its own sona's memories.
func TestSonaScopedTokenSeesOnlyItsSona(t *testing.T) {
	w := newAuthWorld(t)
	readerA := principals[5]
	body := w.as(readerA, "GET", "/sonas/list", nil).obj(t, 200)
	items := body["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["uuid"] != w.a {
		t.Fatalf("sonas/list for an A token: %v", items)
	}
	// Recall across every sona (scope self) is refused; the default recalls in sona scope.
	wantError(t, w.as(readerA, "POST", "/sona/"+w.a+"/recall", map[string]any{"query": "red", "scope": "self"}), 403, "forbidden")
	rec := w.as(readerA, "POST", "/sona/"+w.a+"/recall", map[string]any{"query": "secret red code"}).obj(t, 200)
	for _, m := range rec["memories"].([]any) {
		if c := m.(map[string]any)["cid"]; c == w.memB {
			t.Fatalf("an A token recalled B's memory %s", c)
		}
	}
	// The unscoped reader, recalling in self scope, does reach B's memory:
	// the scoped result above is not empty by accident.
	reader := principals[2]
	rec = w.as(reader, "POST", "/sona/"+w.a+"/recall", map[string]any{"query": "secret red code", "scope": "self"}).obj(t, 200)
	found := false
	for _, m := range rec["memories"].([]any) {
		found = found || m.(map[string]any)["cid"] == w.memB
	}
	if !found {
		t.Fatalf("self-scope recall from A did not reach B's memory: %v", rec)
	}
	// Chat answers from sona A's memories only.
	chat := w.as(principals[6], "POST", "/sona/"+w.a+"/chat", map[string]any{"content": "secret red code"}).obj(t, 200)
	for _, r := range chat["recalled"].([]any) {
		if r.(map[string]any)["cid"] == w.memB {
			t.Fatalf("an A token's chat recalled B's memory")
		}
	}
	// A name no sona has is refused like another sona's: a scoped token
	// learns nothing of the names of sonas it may not use.
	for _, ref := range []string{"beta", "nobody"} {
		wantError(t, w.as(readerA, "POST", "/sona/"+ref+"/recall", map[string]any{"query": "red"}), 403, "forbidden")
	}
	// A memory that does not exist is refused like another sona's.
	wantError(t, w.as(readerA, "GET", "/memory/bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy", nil), 403, "forbidden")
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the Go SDK's client to /mcp with a token.
func (w *authWorld) mcpSession(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: w.url + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token}},
	}, nil)
	if err != nil {
		t.Fatalf("connect as %s: %v", token, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The MCP tools and resources apply the same rules as REST.
func TestMCPAuthMatrix(t *testing.T) {
	w := newAuthWorld(t)
	type toolCase struct {
		name  string
		args  map[string]any
		scope int
		rel   int
	}
	tools := []toolCase{
		{"list_sonas", map[string]any{}, 1, relAny},
		{"create_sona", map[string]any{"name": "delta", "allow_duplicate": true}, 2, relGlobal},
		{"recall", map[string]any{"sona": w.a, "query": "red"}, 1, relA},
		{"recall", map[string]any{"sona": w.b, "query": "red"}, 1, relB},
		{"recall", map[string]any{"sona": "beta", "query": "red"}, 1, relB},
		{"query", map[string]any{"sona": w.a, "content": "red?"}, 1, relA},
		{"query", map[string]any{"sona": w.b, "content": "red?"}, 1, relB},
		{"chat", map[string]any{"sona": w.a, "content": "red?"}, 2, relA},
		{"chat", map[string]any{"sona": w.b, "content": "red?"}, 2, relB},
		{"insert", map[string]any{"sona": w.a, "content": "into alpha over mcp"}, 2, relA},
		{"insert", map[string]any{"sona": w.b, "content": "into beta over mcp"}, 2, relB},
		{"insert", map[string]any{"sona": w.b, "file": map[string]any{"base64": "aGk="}}, 2, relB},
	}
	resources := []struct {
		uri string
		rel int
	}{
		{"memoria://sona/" + w.a, relA},
		{"memoria://sona/" + w.b, relB},
		{"memoria://memory/" + w.memA, relA},
		{"memoria://memory/" + w.memB, relB},
		{"memoria://file/" + w.fileMemA, relA},
		{"memoria://file/" + w.rawCID, relGlobal},
		{"ipfs://" + w.memA, relGlobal},
	}
	for _, p := range principals {
		if p.scope <= 0 {
			continue // refused at the door: the REST matrix and the node harness cover it
		}
		s := w.mcpSession(t, p.token)
		for _, tc := range tools {
			t.Run(fmt.Sprintf("%s as %s %v", tc.name, p.name, tc.args["sona"]), func(t *testing.T) {
				res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.name, Arguments: tc.args})
				if err != nil {
					t.Fatalf("protocol error: %v", err)
				}
				denied := p.scope < tc.scope || p.scoped && (tc.rel == relGlobal || tc.rel == relB)
				msg := toolText(res)
				if denied != res.IsError || denied && !strings.Contains(msg, "forbidden") {
					t.Fatalf("want denied=%v, got isError=%v: %s", denied, res.IsError, msg)
				}
			})
		}
		for _, pc := range []struct {
			name  string
			args  map[string]string
			scope int
			rel   int
		}{
			{"recall_and_answer", map[string]string{"sona": w.a, "question": "red?"}, 1, relA},
			{"recall_and_answer", map[string]string{"sona": w.b, "question": "red?"}, 1, relB},
			{"recall_and_answer", map[string]string{"sona": "beta", "question": "red?"}, 1, relB},
			{"remember", map[string]string{"sona": w.a, "text": "red"}, 2, relA},
			{"remember", map[string]string{"sona": w.b, "text": "red"}, 2, relB},
		} {
			t.Run(fmt.Sprintf("prompt %s as %s %v", pc.name, p.name, pc.args["sona"]), func(t *testing.T) {
				res, err := s.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: pc.name, Arguments: pc.args})
				denied := p.scope < pc.scope || p.scoped && pc.rel == relB
				if denied != (err != nil) || denied && !strings.Contains(err.Error(), "forbidden") {
					t.Fatalf("want denied=%v, got %v", denied, err)
				}
				if !denied && len(res.Messages) != 1 {
					t.Fatalf("%d messages", len(res.Messages))
				}
			})
		}
		for _, rc := range resources {
			t.Run(fmt.Sprintf("read %s as %s", rc.uri, p.name), func(t *testing.T) {
				_, err := s.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: rc.uri})
				denied := p.scoped && (rc.rel == relGlobal || rc.rel == relB)
				if denied != (err != nil) || denied && !strings.Contains(err.Error(), "forbidden") {
					t.Fatalf("want denied=%v, got %v", denied, err)
				}
			})
		}
		if p.scoped {
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_sonas", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Sonas []struct{ UUID string } `json:"sonas"`
			}
			raw, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(raw, &out); err != nil || len(out.Sonas) != 1 || out.Sonas[0].UUID != w.a {
				t.Fatalf("list_sonas as %s: %s", p.name, raw)
			}
		}
	}
}

func toolText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}

func TestTokenConfigValidation(t *testing.T) {
	good := config.Token{Name: "ci", Hash: api.HashToken("s3cret"), Scopes: []string{"read"}}
	for _, tc := range []struct {
		name string
		tok  config.Token
		key  string
	}{
		{"plain token as hash", config.Token{Name: "x", Hash: "s3cret", Scopes: []string{"read"}}, "hash"},
		{"no scopes", config.Token{Name: "x", Hash: good.Hash}, "scopes"},
		{"unknown scope", config.Token{Name: "x", Hash: good.Hash, Scopes: []string{"root"}}, "scopes"},
		{"no name", config.Token{Hash: good.Hash, Scopes: []string{"read"}}, "name"},
		{"sona not a uuid", config.Token{Name: "x", Hash: good.Hash, Scopes: []string{"read"}, Sonas: []string{"alpha"}}, "sonas"},
	} {
		cfg := config.Default()
		cfg.Server.Auth.Tokens = []config.Token{tc.tok}
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "server.auth.tokens[0]."+tc.key) {
			t.Errorf("%s: want an error on server.auth.tokens[0].%s, got %v", tc.name, tc.key, err)
		}
	}
	cfg := config.Default()
	cfg.Server.Auth.Tokens = []config.Token{good, good}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "name") {
		t.Errorf("duplicate tokens: %v", err)
	}

	for listen, ok := range map[string]bool{
		"127.0.0.1:7777": true, "localhost:1": true, "[::1]:7777": true,
		"0.0.0.0:7777": false, ":7777": false, "[::]:7777": false, "10.0.0.5:7777": false, "example.com:80": false,
	} {
		s := config.Default().Server
		if err := s.CheckExposure(listen); (err == nil) != ok {
			t.Errorf("CheckExposure(%q) without tokens: %v", listen, err)
		}
		s.Auth.Tokens = []config.Token{good}
		if err := s.CheckExposure(listen); err != nil {
			t.Errorf("CheckExposure(%q) with a token: %v", listen, err)
		}
	}
	if !slices.Equal(config.Scopes, []string{"read", "write", "admin"}) {
		t.Errorf("scopes %v", config.Scopes)
	}
}

// A sona-scoped token learns nothing about other sonas by naming their
// CIDs (issue 13 #2, #3): edges and file contents must name what it may
// see, and are refused exactly as a CID stored nowhere is; a memory it
// stores that another sona also holds shows it only its own write.
func TestSonaScopedTokenCannotProbeOtherSonas(t *testing.T) {
	w := newAuthWorld(t)
	admin, readerA, writerA := principals[4], principals[5], principals[6]
	// B's file, uploaded for B, and a file memory of it in B.
	rawB := str(t, w.as(admin, "POST", "/files?sona="+w.b, []byte("beta's private file")).obj(t, 201)["cid"])
	w.as(admin, "POST", "/memories", map[string]any{"sona": w.b, "labels": map[string]any{"owner": "beta"}, "agent_id": "beta-agent",
		"data": map[string]any{"kind": "file", "name": "b.txt", "content": map[string]any{"/": rawB}}}).obj(t, 201)
	// CIDs stored nowhere, of the same codecs.
	missingMem := "bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
	missingRaw := "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"

	// sameAnswer inserts twice, naming target and then absent, and wants
	// the same refusal but for the CID.
	sameAnswer := func(name string, body func(target string) map[string]any, target, absent string) {
		t.Helper()
		r1 := w.as(writerA, "POST", "/memories", body(target))
		r2 := w.as(writerA, "POST", "/memories", body(absent))
		wantError(t, r1, 400, "invalid")
		wantError(t, r2, 400, "invalid")
		if strings.ReplaceAll(string(r1.body), target, "X") != strings.ReplaceAll(string(r2.body), absent, "X") {
			t.Fatalf("%s: another sona's CID and a CID stored nowhere are told apart:\n%s\n%s", name, r1.body, r2.body)
		}
	}
	edge := func(target string) map[string]any {
		return map[string]any{"sona": w.a, "dedup": false, "data": map[string]any{"kind": "text", "content": "points at " + target},
			"edges": []any{map[string]any{"target": map[string]any{"/": target}, "weight": 1}}}
	}
	file := func(content string) map[string]any {
		return map[string]any{"sona": w.a, "dedup": false, "data": map[string]any{"kind": "file", "content": map[string]any{"/": content}}}
	}
	sameAnswer("edge to B's memory", edge, w.memB, missingMem)
	sameAnswer("file of B's raw block", file, rawB, missingRaw)
	// A memory is no file content, for anyone.
	wantError(t, w.as(writerA, "POST", "/memories", file(w.memB)), 400, "invalid")
	wantError(t, w.as(admin, "POST", "/memories", file(w.memB)), 400, "invalid")
	// What A may see it may name: its memory, the backbone, its file.
	w.as(writerA, "POST", "/memories", edge(w.memA)).obj(t, 201)
	w.as(writerA, "POST", "/memories", edge(w.backboneMem)).obj(t, 201)
	w.as(writerA, "POST", "/memories", map[string]any{"sona": w.a, "dedup": false, "data": map[string]any{"kind": "file", "name": "again.txt",
		"content": map[string]any{"/": w.rawCID}}}).obj(t, 201)
	// An upload by an A token is A's file, to name and to read back.
	rawA := str(t, w.as(writerA, "POST", "/files", []byte("uploaded by an A token")).obj(t, 201)["cid"])
	fm := str(t, w.as(writerA, "POST", "/memories", file(rawA)).obj(t, 201)["cid"])
	if got := w.as(readerA, "GET", "/file/"+fm, nil); got.status != 200 || string(got.body) != "uploaded by an A token" {
		t.Fatalf("A's own upload: %s", got)
	}
	wantError(t, w.as(writerA, "POST", "/files?sona="+w.b, []byte("x")), 403, "forbidden")

	// The same text as B's memory: the same CID, but A sees only its own write.
	ins := w.as(writerA, "POST", "/memories", map[string]any{"sona": w.a, "agent_id": "alpha-agent", "kind": "fact",
		"labels": map[string]any{"owner": "alpha"},
		"data":   map[string]any{"kind": "text", "content": "beta keeps the secret red code 4711"}}).obj(t, 201)
	if ins["cid"] != w.memB || ins["existed"] != false {
		t.Fatalf("insert of B's text: %v", ins)
	}
	got := w.as(readerA, "GET", "/memory/"+w.memB, nil)
	meta := object(t, got.obj(t, 200)["meta"])
	if strings.Contains(string(got.body), w.b) {
		t.Fatalf("an A token sees B's uuid: %s", got.body)
	}
	if array(t, meta["sonas"])[0] != w.a || len(array(t, meta["sonas"])) != 1 || meta["agent_id"] != "alpha-agent" || meta["kind"] != "fact" ||
		object(t, meta["labels"])["owner"] != "alpha" || num(t, meta["seq"]) != 0 || len(array(t, meta["joins"])) != 0 {
		t.Fatalf("A's view of a memory B wrote first: %v", meta)
	}
	// Fresh text gives a view of the same shape.
	fresh := str(t, w.as(writerA, "POST", "/memories", map[string]any{"sona": w.a, "agent_id": "alpha-agent", "kind": "fact",
		"labels": map[string]any{"owner": "alpha"},
		"data":   map[string]any{"kind": "text", "content": "alpha writes something new"}}).obj(t, 201)["cid"])
	freshMeta := object(t, w.as(readerA, "GET", "/memory/"+fresh, nil).obj(t, 200)["meta"])
	if !jsonEqual(t, keysOf(freshMeta), keysOf(meta)) || freshMeta["created_at"] == nil {
		t.Fatalf("views differ in shape:\n%v\n%v", freshMeta, meta)
	}
	// An unscoped reader sees both writes.
	all := object(t, w.as(admin, "GET", "/memory/"+w.memB, nil).obj(t, 200)["meta"])
	joins := array(t, all["joins"])
	if len(array(t, all["sonas"])) != 2 || len(joins) != 1 || object(t, joins[0])["agent_id"] != "alpha-agent" || object(t, joins[0])["sona"] != w.a {
		t.Fatalf("the unscoped view: %v", all)
	}
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Server-Timing tells a principal not scoped to sonas how long the server
// took until the response's headers; a sona-scoped one, and a request
// not authorized, are told nothing (the time could tell what another
// sona holds).
func TestServerTimingOnlyForUnscopedPrincipals(t *testing.T) {
	w := newAuthWorld(t)
	timing := func(p principal, method, path string, body any) (string, time.Duration) {
		t.Helper()
		start := time.Now()
		resp := w.as(p, method, path, body)
		return resp.header.Get("Server-Timing"), time.Since(start)
	}
	for _, p := range []principal{principals[2], principals[4]} {
		for _, c := range []struct{ method, path string }{{"GET", "/memory/" + w.memB}, {"GET", "/memory/" + w.memA + "x"}, {"GET", "/no-such-route"}} {
			h, took := timing(p, c.method, c.path, nil)
			ms, ok := strings.CutPrefix(h, "app;dur=")
			dur, err := strconv.ParseFloat(ms, 64)
			if !ok || err != nil || dur < 0 || time.Duration(dur*float64(time.Millisecond)) > took {
				t.Fatalf("%s %s %s: Server-Timing %q (the client waited %v)", p.name, c.method, c.path, h, took)
			}
		}
		if h, _ := timing(p, "POST", "/sona/"+w.a+"/recall", map[string]any{"query": "red key"}); !strings.HasPrefix(h, "app;dur=") {
			t.Fatalf("%s recall: Server-Timing %q", p.name, h)
		}
	}
	for _, p := range []principal{principals[5], principals[7], principals[1], principals[0]} {
		for _, path := range []string{"/memory/" + w.memA, "/memory/" + w.memB, "/sona/" + w.b} {
			if h, _ := timing(p, "GET", path, nil); h != "" {
				t.Fatalf("%s GET %s: Server-Timing %q", p.name, path, h)
			}
		}
	}
}
