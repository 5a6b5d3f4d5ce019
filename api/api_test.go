package api_test

// REST contract tests: every route against the real store (Badger in a
// temporary directory), the real actor system and the real handler behind
// httptest.NewServer. Helpers live here; the routes are split over
// api_test.go (health, sonas, routing, garbage), api_memory_test.go
// (insert, get, list, files, gateway) and api_chat_test.go (chat, query,
// recall).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
)

// ---------------------------------------------------------------------------
// Harness

type harness struct {
	t   *testing.T
	app *app.App
	url string
	hc  *http.Client
}

// newHarness opens an app on a fresh data directory and serves its API.
func newHarness(t *testing.T, tweak ...func(*config.Config)) *harness {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	for _, f := range tweak {
		f(&cfg)
	}
	a, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler), app.Options{})
	if err != nil {
		t.Fatalf("app.Open: %v", err)
	}
	srv := httptest.NewServer(a.API)
	t.Cleanup(func() {
		srv.Close()
		if err := a.Close(); err != nil {
			t.Errorf("app.Close: %v", err)
		}
	})
	return &harness{t: t, app: a, url: srv.URL, hc: srv.Client()}
}

// response is one HTTP answer, read in full.
type response struct {
	status int
	header http.Header
	body   []byte
	method string
	path   string
}

func (r response) String() string {
	b := string(r.body)
	if len(b) > 400 {
		b = b[:400] + "…"
	}
	return fmt.Sprintf("%s %s -> %d %s", r.method, r.path, r.status, b)
}

// do sends a request. body is nil, a []byte (sent as is), a string (sent
// as is) or anything else (sent as JSON). headers are name, value pairs;
// a JSON body gets Content-Type application/json unless one is given.
func (h *harness) do(method, path string, body any, headers ...string) response {
	h.t.Helper()
	var rd io.Reader
	isJSON := false
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
		isJSON = true
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			h.t.Fatalf("marshal request: %v", err)
		}
		rd = bytes.NewReader(raw)
		isJSON = true
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		h.t.Fatalf("new request: %v", err)
	}
	if isJSON {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data, method: method, path: path}
}

func (h *harness) get(path string) response            { h.t.Helper(); return h.do("GET", path, nil) }
func (h *harness) post(path string, body any) response { h.t.Helper(); return h.do("POST", path, body) }

// decodeJSON decodes a JSON body with numbers kept as json.Number, so a
// test can tell a number from a string.
func decodeJSON(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("response is not JSON: %v: %q", err, data)
	}
	if dec.More() {
		t.Fatalf("response has trailing data: %q", data)
	}
	return v
}

// obj checks the response's status and JSON content type and returns its
// body as an object.
func (r response) obj(t *testing.T, status int) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("want status %d: %s", status, r)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json: %s", ct, r)
	}
	if cl := r.header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(r.body)) { // a stream (an export) has none
		t.Fatalf("Content-Length %q of a body of %d bytes: %s", cl, len(r.body), r)
	}
	m, ok := decodeJSON(t, r.body).(map[string]any)
	if !ok {
		t.Fatalf("body is not a JSON object: %s", r)
	}
	return m
}

// wantError checks that r is exactly {"error":{"code","message"}} as JSON
// with the given status, and code when code is not empty.
func wantError(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("want error status %d: %s", status, r)
	}
	checkErrorBody(t, r, code)
}

// wantClientError checks r is a 4xx JSON error body.
func wantClientError(t *testing.T, r response) {
	t.Helper()
	if r.status < 400 || r.status > 499 {
		t.Fatalf("want a 4xx error: %s", r)
	}
	checkErrorBody(t, r, "")
}

func checkErrorBody(t *testing.T, r response, code string) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error Content-Type %q, want application/json: %s", ct, r)
	}
	top, ok := decodeJSON(t, r.body).(map[string]any)
	if !ok {
		t.Fatalf("error body is not an object: %s", r)
	}
	wantKeys(t, top, "error")
	e, ok := top["error"].(map[string]any)
	if !ok {
		t.Fatalf("error is not an object: %s", r)
	}
	wantKeys(t, e, "code", "message")
	c, ok1 := e["code"].(string)
	m, ok2 := e["message"].(string)
	if !ok1 || !ok2 || c == "" || m == "" {
		t.Fatalf("error code and message must be non-empty strings: %s", r)
	}
	if code != "" && c != code {
		t.Fatalf("error code %q, want %q: %s", c, code, r)
	}
}

// wantKeys checks that m has exactly the given keys.
func wantKeys(t *testing.T, m map[string]any, keys ...string) {
	t.Helper()
	got := make([]string, 0, len(m))
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	want := slices.Clone(keys)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("keys %v, want exactly %v in %v", got, want, m)
	}
}

// num returns v as an integer, failing unless it is a JSON number.
func num(t *testing.T, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%#v is not a JSON number", v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("%v is not an integer: %v", n, err)
	}
	return i
}

// fnum returns v as a float, failing unless it is a JSON number.
func fnum(t *testing.T, v any) float64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%#v is not a JSON number", v)
	}
	f, err := n.Float64()
	if err != nil {
		t.Fatalf("%v: %v", n, err)
	}
	return f
}

func str(t *testing.T, v any) string {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%#v is not a JSON string", v)
	}
	return s
}

func object(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%#v is not a JSON object", v)
	}
	return m
}

func array(t *testing.T, v any) []any {
	t.Helper()
	a, ok := v.([]any)
	if !ok {
		t.Fatalf("%#v is not a JSON array", v)
	}
	return a
}

// jsonEqual compares two JSON values by meaning (numbers as float64).
func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	norm := func(v any) any {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("marshal %#v: %v", v, err)
		}
		var out any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// ---------------------------------------------------------------------------
// Shortcuts

// health returns the /healthz counters.
func (h *harness) health() (sonas, memories, indexed int64) {
	h.t.Helper()
	m := h.get("/healthz").obj(h.t, http.StatusOK)
	return num(h.t, m["sonas"]), num(h.t, m["memories"]), num(h.t, m["indexed"])
}

func (h *harness) memoryCount() int64 {
	h.t.Helper()
	_, n, _ := h.health()
	return n
}

// createSona creates a sona and returns its JSON.
func (h *harness) createSona(name string) map[string]any {
	h.t.Helper()
	return h.post("/sonas", map[string]any{"name": name}).obj(h.t, http.StatusCreated)
}

func (h *harness) newSona(name string) string {
	h.t.Helper()
	return str(h.t, h.createSona(name)["uuid"])
}

// twinSona creates a sona called name while another is (asking for the
// duplicate name).
func (h *harness) twinSona(name string) string {
	h.t.Helper()
	return str(h.t, h.post("/sonas", map[string]any{"name": name, "allow_duplicate": true}).obj(h.t, http.StatusCreated)["uuid"])
}

func (h *harness) sona(id string) map[string]any {
	h.t.Helper()
	return h.get("/sona/"+id).obj(h.t, http.StatusOK)
}

func (h *harness) sonaLength(id string) int64 {
	h.t.Helper()
	return num(h.t, h.sona(id)["length"])
}

// insert stores a memory and returns the insert response.
func (h *harness) insert(body map[string]any) map[string]any {
	h.t.Helper()
	return h.post("/memories", body).obj(h.t, http.StatusCreated)
}

// insertText stores a text memory and returns its CID.
func (h *harness) insertText(sona, content string) string {
	h.t.Helper()
	return str(h.t, h.insert(map[string]any{
		"sona": sona,
		"data": map[string]any{"kind": "text", "content": content},
	})["cid"])
}

func (h *harness) memory(c string) map[string]any {
	h.t.Helper()
	return h.get("/memory/"+c).obj(h.t, http.StatusOK)
}

// checkSonaShape checks the JSON of a sona record.
func checkSonaShape(t *testing.T, s map[string]any) {
	t.Helper()
	wantKeys(t, s, "uuid", "name", "head", "length", "created_at", "last_memory")
	if _, err := uuid.Parse(str(t, s["uuid"])); err != nil {
		t.Fatalf("uuid %v: %v", s["uuid"], err)
	}
	str(t, s["name"])
	length := num(t, s["length"])
	if created := num(t, s["created_at"]); created <= 0 {
		t.Fatalf("created_at %d is not a unix time", created)
	}
	if length == 0 {
		if s["head"] != nil || s["last_memory"] != nil {
			t.Fatalf("empty sona must have null head and last_memory: %v", s)
		}
	} else {
		str(t, s["head"])
		str(t, s["last_memory"])
	}
}

// ---------------------------------------------------------------------------
// GET /healthz

func TestHealth(t *testing.T) {
	h := newHarness(t)
	m := h.get("/healthz").obj(t, http.StatusOK)
	wantKeys(t, m, "status", "sonas", "memories", "indexed", "reason")
	if m["status"] != "ok" || m["reason"] != nil {
		t.Fatalf("status %v", m["status"])
	}
	for _, k := range []string{"sonas", "memories", "indexed"} {
		if n := num(t, m[k]); n != 0 {
			t.Fatalf("%s = %d on an empty store", k, n)
		}
	}

	id := h.newSona("alice")
	h.insertText(id, "the first memory")
	h.insertText(id, "the second memory")
	sonas, mems, indexed := h.health()
	if sonas != 1 || mems != 2 || indexed != 2 {
		t.Fatalf("health = %d sonas, %d memories, %d indexed; want 1, 2, 2", sonas, mems, indexed)
	}
}

// ---------------------------------------------------------------------------
// POST /sonas, GET /sona/{uuid}

func TestCreateSona(t *testing.T) {
	h := newHarness(t)
	r := h.post("/sonas", map[string]any{"name": "alice"})
	s := r.obj(t, http.StatusCreated)
	checkSonaShape(t, s)
	if s["name"] != "alice" {
		t.Fatalf("name %v", s["name"])
	}
	if s["head"] != nil || s["last_memory"] != nil {
		t.Fatalf("a new sona has null head and last_memory: %s", r)
	}
	if num(t, s["length"]) != 0 {
		t.Fatalf("a new sona has length 0: %s", r)
	}
	if loc, want := r.header.Get("Location"), "/sona/"+str(t, s["uuid"]); loc != want {
		t.Fatalf("Location %q, want %q", loc, want)
	}
	// The Location resolves to the same record.
	got := h.get(r.header.Get("Location")).obj(t, http.StatusOK)
	if !jsonEqual(t, got, s) {
		t.Fatalf("GET Location = %v, want %v", got, s)
	}

	// Content types that are JSON are accepted.
	for i, ct := range []string{"application/json; charset=utf-8", "application/merge-patch+json"} {
		r := h.do("POST", "/sonas", fmt.Sprintf(`{"name":"bob-%d"}`, i), "Content-Type", ct)
		checkSonaShape(t, r.obj(t, http.StatusCreated))
	}
	// So is a body without a Content-Type.
	r = h.do("POST", "/sonas", []byte(`{"name":"carol"}`))
	checkSonaShape(t, r.obj(t, http.StatusCreated))
	// Field names may be camelCase or snake_case; here both are "name".
	if sonas, _, _ := h.health(); sonas != 4 {
		t.Fatalf("sonas = %d, want 4", sonas)
	}
}

// A sona's name is unique: a second alice is 409 and writes nothing,
// unless the request asks for a duplicate — then the name names neither
// (409 conflict) and their uuids do.
func TestSonaNamesAreUnique(t *testing.T) {
	h := newHarness(t)
	alice := h.newSona("alice")
	wantError(t, h.post("/sonas", map[string]any{"name": "alice"}), http.StatusConflict, "exists")
	wantError(t, h.post("/sonas", map[string]any{"name": "alice", "allow_duplicate": false}), http.StatusConflict, "exists")
	if sonas, _, _ := h.health(); sonas != 1 {
		t.Fatalf("a refused creation left %d sonas", sonas)
	}
	if got := h.get("/sona/alice").obj(t, http.StatusOK)["uuid"]; got != alice {
		t.Fatalf("/sona/alice is %v, want %s", got, alice)
	}
	second := h.post("/sonas", map[string]any{"name": "alice", "allow_duplicate": true}).obj(t, http.StatusCreated)
	if second["uuid"] == alice || second["name"] != "alice" {
		t.Fatalf("the duplicate asked for: %v", second)
	}
	wantError(t, h.get("/sona/alice"), http.StatusConflict, "conflict")
	wantError(t, h.post("/sona/alice/recall", map[string]any{"query": "x"}), http.StatusConflict, "conflict")
	for _, id := range []string{alice, str(t, second["uuid"])} {
		if got := h.sona(id)["uuid"]; got != id {
			t.Fatalf("by uuid: %v, want %s", got, id)
		}
	}
}

// The /sona/{uuid}/… routes take a sona's name as POST /memories does.
func TestSonaRoutesTakeAName(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("gardener")
	h.post("/memories", map[string]any{"sona": "gardener", "data": map[string]any{"kind": "text", "content": "the tomatoes are in the east bed"}}).obj(t, http.StatusCreated)
	if got := h.sona("gardener"); got["uuid"] != id || num(t, got["length"]) != 1 {
		t.Fatalf("GET /sona/gardener: %v", got)
	}
	h.get("/sona/gardener/tiers").obj(t, http.StatusOK)
	rec := h.post("/sona/gardener/recall", map[string]any{"query": "where are the tomatoes"}).obj(t, http.StatusOK)
	if mems, _ := rec["memories"].([]any); len(mems) != 1 {
		t.Fatalf("recall by name: %v", rec)
	}
	h.post("/sona/gardener/chat", map[string]any{"content": "where are the tomatoes?"}).obj(t, http.StatusOK)
	if n := h.sonaLength(id); n != 3 {
		t.Fatalf("after a chat by name the chain has %d ACTs, want 3", n)
	}
	wantError(t, h.get("/sona/nobody"), http.StatusNotFound, "not_found")
}

func TestCreateSonaErrors(t *testing.T) {
	h := newHarness(t)
	long := strings.Repeat("x", 201)
	tests := []struct {
		name   string
		body   string
		ctype  string
		status int
		code   string
	}{
		{"malformed JSON", `{"name":`, "", 400, "malformed_json"},
		{"not JSON", `name=alice`, "", 400, "malformed_json"},
		{"empty body", ``, "", 400, "malformed_json"},
		{"whitespace body", "  \n", "", 400, "malformed_json"},
		{"unknown field", `{"name":"a","color":"red"}`, "", 400, "malformed_json"},
		{"wrong type", `{"name":42}`, "", 400, "malformed_json"},
		{"array", `[{"name":"a"}]`, "", 400, "malformed_json"},
		{"null", `null`, "", 400, ""},
		{"empty object", `{}`, "", 400, "invalid"},
		{"empty name", `{"name":""}`, "", 400, "invalid"},
		{"blank name", `{"name":"   "}`, "", 400, "invalid"},
		{"control character", `{"name":"a\u0007b"}`, "", 400, "invalid"},
		{"too long", `{"name":"` + long + `"}`, "", 400, "invalid"},
		{"right-to-left override", `{"name":"invoice\u202egnp.exe"}`, "", 400, "invalid"},
		{"zero-width space", `{"name":"ali\u200bce"}`, "", 400, "invalid"},
		{"a path", `{"name":"../../etc/passwd"}`, "", 400, "invalid"},
		{"backslash", `{"name":"a\\b"}`, "", 400, "invalid"},
		{"dot dot", `{"name":".."}`, "", 400, "invalid"},
		{"leading blank", `{"name":" alice"}`, "", 400, "invalid"},
		{"text/plain", `{"name":"alice"}`, "text/plain", 415, "unsupported_media_type"},
		{"form", `{"name":"alice"}`, "application/x-www-form-urlencoded", 415, "unsupported_media_type"},
		{"bad media type", `{"name":"alice"}`, ";;;", 415, "unsupported_media_type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ct := tc.ctype
			if ct == "" {
				ct = "application/json"
			}
			r := h.do("POST", "/sonas", []byte(tc.body), "Content-Type", ct)
			wantError(t, r, tc.status, tc.code)
		})
	}
	if sonas, _, _ := h.health(); sonas != 0 {
		t.Fatalf("failed creates made %d sonas", sonas)
	}

	t.Run("GET /sonas", func(t *testing.T) {
		r := h.get("/sonas")
		wantError(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
		if allow := r.header.Get("Allow"); !strings.Contains(allow, "POST") {
			t.Fatalf("Allow %q does not list POST", allow)
		}
	})
}

func TestGetSona(t *testing.T) {
	h := newHarness(t)
	created := h.createSona("alice")
	id := str(t, created["uuid"])
	got := h.sona(id)
	checkSonaShape(t, got)
	if !jsonEqual(t, got, created) {
		t.Fatalf("GET = %v, want %v", got, created)
	}

	c := h.insertText(id, "a memory")
	got = h.sona(id)
	checkSonaShape(t, got)
	if num(t, got["length"]) != 1 || got["last_memory"] != c {
		t.Fatalf("after one insert: %v (memory %s)", got, c)
	}
	if got["uuid"] != id || got["name"] != "alice" || num(t, got["created_at"]) != num(t, created["created_at"]) {
		t.Fatalf("identity changed: %v vs %v", got, created)
	}

	tests := []struct {
		path   string
		status int
		code   string
	}{
		{"/sona/" + uuid.NewString(), 404, "not_found"},
		{"/sona/not-a-uuid", 404, "not_found"}, // a name no sona has
		{"/sona/bob", 404, "not_found"},
		{"/sona/" + strings.Repeat("a", 300), 404, "not_found"},
	}
	for _, tc := range tests {
		wantError(t, h.get(tc.path), tc.status, tc.code)
	}
}

// A uuid that passes the route's uuid check must not be "not found" for an
// existing sona: either it is found (uuids are case-insensitive) or it is
// rejected as malformed.
func TestSonaUUIDSpellings(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")
	for _, spelling := range []string{strings.ToUpper(id), "urn:uuid:" + id, "{" + id + "}"} {
		for _, r := range []response{
			h.get("/sona/" + spelling),
			h.post("/sona/"+spelling+"/recall", map[string]any{"query": "x"}),
		} {
			switch r.status {
			case http.StatusOK:
				if r.path == "/sona/"+spelling {
					if got := r.obj(t, http.StatusOK)["uuid"]; got != id {
						t.Fatalf("%s: uuid %v, want the canonical %s", spelling, got, id)
					}
				}
			case http.StatusBadRequest:
				wantError(t, r, http.StatusBadRequest, "invalid_uuid")
			default:
				t.Fatalf("uuid spelled %q of an existing sona: %s", spelling, r)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// GET /sonas/list

func TestListSonas(t *testing.T) {
	h := newHarness(t)

	empty := h.get("/sonas/list").obj(t, http.StatusOK)
	wantKeys(t, empty, "items", "next_cursor")
	if items := array(t, empty["items"]); len(items) != 0 || empty["next_cursor"] != nil {
		t.Fatalf("empty store: %v", empty)
	}
	if !bytes.Contains(h.get("/sonas/list").body, []byte(`"items":[]`)) {
		t.Fatal(`an empty listing must render "items":[]`)
	}

	want := map[string]bool{}
	for i := range 5 {
		want[h.newSona(fmt.Sprintf("sona-%d", i))] = true
	}

	seen := map[string]int{}
	cursor := ""
	pages := 0
	for {
		path := "/sonas/list?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		page := h.get(path).obj(t, http.StatusOK)
		wantKeys(t, page, "items", "next_cursor")
		items := array(t, page["items"])
		if len(items) > 2 {
			t.Fatalf("page of %d items with limit 2", len(items))
		}
		for _, it := range items {
			s := object(t, it)
			checkSonaShape(t, s)
			seen[str(t, s["uuid"])]++
		}
		pages++
		if page["next_cursor"] == nil {
			break
		}
		cursor = str(t, page["next_cursor"])
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if pages != 3 {
		t.Fatalf("5 sonas in pages of 2 took %d pages, want 3", pages)
	}
	if len(seen) != 5 {
		t.Fatalf("saw %d sonas, want 5: %v", len(seen), seen)
	}
	for id, n := range seen {
		if !want[id] || n != 1 {
			t.Fatalf("sona %s seen %d times (known %v)", id, n, want[id])
		}
	}

	// A page that takes exactly the rest ends the listing.
	all := h.get("/sonas/list?limit=5").obj(t, http.StatusOK)
	if len(array(t, all["items"])) != 5 || all["next_cursor"] != nil {
		t.Fatalf("limit=5 over 5 sonas: %v", all)
	}
	// The default limit covers them all.
	all = h.get("/sonas/list").obj(t, http.StatusOK)
	if len(array(t, all["items"])) != 5 || all["next_cursor"] != nil {
		t.Fatalf("default limit over 5 sonas: %v", all)
	}

	t.Run("name filter", func(t *testing.T) {
		t1, t2 := h.newSona("twin"), h.twinSona("twin")
		page := h.get("/sonas/list?name=twin").obj(t, http.StatusOK)
		items := array(t, page["items"])
		got := []string{}
		for _, it := range items {
			s := object(t, it)
			if s["name"] != "twin" {
				t.Fatalf("name filter returned %v", s)
			}
			got = append(got, str(t, s["uuid"]))
		}
		sort.Strings(got)
		wantIDs := []string{t1, t2}
		sort.Strings(wantIDs)
		if !slices.Equal(got, wantIDs) || page["next_cursor"] != nil {
			t.Fatalf("?name=twin = %v, want %v", page, wantIDs)
		}
		// Paged by name.
		p1 := h.get("/sonas/list?name=twin&limit=1").obj(t, http.StatusOK)
		if len(array(t, p1["items"])) != 1 || p1["next_cursor"] == nil {
			t.Fatalf("first page of twins: %v", p1)
		}
		p2 := h.get("/sonas/list?name=twin&limit=1&cursor="+str(t, p1["next_cursor"])).obj(t, http.StatusOK)
		if len(array(t, p2["items"])) != 1 || p2["next_cursor"] != nil {
			t.Fatalf("second page of twins: %v", p2)
		}
		if object(t, array(t, p1["items"])[0])["uuid"] == object(t, array(t, p2["items"])[0])["uuid"] {
			t.Fatal("both pages returned the same twin")
		}
		// The name is matched exactly.
		for _, q := range []string{"nobody", "twi", "Twin", "sona"} {
			page := h.get("/sonas/list?name="+q).obj(t, http.StatusOK)
			if len(array(t, page["items"])) != 0 || page["next_cursor"] != nil {
				t.Fatalf("?name=%s = %v, want no items", q, page)
			}
		}
		// Names with spaces and unicode are found when query-escaped.
		odd := h.newSona("Ünïcode name & co")
		page = h.get("/sonas/list?name=%C3%9Cn%C3%AFcode%20name%20%26%20co").obj(t, http.StatusOK)
		if items := array(t, page["items"]); len(items) != 1 || object(t, items[0])["uuid"] != odd {
			t.Fatalf("unicode name: %v", page)
		}
	})

	t.Run("bad limit", func(t *testing.T) {
		max := h.app.Config.Server.MaxListLimit
		for _, l := range []string{"0", "-1", "abc", "1.5", "", strconv.Itoa(max + 1), "99999999999999999999"} {
			if l == "" {
				continue // an empty limit means the default
			}
			wantError(t, h.get("/sonas/list?limit="+l), 400, "invalid_limit")
		}
		if r := h.get("/sonas/list?limit=" + strconv.Itoa(max)); r.status != 200 {
			t.Fatalf("limit=max: %s", r)
		}
	})
}

// ---------------------------------------------------------------------------
// Routing and error bodies

func TestRouting(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")
	tests := []struct {
		method, path string
		status       int
		code         string
		allow        string
	}{
		{"GET", "/", 404, "not_found", ""},
		{"GET", "/nope", 404, "not_found", ""},
		{"GET", "/sonas/", 404, "not_found", ""},
		{"GET", "/sona/", 404, "not_found", ""},
		{"GET", "/memory/", 404, "not_found", ""},
		{"GET", "/api/v1/sonas/list", 404, "not_found", ""},
		{"POST", "/nope", 404, "not_found", ""},
		{"POST", "/healthz", 405, "method_not_allowed", "GET"},
		{"DELETE", "/sona/" + id, 405, "method_not_allowed", "GET"},
		{"PUT", "/sonas", 405, "method_not_allowed", "POST"},
		{"GET", "/memories", 405, "method_not_allowed", "POST"},
		{"GET", "/files", 405, "method_not_allowed", "POST"},
		{"GET", "/sona/" + id + "/chat", 405, "method_not_allowed", "POST"},
		{"POST", "/memories/list", 405, "method_not_allowed", "GET"},
		{"PATCH", "/sonas/list", 405, "method_not_allowed", "GET"},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := h.do(tc.method, tc.path, nil)
			wantError(t, r, tc.status, tc.code)
			if tc.allow != "" && !strings.Contains(r.header.Get("Allow"), tc.allow) {
				t.Fatalf("Allow %q does not list %s", r.header.Get("Allow"), tc.allow)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Bad input never crashes the server.

func TestGarbageBodies(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")
	h.insertText(id, "something to recall about the garden")
	_, before, _ := h.health()
	length := h.sonaLength(id)

	deepArray := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	deepObject := strings.Repeat(`{"a":`, 20_000) + "1" + strings.Repeat("}", 20_000)
	// Nesting inside the free-form data Struct, under protojson's limit.
	deepData := `{"sona":"` + id + `","data":{"kind":"text","content":"x","x":` +
		strings.Repeat(`{"a":`, 5_000) + "1" + strings.Repeat("}", 5_000) + `}}`
	deepDataList := `{"sona":"` + id + `","data":{"kind":"text","content":"x","x":` +
		strings.Repeat(`[`, 5_000) + strings.Repeat("]", 5_000) + `}}`
	big := strings.Repeat("ab", 1<<20) // 2 MB, under the 8 MB body limit
	garbage := []struct {
		name string
		body []byte
	}{
		{"binary junk", []byte("\x00\xff\xfe\x01garbage\x80\x81{[")},
		{"invalid UTF-8 in a string", []byte("{\"name\":\"\xff\xfe\",\"content\":\"\xff\",\"query\":\"\xff\"}")},
		{"deeply nested arrays", []byte(deepArray)},
		{"deeply nested objects", []byte(deepObject)},
		{"deeply nested data", []byte(deepData)},
		{"deeply nested data list", []byte(deepDataList)},
		{"JSON array", []byte(`[]`)},
		{"JSON array of objects", []byte(`[{"name":"x","content":"y"}]`)},
		{"JSON string", []byte(`"hello"`)},
		{"JSON number", []byte(`12345`)},
		{"JSON true", []byte(`true`)},
		{"JSON null", []byte(`null`)},
		{"null fields", []byte(`{"name":null,"content":null,"query":null,"sona":null,"data":null}`)},
		{"2 MB unknown field", []byte(`{"junk":"` + big + `"}`)},
		{"2 MB string", []byte(`"` + big + `"`)},
		{"truncated", []byte(`{"name":"abc`)},
		{"two objects", []byte(`{"name":"a"}{"name":"b"}`)},
		{"duplicate keys", []byte(`{"name":"a","name":"b","content":"x","content":"y"}`)},
		{"number overflow", []byte(`{"k":99999999999999999999999,"content":"x","query":"x"}`)},
		{"NaN", []byte(`{"k":NaN,"content":"x","query":"x"}`)},
		{"wrong types", []byte(`{"name":[],"content":{},"query":1,"sona":true,"data":[],"k":"x"}`)},
	}
	routes := []string{"/sonas", "/sona/" + id + "/chat", "/sona/" + id + "/query", "/sona/" + id + "/recall", "/memories"}
	for _, route := range routes {
		for _, g := range garbage {
			t.Run(route+"/"+g.name, func(t *testing.T) {
				r := h.do("POST", route, g.body, "Content-Type", "application/json")
				wantClientError(t, r)
			})
		}
	}

	// A 2 MB string in the field a route uses: rejected where it would be
	// stored (too large a memory, too long a name), never a 5xx.
	t.Run("2 MB fields", func(t *testing.T) {
		tests := []struct {
			route  string
			body   map[string]any
			status int
		}{
			{"/sonas", map[string]any{"name": big}, 400},
			{"/sona/" + id + "/chat", map[string]any{"content": big}, 413},
			{"/memories", map[string]any{"sona": id, "data": map[string]any{"kind": "text", "content": big}}, 413},
			{"/memories", map[string]any{"sona": big, "data": map[string]any{"kind": "text", "content": "x"}}, 404},
		}
		for _, tc := range tests {
			r := h.post(tc.route, tc.body)
			wantError(t, r, tc.status, "")
		}
	})

	// /files takes any bytes: garbage is a valid file.
	t.Run("files", func(t *testing.T) {
		for _, g := range garbage[:4] {
			r := h.do("POST", "/files", g.body)
			m := r.obj(t, http.StatusCreated)
			if num(t, m["size"]) != int64(len(g.body)) {
				t.Fatalf("%s: size %v, want %d", g.name, m["size"], len(g.body))
			}
		}
	})

	// The server still answers, and nothing was stored by the garbage.
	_, after, _ := h.health()
	if after != before {
		t.Fatalf("garbage changed the memory count: %d -> %d", before, after)
	}
	if got := h.sonaLength(id); got != length {
		t.Fatalf("garbage changed the chain: length %d -> %d", length, got)
	}
}

// A body the server cannot read is answered with what is wrong, in words
// (not protojson's "proto: unexpected EOF"), in the JSON error shape.
func TestMalformedJSONMessages(t *testing.T) {
	h := newHarness(t)
	sona := h.newSona("words")
	for _, tc := range []struct {
		path, body, want string
	}{
		{"/sonas", `{"name":"alice"`, "the body is not valid JSON: unexpected end at byte 15"},
		{"/sonas", `{"name":`, "the body is not valid JSON: unexpected end at byte 8"},
		{"/sonas", `{not json}`, "the body is not valid JSON: invalid character 'n' looking for beginning of object key string, at byte 2 (line 1, column 2)"},
		{"/sonas", "{\n  \"name\": tru\n}", "the body is not valid JSON: invalid character '\\n' in literal true (expecting 'e'), at byte 16 (line 2, column 14)"},
		{"/sonas", `{"name":"a"} {}`, "the body is not valid JSON: invalid character '{' after top-level value, at byte 14 (line 1, column 14)"},
		{"/sonas", `{"name":"a",}`, "the body is not valid JSON: invalid character '}' looking for beginning of object key string, at byte 13 (line 1, column 13)"},
		{"/sonas", `{"name":"a","color":"red"}`, `unknown field "color" (line 1, column 13)`},
		{"/sonas", `{"name":42}`, `field "name" takes a string, not 42 (line 1, column 9)`},
		{"/sonas", `{"name":"\ud800"}`, "a string holds an escape that is not a character (a lone UTF-16 surrogate?)"},
		{"/sona/" + sona + "/recall", `{"query":"x","k":"ten"}`, `field "k" takes a 32-bit whole number, not "ten" (line 1, column 18)`},
		{"/sona/" + sona + "/recall", `{"query":"x","k":1.5}`, `field "k" takes a 32-bit whole number, not 1.5 (line 1, column 18)`},
		{"/sona/" + sona + "/recall", `{"query":"x","k":99999999999}`, `field "k" takes a 32-bit whole number, not 99999999999 (line 1, column 18)`},
		{"/sona/" + sona + "/chat", `{"content":"x","stream":"yes"}`, `field "stream" takes true or false, not "yes" (line 1, column 25)`},
		{"/import", `{"format":"memoria-export/1","sonas":`, "not an export: the body is not valid JSON: unexpected end at byte 37"},
	} {
		r := h.do("POST", tc.path, tc.body)
		wantError(t, r, 400, "malformed_json")
		var e struct{ Error struct{ Message string } }
		json.Unmarshal(r.body, &e)
		if e.Error.Message != tc.want {
			t.Errorf("%s %s:\n got %q\nwant %q", tc.path, tc.body, e.Error.Message, tc.want)
		}
	}
}
