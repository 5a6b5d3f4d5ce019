package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multibase"

	"github.com/memoria-ai/memoria/config"
)

// ---------------------------------------------------------------------------
// POST /memories, GET /memory/{cid}

// putFile uploads bytes and returns the file's CID.
func (h *harness) putFile(data []byte) string {
	h.t.Helper()
	m := h.do("POST", "/files", data, "Content-Type", "application/octet-stream").obj(h.t, http.StatusCreated)
	wantKeys(h.t, m, "cid", "size")
	if num(h.t, m["size"]) != int64(len(data)) {
		h.t.Fatalf("file size %v, want %d", m["size"], len(data))
	}
	return str(h.t, m["cid"])
}

func cidBytes(t *testing.T, s string) []byte {
	t.Helper()
	c, err := cid.Decode(s)
	if err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return c.Bytes()
}

func TestInsertUnionMembers(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")
	fileCID := h.putFile([]byte("file contents\n"))

	ts := int64(1_700_000_000)
	tests := []struct {
		name string
		data map[string]any
		// extra request fields
		ts     *int64
		kind   string
		labels map[string]any
		agent  string
	}{
		{name: "text", data: map[string]any{"kind": "text", "content": "The sky is blue."},
			ts: &ts, kind: "fact", labels: map[string]any{"b": "2", "a": "1"}, agent: "agent-7"},
		{name: "other", data: map[string]any{"kind": "other", "name": "bob", "content": "Hi, I'm Bob."}},
		{name: "other without name", data: map[string]any{"kind": "other", "content": "Anonymous words."}},
		{name: "self", data: map[string]any{"kind": "self", "name": "alice",
			"parts":       []any{map[string]any{"content": "I think so.", "model": "m-1"}, map[string]any{"content": "Second part."}},
			"stop_reason": "endTurn"}, kind: "goal"},
		{name: "file", data: map[string]any{"kind": "file", "name": "notes.txt", "mimeType": "text/plain",
			"content": map[string]any{"/": fileCID}}},
		{name: "file bare", data: map[string]any{"kind": "file", "content": map[string]any{"/": fileCID}}},
	}
	var seq int64
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := map[string]any{"sona": id, "data": tc.data}
			if tc.ts != nil {
				req["timestamp"] = *tc.ts
			}
			if tc.kind != "" {
				req["kind"] = tc.kind
			}
			if tc.labels != nil {
				req["labels"] = tc.labels
			}
			if tc.agent != "" {
				req["agent_id"] = tc.agent
			}
			_, before, _ := h.health()
			res := h.post("/memories", req).obj(t, http.StatusCreated)
			wantKeys(t, res, "cid", "seq", "existed", "deduplicated", "similarity", "threshold", "replayed")
			if res["deduplicated"] != false {
				t.Fatalf("distinct memory deduplicated: %v", res)
			}
			c := str(t, res["cid"])
			if got := num(t, res["seq"]); got != seq {
				t.Fatalf("seq %d, want %d", got, seq)
			}
			if res["existed"] != false {
				t.Fatalf("existed %v", res["existed"])
			}
			parsed, err := cid.Decode(c)
			if err != nil || parsed.Version() != 1 || parsed.Prefix().Codec != 0x71 {
				t.Fatalf("cid %s is not a dag-cbor CIDv1 (%v)", c, err)
			}
			if _, after, _ := h.health(); after != before+1 {
				t.Fatalf("memory count %d -> %d", before, after)
			}

			m := h.memory(c)
			wantKeys(t, m, "cid", "data", "timestamp", "edges", "meta")
			if m["cid"] != c {
				t.Fatalf("GET cid %v, want %s", m["cid"], c)
			}
			if !jsonEqual(t, m["data"], tc.data) {
				t.Fatalf("data %v, want %v", m["data"], tc.data)
			}
			if tc.ts != nil {
				if num(t, m["timestamp"]) != *tc.ts {
					t.Fatalf("timestamp %v, want %d", m["timestamp"], *tc.ts)
				}
			} else if m["timestamp"] != nil {
				t.Fatalf("timestamp %v, want null", m["timestamp"])
			}
			if edges := array(t, m["edges"]); len(edges) != 0 {
				t.Fatalf("edges %v", edges)
			}
			meta := object(t, m["meta"])
			wantKind := tc.kind
			if wantKind == "" {
				wantKind = "note"
			}
			if meta["kind"] != wantKind {
				t.Fatalf("meta.kind %v, want %s", meta["kind"], wantKind)
			}
			if !jsonEqual(t, meta["sonas"], []any{id}) {
				t.Fatalf("meta.sonas %v, want [%s]", meta["sonas"], id)
			}
			wantLabels := tc.labels
			if wantLabels == nil {
				wantLabels = map[string]any{}
			}
			if !jsonEqual(t, meta["labels"], wantLabels) {
				t.Fatalf("meta.labels %v, want %v", meta["labels"], wantLabels)
			}
			if meta["agent_id"] != tc.agent {
				t.Fatalf("meta.agent_id %v, want %q", meta["agent_id"], tc.agent)
			}
			num(t, meta["created_at"])
			num(t, meta["access_count"])

			// The same body again is the same memory, already there.
			again := h.post("/memories", req).obj(t, http.StatusOK)
			wantKeys(t, again, "cid", "seq", "existed", "deduplicated", "similarity", "threshold", "replayed")
			if again["cid"] != c || again["existed"] != true || again["seq"] != nil {
				t.Fatalf("second insert %v, want cid %s, existed true, seq null", again, c)
			}
			if got := h.sonaLength(id); got != seq+1 {
				t.Fatalf("sona length %d after re-insert, want %d", got, seq+1)
			}
			if _, after, _ := h.health(); after != before+1 {
				t.Fatalf("re-insert changed the memory count")
			}
			seq++
		})
	}
	// The labels render with sorted keys.
	first := h.get("/memories/list?sona=" + id + "&limit=1")
	if !bytes.Contains(first.body, []byte(`"labels":{"a":"1","b":"2"}`)) {
		t.Fatalf("labels are not rendered in key order: %s", first)
	}
}

func TestInsertEdgesAndSonas(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")
	a := h.insertText(id, "first")
	b := h.insertText(id, "second")
	c := h.insertText(id, "third")

	// Edges given in any order come back sorted by target bytes.
	req := map[string]any{
		"sona": "alice", // by name
		"data": map[string]any{"kind": "text", "content": "supported"},
		"edges": []any{
			map[string]any{"target": map[string]any{"/": c}, "weight": 0.25},
			map[string]any{"target": map[string]any{"/": a}, "weight": 0.5},
			map[string]any{"target": map[string]any{"/": b}, "weight": 1},
		},
	}
	res := h.insert(req)
	m := h.memory(str(t, res["cid"]))
	edges := array(t, m["edges"])
	if len(edges) != 3 {
		t.Fatalf("edges %v", edges)
	}
	want := map[string]float64{a: 0.5, b: 1, c: 0.25}
	targets := edgeTargets(t, m)
	if !slices.IsSortedFunc(targets, func(x, y string) int { return bytes.Compare(cidBytes(t, x), cidBytes(t, y)) }) {
		t.Fatalf("edges are not sorted by target bytes: %v", targets)
	}
	for _, e := range edges {
		edge := object(t, e)
		target := str(t, object(t, edge["target"])["/"])
		if w := fnum(t, edge["weight"]); w != want[target] {
			t.Fatalf("edge to %s has weight %v, want %v", target, w, want[target])
		}
	}
	// The order of edges in the request does not change the memory.
	slices.Reverse(req["edges"].([]any))
	again := h.post("/memories", req).obj(t, http.StatusOK)
	if again["cid"] != res["cid"] || again["existed"] != true {
		t.Fatalf("same memory with edges reordered: %v vs %v", again, res)
	}

	// Inserting an existing memory into another sona adds it there
	// without a new memory.
	other := h.newSona("bob")
	_, before, _ := h.health()
	joined := h.insert(map[string]any{"sona": other, "data": map[string]any{"kind": "text", "content": "first"}})
	if joined["cid"] != a || num(t, joined["seq"]) != 0 || joined["existed"] != false {
		t.Fatalf("joining bob: %v (want cid %s)", joined, a)
	}
	if _, after, _ := h.health(); after != before {
		t.Fatalf("joining a second sona made a new memory: %d -> %d", before, after)
	}
	if sonas := array(t, object(t, h.memory(a)["meta"])["sonas"]); !jsonEqual(t, sonas, []any{id, other}) {
		t.Fatalf("meta.sonas %v, want [%s %s]", sonas, id, other)
	}
	if h.sonaLength(other) != 1 || h.sona(other)["last_memory"] != a {
		t.Fatalf("bob after join: %v", h.sona(other))
	}

	// The CID depends on the data, timestamp and edges only: key order and
	// spacing of the request do not matter, nor do kind, labels or agent.
	x := h.do("POST", "/memories", `{"sona":"`+id+`","data":{"kind":"text","content":"canonical"},"timestamp":5}`).obj(t, http.StatusCreated)
	y := h.do("POST", "/memories", `{ "timestamp" : 5, "data" : { "content" : "canonical", "kind" : "text" }, "sona" : "`+id+`", "kind":"fact", "labels":{"k":"v"}, "agent_id":"z" }`).obj(t, http.StatusOK)
	if x["cid"] != y["cid"] || y["existed"] != true {
		t.Fatalf("same memory spelled differently: %v vs %v", x, y)
	}
	if meta := object(t, h.memory(str(t, x["cid"]))["meta"]); meta["kind"] != "note" || len(object(t, meta["labels"])) != 0 {
		t.Fatalf("re-insert changed the metadata: %v", meta)
	}
	z := h.do("POST", "/memories", `{"sona":"`+id+`","data":{"kind":"text","content":"canonical"},"timestamp":6}`).obj(t, http.StatusCreated)
	w := h.do("POST", "/memories", `{"sona":"`+id+`","data":{"kind":"text","content":"canonical"}}`).obj(t, http.StatusCreated)
	if z["cid"] == x["cid"] || w["cid"] == x["cid"] || w["cid"] == z["cid"] {
		t.Fatalf("timestamps do not change the CID: %v %v %v", x["cid"], z["cid"], w["cid"])
	}
	// A CID in another multibase names the same memory.
	parsed, _ := cid.Decode(a)
	b58, err := parsed.StringOfBase(multibase.Base58BTC)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.memory(b58); got["cid"] != a {
		t.Fatalf("GET /memory/%s = cid %v, want %s", b58, got["cid"], a)
	}

	// An ambiguous name is a conflict.
	h.newSona("twin")
	h.twinSona("twin")
	wantError(t, h.post("/memories", map[string]any{"sona": "twin", "data": map[string]any{"kind": "text", "content": "x"}}), 409, "conflict")
}

func TestInsertErrors(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")
	stored := h.insertText(id, "a stored memory")
	fileCID := h.putFile([]byte("a stored file"))
	// A CID of a memory that was never stored: a valid dag-cbor CID.
	notStored, err := cid.Prefix{Version: 1, Codec: 0x71, MhType: 0x12, MhLength: -1}.Sum([]byte("never stored"))
	if err != nil {
		t.Fatal(err)
	}
	notStoredRaw, err := cid.Prefix{Version: 1, Codec: 0x55, MhType: 0x12, MhLength: -1}.Sum([]byte("never stored"))
	if err != nil {
		t.Fatal(err)
	}
	text := map[string]any{"kind": "text", "content": "fresh"}
	edge := func(target any, w float64) []any {
		return []any{map[string]any{"target": target, "weight": w}}
	}
	tests := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"missing sona", map[string]any{"data": text}, 400, "invalid"},
		{"unknown sona name", map[string]any{"sona": "nobody", "data": text}, 404, "not_found"},
		{"unknown sona uuid", map[string]any{"sona": uuid.NewString(), "data": text}, 404, "not_found"},
		{"missing data", map[string]any{"sona": id}, 400, "invalid"},
		{"data not an object", map[string]any{"sona": id, "data": "text"}, 400, "malformed_json"},
		{"data list", map[string]any{"sona": id, "data": []any{text}}, 400, "malformed_json"},
		{"data without kind", map[string]any{"sona": id, "data": map[string]any{"content": "x"}}, 400, "invalid"},
		{"data kind not a string", map[string]any{"sona": id, "data": map[string]any{"kind": 3, "content": "x"}}, 400, "invalid"},
		{"data unknown kind", map[string]any{"sona": id, "data": map[string]any{"kind": "poem", "content": "x"}}, 400, "invalid"},
		{"text without content", map[string]any{"sona": id, "data": map[string]any{"kind": "text"}}, 400, "invalid"},
		{"text content not a string", map[string]any{"sona": id, "data": map[string]any{"kind": "text", "content": 7}}, 400, "invalid"},
		{"text extra field", map[string]any{"sona": id, "data": map[string]any{"kind": "text", "content": "x", "mood": "happy"}}, 400, "invalid"},
		{"other without content", map[string]any{"sona": id, "data": map[string]any{"kind": "other", "name": "bob"}}, 400, "invalid"},
		{"self without parts", map[string]any{"sona": id, "data": map[string]any{"kind": "self", "name": "a", "parts": []any{}}}, 400, "invalid"},
		{"self without name", map[string]any{"sona": id, "data": map[string]any{"kind": "self", "parts": []any{map[string]any{"content": "x"}}}}, 400, "invalid"},
		{"self bad stop_reason", map[string]any{"sona": id, "data": map[string]any{"kind": "self", "name": "a",
			"parts": []any{map[string]any{"content": "x"}}, "stop_reason": "tired"}}, 400, "invalid"},
		{"self part extra field", map[string]any{"sona": id, "data": map[string]any{"kind": "self", "name": "a",
			"parts": []any{map[string]any{"content": "x", "tone": "y"}}}}, 400, "invalid"},
		{"file without content", map[string]any{"sona": id, "data": map[string]any{"kind": "file", "name": "f"}}, 400, "invalid"},
		{"file content as string", map[string]any{"sona": id, "data": map[string]any{"kind": "file", "content": fileCID}}, 400, "invalid"},
		{"file content malformed link", map[string]any{"sona": id, "data": map[string]any{"kind": "file", "content": map[string]any{"/": "nope"}}}, 400, "invalid"},
		{"file content not stored", map[string]any{"sona": id, "data": map[string]any{"kind": "file", "content": map[string]any{"/": notStoredRaw.String()}}}, 400, "invalid"},
		{"edge target malformed", map[string]any{"sona": id, "data": text, "edges": edge(map[string]any{"/": "not-a-cid"}, 1)}, 400, "invalid_cid"},
		{"edge without target", map[string]any{"sona": id, "data": text, "edges": []any{map[string]any{"weight": 1}}}, 400, "invalid"},
		{"edge target as string", map[string]any{"sona": id, "data": text, "edges": edge(stored, 1)}, 400, "malformed_json"},
		{"edge to unstored CID", map[string]any{"sona": id, "data": text, "edges": edge(map[string]any{"/": notStored.String()}, 1)}, 400, "invalid"},
		{"edge to a file", map[string]any{"sona": id, "data": text, "edges": edge(map[string]any{"/": fileCID}, 1)}, 400, "invalid"},
		{"duplicate edges", map[string]any{"sona": id, "data": text, "edges": []any{
			map[string]any{"target": map[string]any{"/": stored}, "weight": 1},
			map[string]any{"target": map[string]any{"/": stored}, "weight": 0.5}}}, 400, "invalid"},
		{"edge weight not a number", map[string]any{"sona": id, "data": text, "edges": []any{
			map[string]any{"target": map[string]any{"/": stored}, "weight": "heavy"}}}, 400, "malformed_json"},
		{"unknown XmetaV kind", map[string]any{"sona": id, "data": text, "kind": "bogus"}, 400, "invalid"},
		{"unknown top-level field", map[string]any{"sona": id, "data": text, "color": "red"}, 400, "malformed_json"},
		{"timestamp not a number", map[string]any{"sona": id, "data": text, "timestamp": "yesterday"}, 400, "malformed_json"},
		{"labels not strings", map[string]any{"sona": id, "data": text, "labels": map[string]any{"a": 1}}, 400, "malformed_json"},
		{"malformed JSON", `{"sona":`, 400, "malformed_json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sonas, before, indexed := h.health()
			length := h.sonaLength(id)
			wantError(t, h.post("/memories", tc.body), tc.status, tc.code)
			s2, after, i2 := h.health()
			if s2 != sonas || after != before || i2 != indexed {
				t.Fatalf("a failed insert changed health: %d/%d/%d -> %d/%d/%d", sonas, before, indexed, s2, after, i2)
			}
			if got := h.sonaLength(id); got != length {
				t.Fatalf("a failed insert changed the chain length %d -> %d", length, got)
			}
		})
	}
	// The sona still takes writes after the failures.
	res := h.insert(map[string]any{"sona": id, "data": text, "edges": edge(map[string]any{"/": stored}, 1)})
	if h.sona(id)["last_memory"] != res["cid"] {
		t.Fatalf("insert after failures: %v, sona %v", res, h.sona(id))
	}
}

func TestGetMemoryErrors(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")
	h.insertText(id, "x")
	fileCID := h.putFile([]byte("bytes"))
	unknown, _ := cid.Prefix{Version: 1, Codec: 0x71, MhType: 0x12, MhLength: -1}.Sum([]byte("nothing"))
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/memory/not-a-cid", 400, "invalid_cid"},
		{"/memory/bafy", 400, "invalid_cid"},
		{"/memory/" + unknown.String(), 404, "not_found"},
		{"/memory/" + fileCID, 404, "not_found"},
		{"/memory/" + str(t, h.sona(id)["head"]), 404, "not_found"}, // an ACT, not a memory
	} {
		wantError(t, h.get(tc.path), tc.status, tc.code)
	}
}

// ---------------------------------------------------------------------------
// GET /memories/list

func TestListMemories(t *testing.T) {
	h := newHarness(t)

	empty := h.get("/memories/list").obj(t, http.StatusOK)
	wantKeys(t, empty, "items", "next_cursor")
	if len(array(t, empty["items"])) != 0 || empty["next_cursor"] != nil {
		t.Fatalf("empty listing %v", empty)
	}

	a, b := h.newSona("alice"), h.newSona("bob")
	var chainA, chainB []string
	for i := range 5 {
		chainA = append(chainA, h.insertText(a, fmt.Sprintf("alice memory %d", i)))
	}
	for i := range 3 {
		chainB = append(chainB, h.insertText(b, fmt.Sprintf("bob memory %d", i)))
	}
	// One memory in both sonas.
	h.insert(map[string]any{"sona": b, "data": map[string]any{"kind": "text", "content": "alice memory 0"}})
	chainB = append(chainB, chainA[0])
	_, total, _ := h.health()
	if total != 8 {
		t.Fatalf("%d memories, want 8", total)
	}

	t.Run("all", func(t *testing.T) {
		seen := map[string]int{}
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("paging does not end")
			}
			path := "/memories/list?limit=3"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			page := h.get(path).obj(t, http.StatusOK)
			wantKeys(t, page, "items", "next_cursor")
			items := array(t, page["items"])
			if len(items) > 3 {
				t.Fatalf("%d items with limit 3", len(items))
			}
			for _, it := range items {
				m := object(t, it)
				wantKeys(t, m, "cid", "data", "timestamp", "edges", "meta")
				seen[str(t, m["cid"])]++
			}
			if page["next_cursor"] == nil {
				break
			}
			cursor = str(t, page["next_cursor"])
		}
		if int64(len(seen)) != total {
			t.Fatalf("listed %d memories, want %d", len(seen), total)
		}
		for c, n := range seen {
			if n != 1 {
				t.Fatalf("memory %s listed %d times", c, n)
			}
		}
		for _, c := range append(slices.Clone(chainA), chainB...) {
			if seen[c] != 1 {
				t.Fatalf("memory %s not listed", c)
			}
		}
		// A page that takes exactly the rest ends the listing.
		all := h.get("/memories/list?limit=8").obj(t, http.StatusOK)
		if len(array(t, all["items"])) != 8 || all["next_cursor"] != nil {
			t.Fatalf("limit=8 over 8 memories: next_cursor %v", all["next_cursor"])
		}
	})

	t.Run("by sona", func(t *testing.T) {
		for _, tc := range []struct {
			ref   string
			chain []string
		}{{a, chainA}, {"alice", chainA}, {b, chainB}, {"bob", chainB}} {
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 10 {
					t.Fatal("paging does not end")
				}
				path := "/memories/list?limit=2&sona=" + tc.ref
				if cursor != "" {
					path += "&cursor=" + cursor
				}
				page := h.get(path).obj(t, http.StatusOK)
				wantKeys(t, page, "items", "next_cursor")
				for _, it := range array(t, page["items"]) {
					got = append(got, str(t, object(t, it)["cid"]))
				}
				if page["next_cursor"] == nil {
					break
				}
				cursor = str(t, page["next_cursor"])
				if n, err := strconv.ParseInt(cursor, 10, 64); err != nil || n != int64(len(got)) {
					t.Fatalf("sona cursor %q after %d items is not the next seq", cursor, len(got))
				}
			}
			if !slices.Equal(got, tc.chain) {
				t.Fatalf("?sona=%s listed %v, want chain order %v", tc.ref, got, tc.chain)
			}
		}
		// A cursor jumps into the chain.
		page := h.get("/memories/list?sona="+a+"&cursor=3").obj(t, http.StatusOK)
		var got []string
		for _, it := range array(t, page["items"]) {
			got = append(got, str(t, object(t, it)["cid"]))
		}
		if !slices.Equal(got, chainA[3:]) || page["next_cursor"] != nil {
			t.Fatalf("cursor=3: %v, want %v", got, chainA[3:])
		}
		// A cursor past the end is an empty page.
		page = h.get("/memories/list?sona="+a+"&cursor=99").obj(t, http.StatusOK)
		if len(array(t, page["items"])) != 0 || page["next_cursor"] != nil {
			t.Fatalf("cursor past the end: %v", page)
		}
		// A new sona lists nothing.
		empty := h.newSona("empty")
		page = h.get("/memories/list?sona="+empty).obj(t, http.StatusOK)
		if len(array(t, page["items"])) != 0 || page["next_cursor"] != nil {
			t.Fatalf("empty sona: %v", page)
		}
	})

	t.Run("errors", func(t *testing.T) {
		h.newSona("twin")
		h.twinSona("twin")
		for _, tc := range []struct {
			query  string
			status int
			code   string
		}{
			{"cursor=abc", 400, "invalid_cursor"},
			{"cursor=" + a, 400, "invalid_cursor"},
			{"sona=" + a + "&cursor=abc", 400, "invalid_cursor"},
			{"sona=" + a + "&cursor=-1", 400, "invalid_cursor"},
			{"sona=" + a + "&cursor=" + chainA[0], 400, "invalid_cursor"},
			{"sona=" + uuid.NewString(), 404, "not_found"},
			{"sona=nobody", 404, "not_found"},
			{"sona=twin", 409, "conflict"},
			{"limit=0", 400, "invalid_limit"},
			{"limit=-3", 400, "invalid_limit"},
			{"limit=x", 400, "invalid_limit"},
			{"limit=1001", 400, "invalid_limit"},
		} {
			wantError(t, h.get("/memories/list?"+tc.query), tc.status, tc.code)
		}
	})
}

// ---------------------------------------------------------------------------
// POST /files, GET /file/{cid}

func TestFiles(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")

	data := make([]byte, 3000)
	for i := range data {
		data[i] = byte(i*7 + i/13)
	}
	r := h.do("POST", "/files", data, "Content-Type", "application/octet-stream")
	m := r.obj(t, http.StatusCreated)
	wantKeys(t, m, "cid", "size")
	fc := str(t, m["cid"])
	if num(t, m["size"]) != int64(len(data)) {
		t.Fatalf("size %v", m["size"])
	}
	parsed, err := cid.Decode(fc)
	if err != nil || parsed.Prefix().Codec != 0x55 || parsed.Version() != 1 {
		t.Fatalf("file CID %s is not a raw CIDv1 (%v)", fc, err)
	}
	if sum, _ := parsed.Prefix().Sum(data); !sum.Equals(parsed) {
		t.Fatalf("file CID %s does not hash the bytes (%s)", fc, sum)
	}
	// Uploading the same bytes again gives the same CID.
	if again := h.putFile(data); again != fc {
		t.Fatalf("same bytes, CID %s then %s", fc, again)
	}
	// Files are not memories.
	if _, mems, _ := h.health(); mems != 0 {
		t.Fatalf("a file upload made %d memories", mems)
	}

	got := h.get("/file/" + fc)
	if got.status != 200 || !bytes.Equal(got.body, data) {
		t.Fatalf("GET /file: %d, %d bytes", got.status, len(got.body))
	}
	if got.header.Get("Content-Type") == "" {
		t.Fatal("GET /file has no Content-Type")
	}

	text := []byte("plain text file\n")
	tc := h.putFile(text)
	if ct := h.get("/file/" + tc).header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("sniffed Content-Type %q for text", ct)
	}

	// A file memory serves its content with its mimeType.
	res := h.insert(map[string]any{"sona": id, "data": map[string]any{
		"kind": "file", "name": "data.bin", "mimeType": "application/x-memoria-test", "content": map[string]any{"/": fc}}})
	mc := str(t, res["cid"])
	got = h.get("/file/" + mc)
	if got.status != 200 || !bytes.Equal(got.body, data) {
		t.Fatalf("GET /file/{memory}: %d, %d bytes", got.status, len(got.body))
	}
	if ct := got.header.Get("Content-Type"); ct != "application/x-memoria-test" {
		t.Fatalf("Content-Type %q, want the memory's mimeType", ct)
	}
	if cd := got.header.Get("Content-Disposition"); !strings.Contains(cd, "data.bin") {
		t.Fatalf("Content-Disposition %q does not name the file", cd)
	}

	textMemory := h.insertText(id, "not a file")
	unknown, _ := cid.Prefix{Version: 1, Codec: 0x55, MhType: 0x12, MhLength: -1}.Sum([]byte("nope"))
	unknownMem, _ := cid.Prefix{Version: 1, Codec: 0x71, MhType: 0x12, MhLength: -1}.Sum([]byte("nope"))
	wantError(t, h.get("/file/"+textMemory), 400, "not_a_file")
	wantError(t, h.get("/file/"+unknown.String()), 404, "not_found")
	wantError(t, h.get("/file/"+unknownMem.String()), 404, "not_found")
	wantError(t, h.get("/file/garbage"), 400, "invalid_cid")

	t.Run("larger than a block", func(t *testing.T) {
		_, before, _ := h.health()
		big := bytes.Repeat([]byte{'z'}, h.app.Config.Store.MaxBlockBytes+1)
		wantError(t, h.do("POST", "/files", big), http.StatusRequestEntityTooLarge, "too_large")
		bc, _ := cid.Prefix{Version: 1, Codec: 0x55, MhType: 0x12, MhLength: -1}.Sum(big)
		wantError(t, h.get("/file/"+bc.String()), 404, "not_found")
		if _, after, _ := h.health(); after != before {
			t.Fatal("a rejected file changed the memory count")
		}
		// Exactly the block limit is fine.
		h.putFile(big[1:])
	})
}

// The body limit applies to every route, JSON or not.
func TestBodyLimit(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Server.MaxBodyBytes = 2048 })
	id := h.newSona("alice")
	pad := strings.Repeat("x", 4096)
	for _, tc := range []struct {
		route string
		body  map[string]any
	}{
		{"/sonas", map[string]any{"name": pad}},
		{"/sona/" + id + "/chat", map[string]any{"content": pad}},
		{"/sona/" + id + "/query", map[string]any{"content": pad}},
		{"/sona/" + id + "/recall", map[string]any{"query": pad}},
		{"/memories", map[string]any{"sona": id, "data": map[string]any{"kind": "text", "content": pad}}},
	} {
		t.Run(tc.route, func(t *testing.T) {
			wantError(t, h.post(tc.route, tc.body), http.StatusRequestEntityTooLarge, "too_large")
		})
	}
	t.Run("/files", func(t *testing.T) {
		wantError(t, h.do("POST", "/files", []byte(pad)), http.StatusRequestEntityTooLarge, "too_large")
	})
	// Under the limit all is well.
	h.post("/sona/"+id+"/chat", map[string]any{"content": "short"}).obj(t, http.StatusOK)
	if h.sonaLength(id) != 2 {
		t.Fatal("chain length after one chat")
	}
	if _, mems, _ := h.health(); mems != 2 {
		t.Fatalf("%d memories, want 2", mems)
	}
}

// The trustless gateway (GET /ipfs/{cid}) is tested in gateway_test.go.

func TestFileIsSandboxed(t *testing.T) {
	h := newHarness(t)
	// An HTML file is served sandboxed, never as a page of the API's origin.
	fc := h.putFile([]byte("<script>alert(1)</script>"))
	r := h.get("/file/" + fc)
	if r.status != 200 || !strings.Contains(r.header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("file served without a sandbox: %s %v", r, r.header)
	}
}

func TestInsertDedupAndRecallOptions(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("notes")
	first := h.post("/memories", map[string]any{"sona": id, "data": map[string]any{"kind": "text", "content": "My sister Maya lives in Lisbon near the river"}}).obj(t, http.StatusCreated)
	dup := h.post("/memories", map[string]any{"sona": id, "data": map[string]any{"kind": "text", "content": "my sister Maya lives in Lisbon, near the river!"}}).obj(t, http.StatusOK)
	if dup["deduplicated"] != true || dup["cid"] != first["cid"] || dup["seq"] != nil || fnum(t, dup["similarity"]) < fnum(t, dup["threshold"]) {
		t.Fatalf("near-duplicate insert: %v", dup)
	}
	kept := h.post("/memories", map[string]any{"sona": id, "dedup": false, "data": map[string]any{"kind": "text", "content": "my sister Maya lives in Lisbon, near the river!"}}).obj(t, http.StatusCreated)
	if kept["deduplicated"] != false || kept["cid"] == first["cid"] {
		t.Fatalf("dedup:false: %v", kept)
	}
	h.insertText(id, "The train to Porto takes three hours")

	// Time travel: as of seq 0 only the first memory existed.
	r := h.post("/sona/"+id+"/recall", map[string]any{"query": "Maya Lisbon train Porto", "as_of": 0}).obj(t, http.StatusOK)
	for _, m := range array(t, r["memories"]) {
		if object(t, m)["cid"] != first["cid"] {
			t.Fatalf("as_of 0 recalled %v", object(t, m)["cid"])
		}
	}
	wantError(t, h.post("/sona/"+id+"/recall", map[string]any{"query": "x", "as_of": 99}), 400, "invalid")
	wantError(t, h.post("/sona/"+id+"/recall", map[string]any{"query": "x", "scope": "all"}), 400, "invalid")
	wantError(t, h.post("/sona/"+id+"/recall", map[string]any{"query": "x", "agent_id": "a\x01b"}), 400, "invalid")
	// Without explain there is no explanation.
	r = h.post("/sona/"+id+"/recall", map[string]any{"query": "Maya", "scope": "sona"}).obj(t, http.StatusOK)
	if m := object(t, array(t, r["memories"])[0]); m["explain"] != nil {
		t.Fatalf("explain without asking: %v", m["explain"])
	}
}

// TestInsertRequestID: a write sent again with its request id (body or
// Idempotency-Key) is answered as the first time, though its memory
// differs (another timestamp), and appends nothing; ids are per sona;
// a chat step too; malformed ids and a header that contradicts the body are refused and
// write nothing.
func TestInsertRequestID(t *testing.T) {
	h := newHarness(t)
	a, b := h.newSona("alpha"), h.newSona("beta")
	body := func(sona string, ts int, id string) map[string]any {
		m := map[string]any{"sona": sona, "timestamp": ts, "dedup": false, "data": map[string]any{"kind": "text", "content": "once"}}
		if id != "" {
			m["request_id"] = id
		}
		return m
	}
	first := h.post("/memories", body(a, 1, "req-1"))
	if first.status != 201 {
		t.Fatal(first)
	}
	var r1, r2 map[string]any
	json.Unmarshal(first.body, &r1)
	for _, again := range []response{
		h.post("/memories", body(a, 2, "req-1")),
		h.do("POST", "/memories", body(a, 3, ""), "Idempotency-Key", "req-1"),
	} {
		json.Unmarshal(again.body, &r2)
		if again.status != 201 || r2["replayed"] != true || r2["seq"] != r1["seq"] || r2["cid"] != r1["cid"] {
			t.Fatalf("sent again: %s, first %s", again, first)
		}
	}
	if n := len(h.chain(a)); n != 1 {
		t.Fatalf("alpha's chain has %d memories after one request sent three times", n)
	}
	if r := h.post("/memories", body(b, 2, "req-1")); r.status != 201 || strings.Contains(string(r.body), `"replayed":true`) {
		t.Fatalf("the same id in another sona: %s", r)
	}
	for _, bad := range []response{
		h.post("/memories", body(a, 4, "has space")),
		h.post("/memories", body(a, 4, strings.Repeat("x", 129))),
		h.do("POST", "/memories", body(a, 4, "req-2"), "Idempotency-Key", "req-3"),
	} {
		if bad.status != 400 || !strings.Contains(string(bad.body), `"invalid"`) {
			t.Fatalf("a bad request id: %s", bad)
		}
	}
	if n := len(h.chain(a)); n != 1 {
		t.Fatalf("refused requests appended: alpha has %d memories", n)
	}
	// A chat step: the answer once, the memories once.
	c1 := h.do("POST", "/sona/"+a+"/chat", map[string]any{"content": "hello"}, "Idempotency-Key", "step-1")
	c2 := h.post("/sona/"+a+"/chat", map[string]any{"content": "hello", "request_id": "step-1"})
	if c1.status != 200 || c2.status != 200 || string(c1.body) != string(c2.body) {
		t.Fatalf("a chat step sent twice: %s, then %s", c1, c2)
	}
	if n := len(h.chain(a)); n != 3 {
		t.Fatalf("a chat step sent twice: alpha has %d memories, want 3", n)
	}
}
