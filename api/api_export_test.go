package api_test

// GET /export, POST /import and GET /anchors against real stores: a
// populated self is exported, imported into a fresh data directory and
// exported again.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/config"
)

// quiet keeps the heartbeat's timer out of a test: ticks only when asked.
func quiet(c *config.Config) { c.Heartbeat.Interval = config.Duration(time.Hour) }

// populate fills a self with what an export must carry: several sonas
// with chats (causal and sequential links, co-access for an agent),
// inserts with labels and a cross-sona edge, a file, anchors, the
// backbone, a pending concept, a conflict, a compression (archived
// memories) and dream insights.
func populate(t *testing.T, h *harness) {
	t.Helper()
	alice, bob, carol := h.newSona("alice"), h.newSona("bob"), h.newSona("carol")
	for _, s := range []string{"My sister Maya lives in Lisbon.", "I keep my bicycle in the blue shed.", "We decided to paint the shed green."} {
		h.post("/sona/"+alice+"/chat", map[string]any{"content": s, "agent_id": "agent-1"}).obj(t, http.StatusOK)
	}
	topics := []string{"astronomy telescopes", "sourdough baking", "chess openings", "alpine hiking routes", "jazz piano voicings",
		"tax filing deadlines", "garden tomato pests", "rust borrow checker", "marathon training plans", "watercolor techniques"}
	var first string
	for i, topic := range topics {
		c := h.insertText(alice, fmt.Sprintf("Note %d about %s and nothing else.", i, topic))
		if first == "" {
			first = c
		}
	}
	h.insert(map[string]any{"sona": bob, "kind": "error", "agent_id": "ops",
		"data":  map[string]any{"kind": "text", "content": "The payment API had an outage for two hours."},
		"edges": []any{map[string]any{"target": map[string]any{"/": first}, "weight": 0.5}}})
	h.insert(map[string]any{"sona": bob, "labels": map[string]any{"anchor": "milestone", "team": "core"},
		"data": map[string]any{"kind": "other", "name": "Bob", "content": "Version one is out."}})
	h.post("/sona/"+bob+"/chat", map[string]any{"content": "What happened with the payment API?"}).obj(t, http.StatusOK)
	file := h.putFile([]byte("a small file"))
	h.insert(map[string]any{"sona": carol, "kind": "fact",
		"data": map[string]any{"kind": "file", "name": "notes.txt", "mimeType": "text/plain", "content": map[string]any{"/": file}}})
	h.insertText(carol, "Carol prefers tea to coffee.")
	h.post("/sona/"+alice+"/recall", map[string]any{"query": "where is the bicycle?", "agent_id": "agent-2"}).obj(t, http.StatusOK)

	h.post("/backbone", map[string]any{"agent_id": "ceo", "content": "We tell users the truth."}).obj(t, http.StatusCreated)
	if st := h.post("/backbone/contribute", map[string]any{"agent_id": "a1", "concept_key": "design",
		"content": "Memory must organize itself."}).obj(t, http.StatusOK)["status"]; st != "pending" {
		t.Fatalf("one contribution is %v, want pending", st)
	}
	h.post("/backbone/contribute", map[string]any{"agent_id": "a1", "concept_key": "lunch", "content": "Pizza on Fridays for the whole team."}).obj(t, http.StatusOK)
	if st := h.post("/backbone/contribute", map[string]any{"agent_id": "a2", "concept_key": "lunch",
		"content": "Quarterly tax reports are due in April."}).obj(t, http.StatusOK)["status"]; st != "conflict" {
		t.Fatalf("diverging contributions are %v, want conflict", st)
	}
	rep := h.post("/admin/heartbeat", nil).obj(t, http.StatusOK)
	if len(array(t, rep["compressions"])) == 0 {
		t.Fatalf("alice was not compressed: %v", rep)
	}
	rep = h.post("/admin/heartbeat?dream=1", nil).obj(t, http.StatusOK)
	if len(array(t, rep["insights"])) == 0 {
		t.Fatalf("no insight dreamed: %v", rep)
	}
}

// exportAll returns the export of every sona, parsed, without exported_at.
func (h *harness) exportAll(t *testing.T) (map[string]any, []byte) {
	t.Helper()
	// The evaluator works behind the writes: export once it has caught up,
	// so that a round trip compares like with like.
	if err := h.app.Self.Evals.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := h.get("/export?all=1")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("export: %s", r)
	}
	doc := object(t, decodeJSON(t, r.body))
	if num(t, doc["exported_at"]) <= 0 {
		t.Fatalf("exported_at %v", doc["exported_at"])
	}
	delete(doc, "exported_at")
	return doc, r.body
}

// importDoc posts an export and returns the result.
func (h *harness) importDoc(t *testing.T, body []byte, status int) map[string]any {
	t.Helper()
	return h.do("POST", "/import", body, "Content-Type", "application/json").obj(t, status)
}

func TestExportImportRoundTrip(t *testing.T) {
	a := newHarness(t, quiet)
	populate(t, a)
	docA, raw := a.exportAll(t)
	wantKeys(t, docA, "format", "embedder", "dims", "scope", "sona", "sonas", "memories", "blocks", "anchors", "pending", "conflicts", "tombstones")
	if docA["format"] != "memoria-export/1" || docA["scope"] != "all" {
		t.Fatalf("header %v %v", docA["format"], docA["scope"])
	}
	sonas := array(t, docA["sonas"])
	mems := array(t, docA["memories"])
	var acts, backbones int64
	archived, insights, labelled, coaccess := 0, 0, 0, 0
	for _, s := range sonas {
		s := object(t, s)
		wantKeys(t, s, "uuid", "name", "created_at", "backbone", "head", "length", "last_memory", "chain", "similarity", "partial")
		acts += num(t, s["length"])
		if s["backbone"] == true {
			backbones++
		}
	}
	for _, m := range mems {
		m := object(t, m)
		wantKeys(t, m, "cid", "data", "timestamp", "edges", "meta", "associations", "coaccess", "vector")
		meta := object(t, m["meta"])
		if meta["archived"] == true {
			archived++
		}
		if meta["insight"] != nil {
			insights++
		}
		if object(t, meta["labels"])["team"] == "core" {
			labelled++
		}
		if len(array(t, m["coaccess"])) > 0 {
			coaccess++
		}
	}
	// (Inserts through the actors record no similarity statistics yet, so
	// sonas carry none here; memory's TestImportRestoresWhatAppendsDoNot
	// covers them.)
	if coaccess == 0 {
		t.Fatal("the export carries no co-access partners")
	}
	if len(sonas) != 4 || backbones != 1 || archived == 0 || insights == 0 || labelled != 1 ||
		len(array(t, docA["blocks"])) != 1 || len(array(t, docA["anchors"])) < 3 ||
		len(array(t, docA["pending"])) != 2 || len(array(t, docA["conflicts"])) != 1 {
		t.Fatalf("export of the populated self: %d sonas (%d backbone), %d archived, %d insights, %d labelled, %d blocks, %d anchors, %d pending, %d conflicts",
			len(sonas), backbones, archived, insights, labelled, len(array(t, docA["blocks"])), len(array(t, docA["anchors"])),
			len(array(t, docA["pending"])), len(array(t, docA["conflicts"])))
	}

	// Into a fresh data directory, then out again: the same document.
	b := newHarness(t, quiet)
	res := b.importDoc(t, raw, http.StatusCreated)
	if num(t, res["appended"]) != acts || num(t, res["memories"]) != int64(len(mems)) || len(array(t, res["sonas"])) != 4 {
		t.Fatalf("import result %v, want %d ACTs of %d memories", res, acts, len(mems))
	}
	docB, _ := b.exportAll(t)
	if !reflect.DeepEqual(docA, docB) {
		t.Fatalf("the export of the import differs from the export:\n%s", firstDifference(t, docA, docB))
	}
	for _, path := range []string{"/anchors", "/insights", "/backbone/pending", "/conflicts", "/backbone", "/sonas/list"} {
		if ga, gb := a.get(path).obj(t, http.StatusOK), b.get(path).obj(t, http.StatusOK); !reflect.DeepEqual(ga, gb) {
			t.Fatalf("GET %s differs after the import:\n%v\n%v", path, ga, gb)
		}
	}
	if _, ma, _ := a.health(); ma != b.memoryCount() {
		t.Fatalf("%d memories imported, %d exported", b.memoryCount(), ma)
	}

	// Importing it again changes nothing.
	res = b.importDoc(t, raw, http.StatusOK)
	if num(t, res["appended"]) != 0 {
		t.Fatalf("a second import appended %v", res["appended"])
	}
	if docB2, _ := b.exportAll(t); !reflect.DeepEqual(docA, docB2) {
		t.Fatalf("a second import changed the self:\n%s", firstDifference(t, docA, docB2))
	}

	// The imported self lives on: its sonas chat and recall.
	bob := str(t, b.get("/sonas/list?name=bob").obj(t, http.StatusOK)["items"].([]any)[0].(map[string]any)["uuid"])
	before := b.sonaLength(bob)
	b.post("/sona/"+bob+"/chat", map[string]any{"content": "Did the payment API recover?"}).obj(t, http.StatusOK)
	if got := b.sonaLength(bob); got != before+2 {
		t.Fatalf("chat on an imported sona: length %d → %d", before, got)
	}
	rec := b.post("/sona/"+bob+"/recall", map[string]any{"query": "payment API outage", "scope": "sona"}).obj(t, http.StatusOK)
	if !strings.Contains(string(mustJSON(t, rec)), "had an outage for two hours") {
		t.Fatalf("recall in the imported self does not find the outage: %v", rec)
	}
	// Now its chain is longer than the export's: importing the export again is a conflict.
	wantError(t, b.do("POST", "/import", raw, "Content-Type", "application/json"), http.StatusConflict, "conflict")
}

// A sona export imports on its own (with the backbone and the prefixes of
// the chains it links to), and the export of everything then continues
// those chains.
func TestImportSonaExportThenEverything(t *testing.T) {
	a := newHarness(t, quiet)
	populate(t, a)
	bob := str(t, a.get("/sonas/list?name=bob").obj(t, http.StatusOK)["items"].([]any)[0].(map[string]any)["uuid"])
	r := a.get("/export?sona=bob")
	partial := 0
	for _, s := range array(t, r.obj(t, http.StatusOK)["sonas"]) {
		if object(t, s)["partial"] == true {
			partial++
		}
	}
	if partial == 0 {
		t.Fatal("bob's export carries no partial chain, yet bob links to alice")
	}
	c := newHarness(t, quiet)
	res := c.importDoc(t, r.body, http.StatusCreated)
	// The backbone first, then bob, then the chains bob links to.
	if names := sonaNames(t, res); len(names) != 3 || names[0] != "backbone" || names[1] != "bob" {
		t.Fatalf("sonas imported from bob's export: %v", names)
	}
	if c.sonaLength(bob) != a.sonaLength(bob) {
		t.Fatal("bob's chain was not imported whole")
	}
	_, all := a.exportAll(t)
	c.importDoc(t, all, http.StatusCreated)
	for _, s := range array(t, a.get("/sonas/list").obj(t, http.StatusOK)["items"]) {
		id := str(t, object(t, s)["uuid"])
		if sa, sc := a.sona(id), c.sona(id); !reflect.DeepEqual(sa, sc) {
			t.Fatalf("sona %s: %v in the source, %v after both imports", id, sa, sc)
		}
	}
}

func decodeJSONObj(t *testing.T, b []byte) map[string]any {
	t.Helper()
	return object(t, decodeJSON(t, b))
}

func sonaNames(t *testing.T, res map[string]any) []string {
	t.Helper()
	var out []string
	for _, s := range array(t, res["sonas"]) {
		out = append(out, str(t, object(t, s)["name"]))
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// firstDifference names the first path where two JSON values differ.
func firstDifference(t *testing.T, a, b any) string {
	var walk func(path string, a, b any) string
	walk = func(path string, a, b any) string {
		switch x := a.(type) {
		case map[string]any:
			y, ok := b.(map[string]any)
			if !ok {
				return path
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			for k := range y {
				if _, ok := x[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				if d := walk(path+"."+k, x[k], y[k]); d != "" {
					return d
				}
			}
			return ""
		case []any:
			y, ok := b.([]any)
			if !ok || len(x) != len(y) {
				return fmt.Sprintf("%s: %d items vs %v", path, len(x), len(y))
			}
			for i := range x {
				if d := walk(fmt.Sprintf("%s[%d]", path, i), x[i], y[i]); d != "" {
					return d
				}
			}
			return ""
		}
		if !reflect.DeepEqual(a, b) {
			return fmt.Sprintf("%s: %v vs %v", path, a, b)
		}
		return ""
	}
	return walk("", a, b)
}

func TestImportRefusesBadInputWritingNothing(t *testing.T) {
	src := newHarness(t, quiet)
	alice := src.newSona("alice")
	for _, s := range []string{"one fact about tea", "we decided to ship", "a third note on maps"} {
		src.insertText(alice, s)
	}
	_, good := src.exportAll(t)
	corrupt := func(edit func(doc map[string]any)) []byte {
		doc := decodeJSONObj(t, good)
		edit(doc)
		return mustJSON(t, doc)
	}
	lastMemory := func(doc map[string]any) map[string]any {
		ms := array(t, doc["memories"])
		return object(t, ms[len(ms)-1])
	}

	dst := newHarness(t, quiet)
	for _, tc := range []struct {
		name   string
		body   []byte
		ctype  string
		status int
		code   string
	}{
		{"empty", nil, "application/json", 400, "malformed_json"},
		{"not json", []byte("{not json"), "application/json", 400, "malformed_json"},
		{"not an export", []byte(`{"hello":"world"}`), "application/json", 400, "malformed_json"},
		{"future format", []byte(`{"format":"memoria-export/2","whatever":[]}`), "application/json", 400, "invalid"},
		{"no format", []byte(`{}`), "application/json", 400, "invalid"},
		{"unknown field", corrupt(func(d map[string]any) { d["extra"] = 1 }), "application/json", 400, "malformed_json"},
		{"not JSON content", good, "text/plain", 415, "unsupported_media_type"},
		{"changed content", corrupt(func(d map[string]any) {
			object(t, lastMemory(d)["data"])["content"] = "something else"
		}), "application/json", 400, "invalid"},
		{"broken chain", corrupt(func(d map[string]any) {
			s := object(t, array(t, d["sonas"])[0])
			s["length"] = json.Number("7")
		}), "application/json", 400, "invalid"},
		{"bad vector", corrupt(func(d map[string]any) { lastMemory(d)["vector"] = "AAAA" }), "application/json", 400, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, dst.do("POST", "/import", tc.body, "Content-Type", tc.ctype), tc.status, tc.code)
		})
	}
	if sonas, mems, _ := dst.health(); sonas != 0 || mems != 0 {
		t.Fatalf("refused imports wrote %d sonas and %d memories", sonas, mems)
	}
	if a := dst.get("/anchors").obj(t, http.StatusOK); len(array(t, a["items"])) != 0 {
		t.Fatalf("refused imports wrote anchors: %v", a)
	}

	small := newHarness(t, quiet, func(c *config.Config) { c.Server.MaxImportBytes = 1000 })
	wantError(t, small.do("POST", "/import", good, "Content-Type", "application/json"), http.StatusRequestEntityTooLarge, "too_large")
	// The import limit is its own: a large export still fits where other bodies would not.
	roomy := newHarness(t, quiet, func(c *config.Config) { c.Server.MaxBodyBytes = 1000 })
	roomy.importDoc(t, good, http.StatusCreated)
}

func TestExportErrors(t *testing.T) {
	h := newHarness(t, quiet)
	h.newSona("twin")
	h.twinSona("twin")
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/export", 400, "invalid"},
		{"/export?all=1&sona=twin", 400, "invalid"},
		{"/export?all=maybe", 400, "invalid"},
		{"/export?all=1&format=tar", 400, "invalid"},
		{"/export?sona=nobody", 404, "not_found"},
		{"/export?sona=twin", 409, "conflict"},
	} {
		wantError(t, h.get(tc.path), tc.status, tc.code)
	}
	wantError(t, h.post("/export?all=1", nil), http.StatusMethodNotAllowed, "method_not_allowed")
	// An empty self exports too, with every section.
	empty := newHarness(t, quiet)
	doc, _ := empty.exportAll(t)
	for _, section := range []string{"sonas", "memories", "blocks", "anchors", "pending", "conflicts"} {
		if len(array(t, doc[section])) != 0 {
			t.Fatalf("empty self: %s = %v", section, doc[section])
		}
	}
}

func TestAnchorsRoute(t *testing.T) {
	h := newHarness(t, quiet)
	ops := h.newSona("ops")
	want := []string{
		h.insertText(ops, "We decided to move the database."),
		h.insertText(ops, "The database went down at noon."),
	}
	h.insertText(ops, "Lunch was pasta.")
	want = append(want, h.insertText(ops, "We shipped the migration."))
	var got []string
	var categories []string
	cursor := ""
	for pages := 0; ; pages++ {
		path := "/anchors?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		page := h.get(path).obj(t, http.StatusOK)
		wantKeys(t, page, "items", "next_cursor")
		for _, it := range array(t, page["items"]) {
			a := object(t, it)
			wantKeys(t, a, "cid", "category", "time", "sona")
			if str(t, a["sona"]) != ops || num(t, a["time"]) <= 0 {
				t.Fatalf("anchor %v", a)
			}
			got = append(got, str(t, a["cid"]))
			categories = append(categories, str(t, a["category"]))
		}
		if page["next_cursor"] == nil {
			break
		}
		cursor = str(t, page["next_cursor"])
		if pages > 3 {
			t.Fatal("paging does not end")
		}
	}
	if !slices.Equal(got, want) || !slices.Equal(categories, []string{"decision", "incident", "milestone"}) {
		t.Fatalf("anchors %v %v, want %v", got, categories, want)
	}
	wantError(t, h.get("/anchors?cursor=abc"), http.StatusBadRequest, "invalid_cursor")
	wantError(t, h.get("/anchors?limit=0"), http.StatusBadRequest, "invalid_limit")
}
