package api_test

import (
	"net/http"
	"testing"
)

// Every error answer, whatever handler gives it (the MCP SDK's, the
// gateway's, the mux's), is the JSON error shape (issue 13 #15).
func TestEveryErrorIsJSON(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")
	json := []string{"Content-Type", "application/json"}
	mcpAccept := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
	for _, c := range []struct {
		method, path, body string
		headers            []string
	}{
		{"GET", "/mcp", "", nil},
		{"DELETE", "/mcp", "", nil},
		{"PUT", "/mcp", "x", nil},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, json},
		{"POST", "/mcp", `{`, mcpAccept},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, []string{"Content-Type", "text/plain", "Accept", "application/json, text/event-stream"}},
		{"GET", "/nowhere", "", nil},
		{"PATCH", "/memories", "", nil},
		{"POST", "/memories", `{"sona":`, json},
		{"POST", "/sona/" + id + "/recall", `[]`, json},
		{"GET", "/memory/not-a-cid", "", nil},
		{"GET", "/ipfs/not-a-cid", "", nil},
		{"GET", "/ipfs/bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy", "", []string{"Accept", "application/vnd.ipld.raw"}},
		{"GET", "/memories/list?limit=-1", "", nil},
		{"POST", "/files", string(make([]byte, 2<<20)), nil},
	} {
		r := h.send(c.method, c.path, "", c.body, c.headers...)
		if r.status < 400 {
			t.Errorf("%s %s: %s, want an error", c.method, c.path, r)
			continue
		}
		checkErrorBody(t, r, "")
		if r.status == http.StatusMethodNotAllowed && r.header.Get("Allow") == "" && c.path != "/mcp" {
			t.Errorf("%s %s: 405 without Allow", c.method, c.path)
		}
	}
}
