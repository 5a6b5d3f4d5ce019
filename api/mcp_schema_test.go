package api_test

// What MCP hosts see of the tools and prompts: schemas a strict
// function-calling host accepts, enums that match what the server takes,
// annotations that hold, and prompts that work.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
)

// openStrings are the string properties whose values are open (text, ids,
// names). Any other string property is a closed set and must carry an
// enum: a new property has to be put here, or given one, deliberately.
var openStrings = map[string]bool{
	"sona": true, "query": true, "content": true, "name": true, "agent_id": true, "cursor": true,
	"base64": true, "mime_type": true, "target": true, "cid": true, "uri": true, "text": true,
	"file_uri": true, "response": true, "model": true, "input_cid": true, "response_cid": true,
	"uuid": true, "head": true, "next_cursor": true, "label": true, "reason": true, "request_id": true,
}

// closedSets are the enums the schemas must carry, by tool and property
// path, from the domain's own constants and the configured kinds.
func closedSets(cfg config.Config) map[string][]string {
	var kinds []string
	for k := range cfg.Kinds {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	scopes := []string{recall.ScopeSelf, recall.ScopeSona}
	stops := []string{string(llm.StopEndTurn), string(llm.StopSequence), string(llm.StopMaxTokens)}
	return map[string][]string{
		"recall input scope":            scopes,
		"query input scope":             scopes,
		"chat input scope":              scopes,
		"insert input kind":             kinds,
		"recall output memories[].kind": {model.KindSelf, model.KindOther, model.KindText, model.KindFile},
		"recall output memories[].via":  {recall.ViaHit, recall.ViaCoAccess, recall.ViaExpansion},
		"query output stop_reason":      stops,
		"chat output stop_reason":       stops,
	}
}

// walkSchema checks a schema node as a strict host reads it and records
// the enums it finds by path.
func walkSchema(t *testing.T, where, path string, s map[string]any, enums map[string][]string) {
	t.Helper()
	typ, ok := s["type"].(string)
	if !ok {
		t.Errorf("%s %s: type %v is not one type name (strict hosts take one type per value)", where, path, s["type"])
		return
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf", "$ref", "nullable"} {
		if _, ok := s[k]; ok {
			t.Errorf("%s %s: uses %s", where, path, k)
		}
	}
	if e, ok := s["enum"].([]any); ok {
		var vals []string
		for _, v := range e {
			vals = append(vals, v.(string))
		}
		enums[where+" "+path] = vals
	}
	switch typ {
	case "object":
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			ps := p.(map[string]any)
			sub := name
			if path != "" {
				sub = path + "." + name
			}
			if d, _ := ps["description"].(string); strings.TrimSpace(d) == "" {
				t.Errorf("%s %s: no description", where, sub)
			}
			if ps["type"] == "string" && ps["enum"] == nil && !openStrings[name] {
				t.Errorf("%s %s: a string without an enum that is not known to be open: give it an enum or add it to openStrings", where, sub)
			}
			walkSchema(t, where, sub, ps, enums)
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			walkSchema(t, where, path+"{}", ap, enums)
		}
	case "array":
		items, ok := s["items"].(map[string]any)
		if !ok {
			t.Errorf("%s %s: array without items", where, path)
			return
		}
		walkSchema(t, where, path+"[]", items, enums)
	}
}

// TestMCPToolSchemasPortable walks every tool's input and output schema
// as a host receives it (JSON over the protocol): one type per value (no
// ["null","object"]), no anyOf/$ref, a description on every property, an
// enum on every closed set, equal to the domain's; and the annotations.
func TestMCPToolSchemasPortable(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Evaluation.Mode = "off" })
	cs := mcpLocal(t, h)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 7 {
		t.Fatalf("%d tools", len(res.Tools))
	}
	enums := map[string][]string{}
	for _, tool := range res.Tools {
		raw, _ := json.Marshal(tool)
		var wire struct {
			Title        string         `json:"title"`
			Description  string         `json:"description"`
			InputSchema  map[string]any `json:"inputSchema"`
			OutputSchema map[string]any `json:"outputSchema"`
			Annotations  map[string]any `json:"annotations"`
		}
		if err := json.Unmarshal(raw, &wire); err != nil {
			t.Fatal(err)
		}
		if wire.Title == "" || wire.Description == "" {
			t.Errorf("%s: title %q, description %q", tool.Name, wire.Title, wire.Description)
		}
		for side, s := range map[string]map[string]any{"input": wire.InputSchema, "output": wire.OutputSchema} {
			if s["type"] != "object" {
				t.Errorf("%s %s schema: type %v", tool.Name, side, s["type"])
			}
			walkSchema(t, tool.Name+" "+side, "", s, enums)
		}

		a := wire.Annotations
		if a == nil || a["title"] != wire.Title {
			t.Errorf("%s: annotations %v lack the title", tool.Name, a)
			continue
		}
		readOnly := map[string]bool{"recall": true, "query": true, "list_sonas": true}[tool.Name]
		if a["readOnlyHint"] != readOnly {
			t.Errorf("%s: readOnlyHint %v, want %v", tool.Name, a["readOnlyHint"], readOnly)
		}
		destructive := tool.Name == "forget" // the one tool that removes
		if !readOnly && a["destructiveHint"] != destructive {
			t.Errorf("%s: destructiveHint %v, want %v (tools but forget only add)", tool.Name, a["destructiveHint"], destructive)
		}
		if a["openWorldHint"] != false {
			t.Errorf("%s: openWorldHint %v, want false", tool.Name, a["openWorldHint"])
		}
		idempotent := map[string]bool{"recall": true, "query": true, "list_sonas": true, "insert": true, "forget": true}[tool.Name]
		if a["idempotentHint"] != idempotent {
			t.Errorf("%s: idempotentHint %v, want %v", tool.Name, a["idempotentHint"], idempotent)
		}
	}
	want := closedSets(h.app.Config)
	for path, vals := range want {
		if got := enums[path]; !slices.Equal(got, vals) {
			t.Errorf("%s: enum %v, want %v", path, got, vals)
		}
	}
	for path := range enums {
		if _, ok := want[path]; !ok {
			t.Errorf("%s: an enum the test does not know", path)
		}
	}
}

// TestMCPEnumsAreWhatTheServerTakes: every value an input enum offers is
// accepted, and insert with the same arguments twice changes nothing the
// second time (its idempotentHint).
func TestMCPEnumsAreWhatTheServerTakes(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Evaluation.Mode = "off" })
	cs := mcpLocal(t, h)
	_, sona := callTool(t, cs, "create_sona", map[string]any{"name": "enums"})
	id := sona["uuid"].(string)
	for _, kind := range closedSets(h.app.Config)["insert input kind"] {
		res, out := callTool(t, cs, "insert", map[string]any{"sona": id, "content": "a memory of kind " + kind, "kind": kind})
		if res.IsError || out["existed"] != false {
			t.Errorf("insert kind %s: %s", kind, toolText(res))
		}
	}
	for _, scope := range closedSets(h.app.Config)["recall input scope"] {
		if res, _ := callTool(t, cs, "recall", map[string]any{"sona": id, "query": "memory", "scope": scope}); res.IsError {
			t.Errorf("recall scope %s: %s", scope, toolText(res))
		}
		if res, _ := callTool(t, cs, "query", map[string]any{"sona": id, "content": "memory?", "scope": scope}); res.IsError {
			t.Errorf("query scope %s: %s", scope, toolText(res))
		}
	}

	args := map[string]any{"sona": id, "content": "The same words twice", "kind": "note", "labels": map[string]any{"src": "t"}}
	_, first := callTool(t, cs, "insert", args)
	_, before := h.app.Self.Counts()
	res, second := callTool(t, cs, "insert", args)
	_, after := h.app.Self.Counts()
	if res.IsError || second["cid"] != first["cid"] || second["existed"] != true || after != before {
		t.Fatalf("insert again: %s, %v (memories %d → %d)", toolText(res), second, before, after)
	}
	_, list := callTool(t, cs, "list_sonas", map[string]any{"name": "enums"})
	if n := list["sonas"].([]any)[0].(map[string]any)["length"].(float64); int(n) != len(closedSets(h.app.Config)["insert input kind"])+1 {
		t.Fatalf("chain length %v after the repeated insert", n)
	}
}

// TestMCPNullArguments: an optional argument given as null is taken as
// absent (models fill them so), where the schema says "object" or
// "boolean" without "null"; a null where a value is required still fails.
func TestMCPNullArguments(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Evaluation.Mode = "off" })
	cs := mcpLocal(t, h)
	_, sona := callTool(t, cs, "create_sona", map[string]any{"name": "nulls"})
	id := sona["uuid"].(string)
	res, out := callTool(t, cs, "insert", map[string]any{"sona": id, "content": "nulls everywhere", "file": nil,
		"edges": nil, "dedup": nil, "labels": nil, "kind": nil, "timestamp": nil, "name": nil})
	if res.IsError || out["seq"] != float64(0) {
		t.Fatalf("insert with null optionals: %s", toolText(res))
	}
	if res, _ := callTool(t, cs, "recall", map[string]any{"sona": id, "query": "nulls", "k": nil, "scope": nil, "budget_chars": nil}); res.IsError {
		t.Fatalf("recall with null optionals: %s", toolText(res))
	}
	// Nested: a file's null mime_type.
	res, _ = callTool(t, cs, "insert", map[string]any{"sona": id, "file": map[string]any{"base64": "aGk=", "mime_type": nil}})
	if res.IsError {
		t.Fatalf("file with a null mime_type: %s", toolText(res))
	}
	for _, args := range []map[string]any{
		{"sona": id, "query": nil},
		{"sona": nil, "query": "x"},
		{"sona": id, "query": "x", "k": 1 << 40}, // numbers pass through exactly
	} {
		if res, _ := callTool(t, cs, "recall", args); !res.IsError {
			t.Errorf("recall %v: want an error", args)
		}
	}
	if res, _ := callTool(t, cs, "insert", map[string]any{"sona": id, "content": "x", "edges": []any{nil}}); !res.IsError {
		t.Errorf("a null edge was accepted")
	}
	if _, mems := h.app.Self.Counts(); mems != 2 {
		t.Fatalf("%d memories stored, want 2", mems)
	}
}

func getPrompt(cs *mcp.ClientSession, name string, args map[string]string) (string, error) {
	res, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: name, Arguments: args})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, m := range res.Messages {
		if m.Role != "user" {
			return "", fmt.Errorf("role %s", m.Role)
		}
		b.WriteString(m.Content.(*mcp.TextContent).Text)
	}
	return b.String(), nil
}

func TestMCPPrompts(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Evaluation.Mode = "off" })
	cs := mcpLocal(t, h)
	list, err := cs.ListPrompts(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Prompts {
		names = append(names, p.Name)
		if p.Title == "" || p.Description == "" {
			t.Errorf("prompt %s: title %q, description %q", p.Name, p.Title, p.Description)
		}
		for _, a := range p.Arguments {
			if a.Description == "" {
				t.Errorf("prompt %s argument %s: no description", p.Name, a.Name)
			}
		}
	}
	if slices.Sort(names); !slices.Equal(names, []string{"recall_and_answer", "remember"}) {
		t.Fatalf("prompts %v", names)
	}

	callTool(t, cs, "create_sona", map[string]any{"name": "alice"})
	_, fact := callTool(t, cs, "insert", map[string]any{"sona": "alice", "content": "Maya's birthday is on the 3rd of May.", "kind": "fact"})
	callTool(t, cs, "insert", map[string]any{"sona": "alice", "content": "The blue shed holds the bicycle.", "name": "Bob"})
	_, before := h.app.Self.Counts()

	text, err := getPrompt(cs, "recall_and_answer", map[string]string{"sona": "alice", "question": "When is Maya's birthday?", "scope": "sona"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"alice"`, fact["cid"].(string), "3rd of May", "Question: When is Maya's birthday?", "Cite the CID"} {
		if !strings.Contains(text, want) {
			t.Errorf("recall_and_answer lacks %q:\n%s", want, text)
		}
	}
	text, err = getPrompt(cs, "remember", map[string]string{"sona": "alice", "text": "Dana moved to Porto in June."})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"insert tool", "Dana moved to Porto in June.", "error, fact, goal, note, observation, outcome"} {
		if !strings.Contains(text, want) {
			t.Errorf("remember lacks %q:\n%s", want, text)
		}
	}
	if _, after := h.app.Self.Counts(); after != before {
		t.Fatalf("prompts stored %d memories", after-before)
	}

	for _, c := range []struct {
		name string
		args map[string]string
		want string
	}{
		{"recall_and_answer", map[string]string{"sona": "alice"}, "question is required"},
		{"recall_and_answer", map[string]string{"sona": "alice", "question": "  "}, "question is required"},
		{"recall_and_answer", map[string]string{"question": "x"}, "sona is required"},
		{"recall_and_answer", map[string]string{"sona": "nobody", "question": "x"}, "not_found"},
		{"recall_and_answer", map[string]string{"sona": "alice", "question": "x", "scope": "all"}, "scope must be"},
		{"recall_and_answer", map[string]string{"sona": "alice", "question": "x", "k": "3"}, `no argument "k"`},
		{"remember", map[string]string{"sona": "alice"}, "text is required"},
		{"no_such_prompt", nil, "unknown prompt"},
	} {
		_, err := getPrompt(cs, c.name, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: error %v, want %q", c.name, c.args, err, c.want)
		}
	}
}

// TestMCPInsertIsRESTInsert pins the two insert paths to one memory: the
// MCP insert tool's text, speaker and file arguments (with edges and a
// timestamp) store the memory — the same CID — that POST /memories stores
// for the data union they stand for.
func TestMCPInsertIsRESTInsert(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Evaluation.Mode = "off" })
	cs := mcpLocal(t, h)
	viaMCP, viaREST := h.newSona("via-mcp"), h.newSona("via-rest")
	support := h.insertText(viaREST, "a memory the others build on")
	file := h.putFile([]byte("hi"))
	edges := []any{map[string]any{"target": support, "weight": 0.5}}
	restEdges := []any{map[string]any{"target": map[string]any{"/": support}, "weight": 0.5}}
	for _, c := range []struct {
		name string
		mcp  map[string]any
		data map[string]any
	}{
		{"text", map[string]any{"content": "plain words"}, map[string]any{"kind": "text", "content": "plain words"}},
		{"other", map[string]any{"content": "said by Ada", "name": "Ada"}, map[string]any{"kind": "other", "name": "Ada", "content": "said by Ada"}},
		{"file", map[string]any{"file": map[string]any{"base64": "aGk=", "name": "hi.txt", "mime_type": "text/plain"}},
			map[string]any{"kind": "file", "name": "hi.txt", "mimeType": "text/plain", "content": map[string]any{"/": file}}},
		{"bare file", map[string]any{"file": map[string]any{"base64": "aGk="}}, map[string]any{"kind": "file", "content": map[string]any{"/": file}}},
	} {
		args := map[string]any{"sona": viaMCP, "edges": edges, "timestamp": 1700000000, "dedup": false}
		maps.Copy(args, c.mcp)
		res, out := callTool(t, cs, "insert", args)
		if res.IsError {
			t.Fatalf("%s over MCP: %s", c.name, toolText(res))
		}
		rest := h.insert(map[string]any{"sona": viaREST, "data": c.data, "edges": restEdges, "timestamp": 1700000000, "dedup": false})
		if out["cid"] == nil || out["cid"] != rest["cid"] {
			t.Errorf("%s: MCP stored %v, REST %v", c.name, out["cid"], rest["cid"])
		}
	}
}
