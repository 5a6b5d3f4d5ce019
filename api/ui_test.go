package api_test

// The web explorer's server side: its files (served from memory with
// ETags, public on a server with tokens, behind the host guard), and
// GET /memory/{cid}/links. The UI itself is tested in a real browser
// (ui_browser_test.go).

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/internal/testutil"
)

func TestUIFiles(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Evaluation.Mode = "off" })

	r := h.send("GET", "/ui", "", "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `<script type="module" src="js/main.js">`) {
		// The client follows the redirect to /ui/.
		t.Fatalf("GET /ui: %s", r)
	}
	noRedirect := *h.hc
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noRedirect.Get(h.url + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET /ui: %d Location %q, want 301 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}

	index := h.send("GET", "/ui/", "", "", "Accept-Encoding", "identity")
	if index.status != http.StatusOK {
		t.Fatalf("GET /ui/: %s", index)
	}
	for name, want := range map[string]string{
		"Content-Type":           "text/html; charset=utf-8",
		"Cache-Control":          "no-cache",
		"X-Content-Type-Options": "nosniff",
	} {
		if got := index.header.Get(name); got != want {
			t.Errorf("GET /ui/ %s: %q, want %q", name, got, want)
		}
	}
	csp := index.header.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, d) {
			t.Errorf("CSP %q lacks %q", csp, d)
		}
	}
	etag := index.header.Get("ETag")
	if !regexp.MustCompile(`^"[0-9a-f]{24}"$`).MatchString(etag) {
		t.Fatalf("ETag %q", etag)
	}
	if r := h.send("GET", "/ui/", "", "", "Accept-Encoding", "identity", "If-None-Match", etag); r.status != http.StatusNotModified || len(r.body) != 0 {
		t.Fatalf("If-None-Match: %s", r)
	}

	// Every file the page and its modules name is served, with its type.
	files := map[string]string{"index.html": "text/html"}
	pending := []string{"index.html"}
	ref := regexp.MustCompile(`(?:href|src)="([^"#:]+)"|from '(\.{1,2}/[^']+)'`)
	for len(pending) > 0 {
		name := pending[0]
		pending = pending[1:]
		r := h.send("GET", "/ui/"+name, "", "", "Accept-Encoding", "identity")
		if r.status != http.StatusOK {
			t.Fatalf("GET /ui/%s: %s", name, r)
		}
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, files[name]) {
			t.Errorf("%s: Content-Type %q, want %s", name, ct, files[name])
		}
		for _, m := range ref.FindAllStringSubmatch(string(r.body), -1) {
			target := resolve(name, m[1]+m[2])
			if _, ok := files[target]; ok {
				continue
			}
			files[target] = map[string]string{".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}[target[strings.LastIndex(target, "."):]]
			pending = append(pending, target)
		}
	}
	if len(files) < 10 {
		t.Fatalf("only %d files reached from index.html: %v", len(files), files)
	}

	// gzip when asked, the same bytes once inflated, its own ETag.
	js := h.send("GET", "/ui/js/views/memory.js", "", "", "Accept-Encoding", "identity")
	gz := h.send("GET", "/ui/js/views/memory.js", "", "", "Accept-Encoding", "gzip, deflate")
	if gz.header.Get("Content-Encoding") != "gzip" || gz.header.Get("ETag") == js.header.Get("ETag") || !strings.Contains(gz.header.Get("Vary"), "Accept-Encoding") {
		t.Fatalf("gzip: %v", gz.header)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz.body))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(plain, js.body) || len(gz.body) >= len(js.body) {
		t.Fatalf("gzip body: %d bytes inflate to %d (%v), want the %d plain bytes", len(gz.body), len(plain), err, len(js.body))
	}
	for _, ae := range []string{"gzip;q=0", "br, gzip; q=0.0", "identity"} {
		if r := h.send("GET", "/ui/js/views/memory.js", "", "", "Accept-Encoding", ae); r.header.Get("Content-Encoding") != "" {
			t.Fatalf("Accept-Encoding %q got %v", ae, r.header)
		}
	}
	if r := h.send("GET", "/ui/js/views/memory.js", "", "", "Accept-Encoding", "br;q=1, gzip;q=0.5"); r.header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip;q=0.5 got %v", r.header)
	}

	wantError(t, h.get("/ui/nope.js"), http.StatusNotFound, "not_found")
	wantError(t, h.do("POST", "/ui/", nil), http.StatusMethodNotAllowed, "method_not_allowed")
}

// resolve joins a relative reference of a UI file to a path under /ui/.
func resolve(from, ref string) string {
	dir := strings.Split(from, "/")
	dir = dir[:len(dir)-1]
	for _, part := range strings.Split(ref, "/") {
		switch part {
		case ".":
		case "..":
			dir = dir[:len(dir)-1]
		default:
			dir = append(dir, part)
		}
	}
	return strings.Join(dir, "/")
}

// The UI's files hold no data: they are public on a server with tokens,
// where every data call still needs one; and they stay behind the host
// guard, like everything else.
func TestUIAuthAndGuard(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.Evaluation.Mode = "off"
		c.Server.AllowedHosts = []string{"memoria.internal"}
		c.Server.Auth.Tokens = []config.Token{{Name: "admin", Hash: api.HashToken("mem_admin"), Scopes: []string{"admin"}}}
	})
	if r := h.get("/ui/"); r.status != http.StatusOK {
		t.Fatalf("GET /ui/ without a token: %s", r)
	}
	if r := h.get("/ui/js/main.js"); r.status != http.StatusOK {
		t.Fatalf("GET /ui/js/main.js without a token: %s", r)
	}
	wantError(t, h.get("/sonas/list"), http.StatusUnauthorized, "unauthorized")
	wantError(t, h.send("GET", "/ui/", "evil.example", ""), http.StatusForbidden, "forbidden_host")

	// The UI's writes are same-origin: the browser sends its own origin,
	// which the guard lets through; a page of another origin is refused.
	admin := "Bearer mem_admin"
	origin := h.url // http://127.0.0.1:port, the origin the UI was loaded from
	body := `{"agent_id":"a","concept_key":"k","content":"c"}`
	r := h.send("POST", "/backbone/contribute", "", body, "Authorization", admin, "Content-Type", "application/json",
		"Origin", origin, "Sec-Fetch-Site", "same-origin")
	if r.status != http.StatusOK {
		t.Fatalf("same-origin write: %s", r)
	}
	r = h.send("POST", "/backbone/contribute", "", body, "Authorization", admin, "Content-Type", "application/json",
		"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site")
	wantError(t, r, http.StatusForbidden, "forbidden_origin")
}

func TestMemoryLinks(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Evaluation.Mode = "off" })
	alice := h.newSona("alice")
	first := h.insertText(alice, "The shed key hangs by the kitchen door.")
	resp := h.post("/sona/"+alice+"/chat", map[string]any{"content": "Where does the shed key hang?", "agent_id": "agent-1"}).obj(t, http.StatusOK)
	input, answer := str(t, object(t, resp["input"])["cid"]), str(t, object(t, resp["response"])["cid"])
	var hits []string
	for _, it := range array(t, h.post("/sona/"+alice+"/recall", map[string]any{"query": "where does the shed key hang", "agent_id": "agent-2"}).obj(t, http.StatusOK)["memories"]) {
		if m := object(t, it); m["via"] == "hit" {
			hits = append(hits, str(t, m["cid"]))
		}
	}
	if len(hits) < 2 {
		t.Fatalf("the recall must return several hits to make co-access partners: %v", hits)
	}

	links := func(c, query string) (assoc, co map[string]string) {
		t.Helper()
		m := h.get("/memory/"+c+"/links"+query).obj(t, http.StatusOK)
		wantKeys(t, m, "cid", "associations", "agent_id", "coaccess")
		if m["cid"] != c {
			t.Fatalf("cid %v, want %s", m["cid"], c)
		}
		read := func(v any) map[string]string {
			out := map[string]string{}
			var last float64 = 2
			for _, it := range array(t, v) {
				l := object(t, it)
				wantKeys(t, l, "target", "type", "strength")
				s := fnum(t, l["strength"])
				if s <= 0 || s > 1 || s > last {
					t.Fatalf("strengths must be in (0,1], strongest first: %v", v)
				}
				last = s
				out[str(t, object(t, l["target"])["/"])] = str(t, l["type"])
			}
			return out
		}
		return read(m["associations"]), read(m["coaccess"])
	}

	assoc, _ := links(answer, "")
	if assoc[first] != "causal" || assoc[input] != "sequential" {
		t.Errorf("the answer's associations %v: want causal to what it drew on (%s), sequential to its input (%s)", assoc, first, input)
	}
	// agent-2's recall returned the hits together: they become partners
	// (written behind the answer), for agent-2 only.
	testutil.Eventually(t, "co-access partners", func() bool {
		_, co := links(hits[0], "?agent_id=agent-2")
		return slices.Contains(slices.Collect(maps.Keys(co)), hits[1])
	})
	_, co := links(hits[0], "?agent_id=agent-2")
	for c, typ := range co {
		if typ != "coaccess" {
			t.Errorf("co-access partner %s has type %q", c, typ)
		}
	}
	if _, co := links(hits[0], ""); len(co) != 0 {
		t.Errorf("co-access of the default agent, which recalled nothing: %v", co)
	}

	wantError(t, h.get("/memory/not-a-cid/links"), http.StatusBadRequest, "invalid_cid")
	wantError(t, h.get("/memory/bafyreigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi/links"), http.StatusNotFound, "not_found")
	wantError(t, h.get("/memory/"+first+"/links?agent_id=a%01b"), http.StatusBadRequest, "invalid")
}

// A sona-scoped token sees a memory's links only to what it may read, and
// no co-access (the self's learning from every sona's recalls).
func TestMemoryLinksSonaScoped(t *testing.T) {
	base := config.Default()
	base.DataDir = t.TempDir()
	base.Evaluation.Mode = "off"
	var a, memA, memB string
	{
		h, closeH := openHarness(t, base)
		a = h.newSona("alpha")
		b := h.newSona("beta")
		memB = h.insertText(b, "beta keeps the secret red code 4711")
		memA = str(t, h.insert(map[string]any{"sona": a, "data": map[string]any{"kind": "text", "content": "alpha keeps the red key"},
			"edges": []any{map[string]any{"target": map[string]any{"/": memB}, "weight": 0.5}}})["cid"])
		h.insert(map[string]any{"sona": a, "dedup": false, "data": map[string]any{"kind": "text", "content": "alpha also keeps a blue key"}})
		h.post("/sona/"+a+"/recall", map[string]any{"query": "alpha keeps a key", "scope": "self"}).obj(t, http.StatusOK)
		testutil.Eventually(t, "co-access", func() bool {
			return len(array(t, h.get("/memory/"+memA+"/links").obj(t, http.StatusOK)["coaccess"])) > 0
		})
		closeH()
	}
	cfg := base
	cfg.Server.Auth.Tokens = []config.Token{
		{Name: "reader", Hash: api.HashToken("mem_reader"), Scopes: []string{"read"}},
		{Name: "reader-a", Hash: api.HashToken("mem_reader-a"), Scopes: []string{"read"}, Sonas: []string{a}},
	}
	h, _ := openHarness(t, cfg)
	as := func(token, path string) map[string]any {
		t.Helper()
		return h.do("GET", path, nil, "Authorization", "Bearer "+token).obj(t, http.StatusOK)
	}
	targets := func(v any) []string {
		var out []string
		for _, it := range array(t, v) {
			out = append(out, str(t, object(t, object(t, it)["target"])["/"]))
		}
		return out
	}
	all := as("mem_reader", "/memory/"+memA+"/links")
	if !slices.Contains(targets(all["associations"]), memB) || len(array(t, all["coaccess"])) == 0 {
		t.Fatalf("an unscoped reader sees the related link to %s and the co-access: %v", memB, all)
	}
	scoped := as("mem_reader-a", "/memory/"+memA+"/links")
	if slices.Contains(targets(scoped["associations"]), memB) || len(targets(scoped["associations"])) == 0 {
		t.Fatalf("the A-scoped token must see A's links but not %s: %v", memB, scoped)
	}
	if len(array(t, scoped["coaccess"])) != 0 {
		t.Fatalf("the A-scoped token sees co-access: %v", scoped)
	}
	// B's memory and a CID stored nowhere are refused alike.
	for _, c := range []string{memB, "bafyreigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"} {
		wantError(t, h.do("GET", "/memory/"+c+"/links", nil, "Authorization", "Bearer mem_reader-a"), http.StatusForbidden, "forbidden")
	}
}

// openHarness serves an app on cfg as it is (its data directory
// included); close stops it before the test ends (it runs at cleanup
// otherwise).
func openHarness(t *testing.T, cfg config.Config) (*harness, func()) {
	t.Helper()
	a, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler), app.Options{})
	if err != nil {
		t.Fatalf("app.Open: %v", err)
	}
	srv := httptest.NewServer(a.API)
	var once sync.Once
	closeIt := func() {
		once.Do(func() {
			srv.Close()
			if err := a.Close(); err != nil {
				t.Errorf("app.Close: %v", err)
			}
		})
	}
	t.Cleanup(closeIt)
	return &harness{t: t, app: a, url: srv.URL, hc: srv.Client()}, closeIt
}

// BenchmarkUIFile serves the explorer's largest module through the whole
// handler (guard, auth, metrics), gzip and 304 alike:
// go test -run '^$' -bench UIFile ./api
func BenchmarkUIFile(b *testing.B) {
	cfg := config.Default()
	cfg.DataDir = b.TempDir()
	cfg.Evaluation.Mode = "off"
	a, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler), app.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	get := func(headers ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "http://127.0.0.1/ui/js/views/recall.js", nil)
		for i := 0; i+1 < len(headers); i += 2 {
			r.Header.Set(headers[i], headers[i+1])
		}
		w := httptest.NewRecorder()
		a.API.ServeHTTP(w, r)
		return w
	}
	etag := get("Accept-Encoding", "gzip").Header().Get("ETag")
	for _, c := range []struct {
		name    string
		headers []string
		status  int
	}{
		{"identity", nil, http.StatusOK},
		{"gzip", []string{"Accept-Encoding", "gzip"}, http.StatusOK},
		{"not-modified", []string{"Accept-Encoding", "gzip", "If-None-Match", etag}, http.StatusNotModified},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if w := get(c.headers...); w.Code != c.status {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}
