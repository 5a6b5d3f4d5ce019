package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// ---------------------------------------------------------------------------
// POST /sona/{uuid}/chat

func checkScoredRefs(t *testing.T, v any) []string {
	t.Helper()
	var cids []string
	for _, it := range array(t, v) {
		ref := object(t, it)
		wantKeys(t, ref, "cid", "score")
		cids = append(cids, str(t, ref["cid"]))
		fnum(t, ref["score"])
	}
	return cids
}

func TestChat(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")

	first := h.post("/sona/"+id+"/chat", map[string]any{
		"content": "I love painting watercolor landscapes in the mountains.",
	}).obj(t, http.StatusOK)
	wantKeys(t, first, "input", "response", "recalled")
	in := object(t, first["input"])
	wantKeys(t, in, "cid")
	inputCID := str(t, in["cid"])
	resp := object(t, first["response"])
	wantKeys(t, resp, "cid", "content", "model", "stop_reason")
	respCID := str(t, resp["cid"])
	if !strings.HasPrefix(str(t, resp["content"]), "[offline model]") {
		t.Fatalf("response %q is not the offline model's", resp["content"])
	}
	if resp["stop_reason"] != "endTurn" || str(t, resp["model"]) == "" {
		t.Fatalf("response model/stop_reason: %v", resp)
	}
	if got := checkScoredRefs(t, first["recalled"]); len(got) != 0 {
		t.Fatalf("first chat of an empty sona recalled %v", got)
	}

	s := h.sona(id)
	checkSonaShape(t, s)
	if num(t, s["length"]) != 2 || s["head"] == nil || s["last_memory"] != respCID {
		t.Fatalf("after one chat the sona is %v; want length 2, a head, last_memory %s", s, respCID)
	}
	if sonas, mems, indexed := h.health(); sonas != 1 || mems != 2 || indexed != 2 {
		t.Fatalf("health after one chat: %d %d %d", sonas, mems, indexed)
	}

	// Both memories are stored as the chat describes them.
	input := h.memory(inputCID)
	if d := object(t, input["data"]); d["kind"] != "text" || d["content"] != "I love painting watercolor landscapes in the mountains." {
		t.Fatalf("input memory data %v", d)
	}
	if len(array(t, input["edges"])) != 0 {
		t.Fatalf("the first input has no previous step to link to: %v", input["edges"])
	}
	num(t, input["timestamp"])
	response := h.memory(respCID)
	rd := object(t, response["data"])
	if rd["kind"] != "self" || rd["name"] != "alice" || rd["stop_reason"] != "endTurn" {
		t.Fatalf("response memory data %v", rd)
	}
	parts := array(t, rd["parts"])
	if len(parts) != 1 || object(t, parts[0])["content"] != resp["content"] || object(t, parts[0])["model"] != resp["model"] {
		t.Fatalf("response parts %v, want the reply %v", parts, resp)
	}
	if targets := edgeTargets(t, response); !slices.Contains(targets, inputCID) {
		t.Fatalf("the response does not link its input: %v", targets)
	}

	// A second chat on the same topic recalls the first input.
	second := h.post("/sona/"+id+"/chat", map[string]any{
		"content": "What do I love painting in the mountains?", "k": 5, "budget_chars": 2000,
	}).obj(t, http.StatusOK)
	recalled := checkScoredRefs(t, second["recalled"])
	if !slices.Contains(recalled, inputCID) {
		t.Fatalf("second chat recalled %v, not the first input %s", recalled, inputCID)
	}
	secondInput := str(t, object(t, second["input"])["cid"])
	if slices.Contains(recalled, secondInput) {
		t.Fatal("a chat recalled its own input")
	}
	reply := str(t, object(t, second["response"])["content"])
	if !strings.HasPrefix(reply, "[offline model]") || !strings.Contains(reply, "watercolor") {
		t.Fatalf("the offline model did not quote the recalled memory: %q", reply)
	}
	// The new input is linked to the previous step's response.
	if targets := edgeTargets(t, h.memory(secondInput)); !slices.Equal(targets, []string{respCID}) {
		t.Fatalf("second input edges %v, want [%s]", targets, respCID)
	}
	if got := h.sonaLength(id); got != 4 {
		t.Fatalf("length %d after two chats, want 4", got)
	}

	// A named speaker makes the input an `other` memory.
	named := h.post("/sona/"+id+"/chat", map[string]any{"content": "Hello there.", "name": "bob", "agent_id": "agent-1"}).obj(t, http.StatusOK)
	nm := h.memory(str(t, object(t, named["input"])["cid"]))
	if d := object(t, nm["data"]); d["kind"] != "other" || d["name"] != "bob" || d["content"] != "Hello there." {
		t.Fatalf("named input data %v", d)
	}
	if meta := object(t, nm["meta"]); meta["agent_id"] != "agent-1" {
		t.Fatalf("named input meta %v", meta)
	}
}

func edgeTargets(t *testing.T, m map[string]any) []string {
	t.Helper()
	var out []string
	for _, e := range array(t, m["edges"]) {
		edge := object(t, e)
		wantKeys(t, edge, "target", "weight")
		target := object(t, edge["target"])
		wantKeys(t, target, "/")
		out = append(out, str(t, target["/"]))
		fnum(t, edge["weight"])
	}
	return out
}

func TestChatErrors(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")
	h.post("/sona/"+id+"/chat", map[string]any{"content": "hello"}).obj(t, http.StatusOK)
	_, mems, _ := h.health()
	tests := []struct {
		name   string
		path   string
		body   string
		status int
		code   string
	}{
		{"empty content", id, `{"content":""}`, 400, "invalid"},
		{"blank content", id, `{"content":" \n\t"}`, 400, "invalid"},
		{"no content", id, `{}`, 400, "invalid"},
		{"unknown sona", uuid.NewString(), `{"content":"hi"}`, 404, "not_found"},
		{"no sona of that name", "nobody", `{"content":"hi"}`, 404, "not_found"},
		{"malformed JSON", id, `{"content":"hi"`, 400, "malformed_json"},
		{"unknown field", id, `{"content":"hi","model":"gpt"}`, 400, "malformed_json"},
		{"k too large", id, `{"content":"hi","k":100000}`, 400, "invalid"},
		{"k negative", id, `{"content":"hi","k":-1}`, 400, "invalid"},
		{"budget too large", id, `{"content":"hi","budget_chars":100000000}`, 400, "invalid"},
		{"budget negative", id, `{"content":"hi","budget_chars":-5}`, 400, "invalid"},
		{"k not a number", id, `{"content":"hi","k":"ten"}`, 400, "malformed_json"},
		// Every field is checked before the input is stored (issue 13 #1).
		{"agent_id with a NUL", id, `{"content":"x","agent_id":"\u0000"}`, 400, "invalid"},
		{"agent_id too long", id, `{"content":"x","agent_id":"` + strings.Repeat("a", 201) + `"}`, 400, "invalid"},
		{"name with a control character", id, `{"content":"x","name":"bo\u0007b"}`, 400, "invalid"},
		{"name too long", id, `{"content":"x","name":"` + strings.Repeat("n", 201) + `"}`, 400, "invalid"},
		{"content not UTF-8", id, "{\"content\":\"\xff\xfe\"}", 400, ""},
		{"unknown scope", id, `{"content":"x","scope":"everything"}`, 400, "invalid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", "/sona/"+tc.path+"/chat", tc.body)
			wantError(t, r, tc.status, tc.code)
		})
	}
	t.Run("wrong content type", func(t *testing.T) {
		r := h.do("POST", "/sona/"+id+"/chat", `{"content":"hi"}`, "Content-Type", "text/plain")
		wantError(t, r, 415, "unsupported_media_type")
	})
	if got := h.sonaLength(id); got != 2 {
		t.Fatalf("failed chats changed the chain: length %d", got)
	}
	if _, after, _ := h.health(); after != mems {
		t.Fatalf("failed chats changed the memory count %d -> %d", mems, after)
	}
	// camelCase field names are accepted too.
	r := h.do("POST", "/sona/"+id+"/chat", `{"content":"hi again","budgetChars":100,"agentId":"x"}`)
	r.obj(t, http.StatusOK)
}

// ---------------------------------------------------------------------------
// POST /sona/{uuid}/query

func TestQuery(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")

	// A query on an empty sona answers and recalls nothing.
	q := h.post("/sona/"+id+"/query", map[string]any{"content": "What is my cat called?"}).obj(t, http.StatusOK)
	wantKeys(t, q, "response", "recalled")
	if len(checkScoredRefs(t, q["recalled"])) != 0 {
		t.Fatalf("query of an empty sona recalled %v", q["recalled"])
	}

	chat := h.post("/sona/"+id+"/chat", map[string]any{"content": "My cat is called Whiskers."}).obj(t, http.StatusOK)
	inputCID := str(t, object(t, chat["input"])["cid"])
	length := h.sonaLength(id)
	before := h.sona(id)
	_, mems, _ := h.health()

	q = h.post("/sona/"+id+"/query", map[string]any{"content": "What is my cat called?"}).obj(t, http.StatusOK)
	wantKeys(t, q, "response", "recalled")
	resp := object(t, q["response"])
	wantKeys(t, resp, "cid", "content", "model", "stop_reason")
	if resp["cid"] != "" {
		t.Fatalf("a query stores nothing, yet its response has cid %v", resp["cid"])
	}
	content := str(t, resp["content"])
	if !strings.HasPrefix(content, "[offline model]") || !strings.Contains(content, "Whiskers") {
		t.Fatalf("query response %q", content)
	}
	if recalled := checkScoredRefs(t, q["recalled"]); !slices.Contains(recalled, inputCID) {
		t.Fatalf("query recalled %v, not %s", recalled, inputCID)
	}

	after := h.sona(id)
	if num(t, after["length"]) != length || after["head"] != before["head"] {
		t.Fatalf("query changed the sona: %v -> %v", before, after)
	}
	if _, got, _ := h.health(); got != mems {
		t.Fatalf("query changed the memory count: %d -> %d", mems, got)
	}

	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{id, `{"content":""}`, 400},
		{id, `{"content":"x","k":100000}`, 400},
		{id, `{"content":"x"`, 400},
		{uuid.NewString(), `{"content":"x"}`, 404},
		{"nope", `{"content":"x"}`, 404}, // no sona has that name
	} {
		wantError(t, h.do("POST", "/sona/"+tc.path+"/query", tc.body), tc.status, "")
	}
}

// ---------------------------------------------------------------------------
// POST /sona/{uuid}/recall

func TestRecall(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")

	empty := h.post("/sona/"+id+"/recall", map[string]any{"query": "anything"}).obj(t, http.StatusOK)
	wantKeys(t, empty, "memories")
	if len(array(t, empty["memories"])) != 0 {
		t.Fatalf("recall on an empty store: %v", empty)
	}

	garden := h.insertText(id, "The garden has roses and tulips in spring.")
	h.insertText(id, "The car needs new tires before winter.")
	h.insertText(id, "Quantum computers use qubits.")
	// A memory supported by the garden memory, reached by expansion.
	h.insert(map[string]any{
		"sona":  id,
		"data":  map[string]any{"kind": "text", "content": "Planting bulbs in autumn."},
		"edges": []any{map[string]any{"target": map[string]any{"/": garden}, "weight": 1}},
	})
	length := h.sonaLength(id)

	answer := h.post("/sona/"+id+"/recall", map[string]any{"query": "roses and tulips in the garden", "k": 1, "explain": true})
	if answer.header.Get("Content-Length") == "" {
		t.Error("a recall's answer has no Content-Length (sent chunked)")
	}
	r := answer.obj(t, http.StatusOK)
	wantKeys(t, r, "memories")
	mems := array(t, r["memories"])
	if len(mems) == 0 {
		t.Fatal("recall found nothing")
	}
	hits := 0
	var cids []string
	for _, it := range mems {
		rm := object(t, it)
		wantKeys(t, rm, "cid", "score", "via", "explain", "memory", "rank", "collapsed")
		c := str(t, rm["cid"])
		cids = append(cids, c)
		fnum(t, rm["score"])
		array(t, rm["collapsed"])
		switch rm["via"] {
		case "hit":
			hits++
			if fnum(t, rm["rank"]) != 1 {
				t.Fatalf("the one hit has rank %v", rm["rank"])
			}
		case "expansion", "coaccess":
			if rm["rank"] != nil {
				t.Fatalf("%v memory has rank %v", rm["via"], rm["rank"])
			}
		default:
			t.Fatalf("via %v", rm["via"])
		}
		ex := object(t, rm["explain"])
		wantKeys(t, ex, "dense", "bm25", "affinity", "metric", "dense_rank", "bm25_rank", "affinity_rank", "metric_rank", "relevance",
			"kind_weight", "recency", "importance", "sona_similarity", "prior_unit", "coaccess", "contributions", "context", "time", "speaker", "session",
			"feedback", "feedback_rank", "reply", "rerank", "rerank_rank")
		if ex["rerank"] != nil || ex["rerank_rank"] != nil { // no reranker: not reranked
			t.Fatalf("rerank %v, rerank_rank %v without a reranker", ex["rerank"], ex["rerank_rank"])
		}
		sum := 0.0
		for k, v := range object(t, ex["contributions"]) {
			if k == "rerank" && v == nil {
				continue
			}
			sum += fnum(t, v)
		}
		if d := sum - fnum(t, rm["score"]); d > 1e-9 || d < -1e-9 {
			t.Fatalf("contributions add up to %v, score %v", sum, rm["score"])
		}
		m := object(t, rm["memory"])
		wantKeys(t, m, "cid", "data", "timestamp", "edges", "meta")
		if m["cid"] != c {
			t.Fatalf("memory cid %v under recalled cid %s", m["cid"], c)
		}
		if str(t, object(t, m["data"])["kind"]) == "" {
			t.Fatalf("memory data without kind: %v", m)
		}
		array(t, m["edges"])
		meta := object(t, m["meta"])
		if !slices.Contains(array(t, meta["sonas"]), any(id)) {
			t.Fatalf("meta.sonas %v does not name %s", meta["sonas"], id)
		}
	}
	if hits != 1 {
		t.Fatalf("k=1 gave %d hits", hits)
	}
	if !slices.Contains(cids, garden) {
		t.Fatalf("recall for the garden did not return it: %v", cids)
	}
	if h.sonaLength(id) != length {
		t.Fatal("recall changed the chain")
	}
	// expand 0: the hit alone.
	r = h.post("/sona/"+id+"/recall", map[string]any{"query": "roses and tulips in the garden", "k": 1, "expand": 0}).obj(t, http.StatusOK)
	if mems := array(t, r["memories"]); len(mems) != 1 || object(t, mems[0])["cid"] != garden {
		t.Fatalf("k 1, expand 0: %v", mems)
	}

	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"empty query", id, `{"query":""}`, 400, "invalid"},
		{"blank query", id, `{"query":"   "}`, 400, "invalid"},
		{"no query", id, `{"k":3}`, 400, "invalid"},
		{"k too large", id, `{"query":"x","k":100000}`, 400, "invalid"},
		{"k negative", id, `{"query":"x","k":-1}`, 400, "invalid"},
		{"budget negative", id, `{"query":"x","budget_chars":-1}`, 400, "invalid"},
		{"expand negative", id, `{"query":"x","expand":-1}`, 400, "invalid"},
		{"expand too large", id, `{"query":"x","expand":100000}`, 400, "invalid"},
		{"unknown field", id, `{"query":"x","content":"y"}`, 400, "malformed_json"},
		{"malformed JSON", id, `{"query":`, 400, "malformed_json"},
		{"unknown sona", uuid.NewString(), `{"query":"x"}`, 404, "not_found"},
		{"no sona of that name", "nobody", `{"query":"x"}`, 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, h.do("POST", "/sona/"+tc.path+"/recall", tc.body), tc.status, tc.code)
		})
	}
}
