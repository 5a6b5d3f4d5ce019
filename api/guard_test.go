package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/config"
)

// send is a raw request with a chosen Host and headers.
func (h *harness) send(method, path, host, body string, headers ...string) response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: data, method: method, path: path}
}

// A tokenless server answers only to loopback names, and refuses a
// browser's cross-origin writes (issue 13 #12: DNS rebinding and CSRF).
func TestBrowserGuardWithoutTokens(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.Evaluation.Mode = "off"
		c.Server.AllowedHosts = []string{"memoria.internal"}
		c.Server.AllowedOrigins = []string{"http://ui.example:8080"}
	})
	id := h.newSona("alice")
	insert := `{"sona":"alice","dedup":false,"data":{"kind":"text","content":"written by a web page"}}`
	port := h.url[strings.LastIndex(h.url, ":"):]

	for _, tc := range []struct {
		name, method, path, host, body string
		headers                        []string
		status                         int
		code                           string
	}{
		{"rebinding read", "GET", "/sonas/list", "evil.example" + port, "", nil, 403, "forbidden_host"},
		{"rebinding health", "GET", "/healthz", "evil.example", "", nil, 403, "forbidden_host"},
		{"rebinding mcp", "POST", "/mcp", "evil.example" + port, `{}`, []string{"Content-Type", "application/json"}, 403, "forbidden_host"},
		{"rebinding gateway", "GET", "/ipfs/bafkqaaa", "evil.example" + port, "", nil, 403, "forbidden_host"},
		{"cross-origin write, no content type", "POST", "/memories", "", insert, []string{"Origin", "http://evil.example"}, 403, "forbidden_origin"},
		{"cross-site fetch", "POST", "/memories", "", insert, []string{"Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"}, 403, "forbidden_origin"},
		{"cross-origin chat", "POST", "/sona/" + id + "/chat", "", `{"content":"hi"}`, []string{"Origin", "http://evil.example", "Content-Type", "text/plain"}, 403, "forbidden_origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, h.send(tc.method, tc.path, tc.host, tc.body, tc.headers...), tc.status, tc.code)
		})
	}
	if _, n, _ := h.health(); n != 0 {
		t.Fatalf("refused requests stored %d memories", n)
	}

	// What the server answers to.
	for _, host := range []string{"localhost" + port, "127.0.0.1" + port, "LOCALHOST", "[::1]" + port, "app.localhost", "memoria.internal" + port} {
		if r := h.send("GET", "/healthz", host, ""); r.status != 200 {
			t.Errorf("Host %s: %s", host, r)
		}
	}
	// Same-origin and trusted-origin writes, and writes without a browser.
	for i, headers := range [][]string{
		{"Origin", h.url},
		{"Origin", "http://ui.example:8080"},
		{"Sec-Fetch-Site", "same-origin"},
		{},
	} {
		body := strings.Replace(insert, "web page", "web page "+string(rune('a'+i)), 1)
		r := h.send("POST", "/memories", "", body, append(headers, "Content-Type", "application/json")...)
		if r.status != 201 {
			t.Errorf("write with %v: %s", headers, r)
		}
	}
}

// With tokens, any Host is accepted (a server behind a proxy has names of
// its own) unless server.allowed_hosts lists them; cross-origin writes
// are refused all the same.
func TestBrowserGuardWithTokens(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.Evaluation.Mode = "off"
		c.Server.Auth.Tokens = []config.Token{{Name: "w", Hash: api.HashToken("mem_w"), Scopes: []string{"write"}}}
	})
	auth := []string{"Authorization", "Bearer mem_w", "Content-Type", "application/json"}
	if r := h.send("POST", "/sonas", "memoria.example.com", `{"name":"bob"}`, auth...); r.status != 201 {
		t.Fatalf("a token's request under another name: %s", r)
	}
	r := h.send("POST", "/sonas", "", `{"name":"eve"}`, append(auth, "Origin", "http://evil.example")...)
	wantError(t, r, 403, "forbidden_origin")
}

func TestGuardConfigValidation(t *testing.T) {
	for _, bad := range []func(*config.Config){
		func(c *config.Config) { c.Server.AllowedHosts = []string{"http://x"} },
		func(c *config.Config) { c.Server.AllowedHosts = []string{""} },
		func(c *config.Config) { c.Server.AllowedOrigins = []string{"evil.example"} },
		func(c *config.Config) { c.Server.AllowedOrigins = []string{"ftp://x"} },
		func(c *config.Config) { c.Server.AllowedOrigins = []string{"http://x/path"} },
	} {
		c := config.Default()
		c.DataDir = t.TempDir()
		bad(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("accepted %v %v", c.Server.AllowedHosts, c.Server.AllowedOrigins)
		}
	}
}
