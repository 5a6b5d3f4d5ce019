package api

// The MCP tools' definitions as hosts see them: JSON schemas every
// function-calling host accepts (one type per value, an enum for every
// closed set, a description on every property) and annotations. Built once
// per server, from its configuration (the kinds, the bounds), so the
// per-request servers of /mcp share them and the SDK resolves each schema
// once.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
)

// The closed sets the tools' schemas enumerate.
var (
	recallScopes = []string{recall.ScopeSelf, recall.ScopeSona}
	dataKinds    = []string{model.KindSelf, model.KindOther, model.KindText, model.KindFile}
	recallVias   = []string{recall.ViaHit, recall.ViaCoAccess, recall.ViaExpansion}
	stopReasons  = []string{string(llm.StopEndTurn), string(llm.StopSequence), string(llm.StopMaxTokens)}
)

// mcpDefs are a server's tool definitions.
type mcpDefs struct {
	cache                                              *mcp.SchemaCache
	kinds                                              []string // the memory kinds, sorted
	recall, insert, query, chat, listSonas, createSona *mcp.Tool
	forget                                             *mcp.Tool
}

func newMCPDefs(cfg config.Config) *mcpDefs {
	kinds := slices.Sorted(maps.Keys(cfg.Kinds))
	f, destructive := false, true
	// Recall, query and list only read: recall's learning (access counts,
	// co-access) is the store's bookkeeping, not a change a user made. The
	// writes only add, but forget, which removes memories (destructive,
	// idempotent: forgetting again changes nothing).
	// None reaches outside the store (a model provider answers chat and
	// query, but the tool's domain is the memory).
	readOnly := func(title string) *mcp.ToolAnnotations {
		return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &f}
	}
	adds := func(title string, idempotent bool) *mcp.ToolAnnotations {
		return &mcp.ToolAnnotations{Title: title, DestructiveHint: &f, IdempotentHint: idempotent, OpenWorldHint: &f}
	}

	recallIn := toolSchema[RecallInput](map[string][]string{"scope": recallScopes})
	describeProp(recallIn, "k", "how many ranked hits to return (best score first): 1..%d; 0 or absent: %d", cfg.Server.MaxK, cfg.Recall.TopK)
	describeProp(recallIn, "expand", "at most this many memories beyond the hits, reached from them along edges and co-access: 0..%d; 0: none; absent: %d per hit", cfg.Server.MaxK, cfg.Recall.ExpandPerHit)
	describeProp(recallIn, "budget_chars", "character budget of all the recalled memories together: 1..%d; 0 or absent: %d", cfg.Server.MaxBudgetChars, cfg.Recall.BudgetChars)
	describeProp(recallIn, "scope", "sona: this sona's memories and the backbone; self: every sona's, weighted by their similarity to this one; absent: %s", cfg.Recall.Scope)

	chatIn := toolSchema[ChatInput](map[string][]string{"scope": recallScopes})
	describeProp(chatIn, "k", "how many ranked hits to recall: 1..%d; 0 or absent: %d", cfg.Server.MaxK, cfg.Recall.TopK)
	describeProp(chatIn, "expand", "at most this many recalled memories beyond the hits: 0..%d; 0: none; absent: %d per hit", cfg.Server.MaxK, cfg.Recall.ExpandPerHit)
	describeProp(chatIn, "budget_chars", "character budget of the recalled context: 1..%d; 0 or absent: %d", cfg.Server.MaxBudgetChars, cfg.Recall.BudgetChars)
	describeProp(chatIn, "scope", "where to recall: sona (this sona and the backbone) or self (every sona, weighted by similarity); absent: %s", cfg.Recall.Scope)

	insertIn := toolSchema[InsertInput](map[string][]string{"kind": kinds})
	describeProp(insertIn, "kind", "the memory's kind, which sets its weight and how long it lives; absent: %s", cfg.DefaultKind)

	listIn := toolSchema[ListSonasInput](nil)
	describeProp(listIn, "limit", "page size: 1..%d; 0 or absent: %d", cfg.Server.MaxListLimit, min(50, cfg.Server.MaxListLimit))

	memories := map[string][]string{"memories.kind": dataKinds, "memories.via": recallVias}
	return &mcpDefs{
		cache: mcp.NewSchemaCache(), kinds: kinds,
		recall: &mcp.Tool{Name: "recall", Title: "Recall memories",
			Description:  "Recall the memories of a sona that matter for a query: the k best hits (rank 1 is the best), near-identical ones folded together, and a few memories reached from them along edges, within a character budget, in topological order. Stores no memory.",
			InputSchema:  recallIn,
			OutputSchema: toolSchema[RecallOutput](memories),
			Annotations:  readOnly("Recall memories")},
		insert: &mcp.Tool{Name: "insert", Title: "Insert a memory",
			Description: "Store a memory in a sona without calling the model. A near-duplicate of one of the sona's memories reinforces it instead (its CID is returned); the same memory again changes nothing.",
			InputSchema: insertIn, OutputSchema: toolSchema[InsertOutput](nil),
			Annotations: adds("Insert a memory", true)},
		query: &mcp.Tool{Name: "query", Title: "Ask a sona (not stored)",
			Description: "Recall memories for the content and have the sona's model answer, storing nothing.",
			InputSchema: chatIn, OutputSchema: toolSchema[QueryOutput](map[string][]string{"stop_reason": stopReasons}),
			Annotations: readOnly("Ask a sona (not stored)")},
		chat: &mcp.Tool{Name: "chat", Title: "Chat with a sona (stored)",
			Description: "One turn with a sona: the input is stored, memories are recalled, the model answers, and the answer is stored with edges to what it recalled.",
			InputSchema: chatIn, OutputSchema: toolSchema[ChatOutput](map[string][]string{"stop_reason": stopReasons}),
			Annotations: adds("Chat with a sona (stored)", false)},
		listSonas: &mcp.Tool{Name: "list_sonas", Title: "List sonas",
			Description: "List the sonas (optionally those with a name), in uuid order, a page at a time.",
			InputSchema: listIn, OutputSchema: toolSchema[ListSonasOutput](nil),
			Annotations: readOnly("List sonas")},
		createSona: &mcp.Tool{Name: "create_sona", Title: "Create a sona",
			Description: "Create a sona (a sub-persona with its own chain of thought) and return it.",
			InputSchema: toolSchema[CreateSonaInput](nil), OutputSchema: toolSchema[SonaOutput](nil),
			Annotations: adds("Create a sona", false)},
		forget: &mcp.Tool{Name: "forget", Title: "Forget memories",
			Description: "Excise memories for good: their content, embedding, text index entry, metadata and links are removed, a tombstone (CID, when, why, by whom) stays, and reading them answers that they were forgotten. Give CIDs, a sona, a label, an agent, a time range or derived_from (everything derived from those memories); dry_run lists what would go.",
			InputSchema: toolSchema[ForgetInput](nil), OutputSchema: toolSchema[ForgetOutput](nil),
			Annotations: &mcp.ToolAnnotations{Title: "Forget memories", DestructiveHint: &destructive, IdempotentHint: true, OpenWorldHint: &f}},
	}
}

// toolSchema is T's JSON schema made portable (see portable), with the
// enums given by property path ("scope", "memories.kind": a property of
// the array memories' items).
func toolSchema[T any](enums map[string][]string) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: schema of %T: %v", *new(T), err))
	}
	portable(s)
	for path, values := range enums {
		p := property(s, path)
		p.Enum = make([]any, len(values))
		for i, v := range values {
			p.Enum[i] = v
		}
	}
	return s
}

// portable rewrites what strict function-calling hosts refuse: a Go
// pointer, slice or map is "null or X" (a type array), which a host that
// maps schemas onto a one-type dialect (Gemini's function declarations)
// rejects. Every such value is optional or always present, never null, so
// it becomes plain X; a null argument is taken as absent (dropNullArgs).
func portable(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) > 0 {
		types := slices.DeleteFunc(slices.Clone(s.Types), func(t string) bool { return t == "null" })
		if len(types) != 1 {
			panic(fmt.Sprintf("mcp: schema with types %v", s.Types))
		}
		s.Type, s.Types = types[0], nil
	}
	for _, p := range s.Properties {
		portable(p)
	}
	portable(s.Items)
	portable(s.AdditionalProperties)
}

// property is the schema at a dotted path of property names, stepping into
// array items on the way.
func property(s *jsonschema.Schema, path string) *jsonschema.Schema {
	for name := range strings.SplitSeq(path, ".") {
		if s.Type == "array" {
			s = s.Items
		}
		p, ok := s.Properties[name]
		if !ok {
			panic("mcp: no property " + path)
		}
		s = p
	}
	return s
}

func describeProp(s *jsonschema.Schema, path, format string, args ...any) {
	property(s, path).Description = fmt.Sprintf(format, args...)
}

// dropNullArgs is a middleware that takes a tool argument given as null
// (at any depth of objects) as absent: the schemas say "string", "object",
// never "null", but models often fill optional arguments with null, and
// before the schemas were made portable a null file, edges or dedup was
// accepted.
func dropNullArgs(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil && len(r.Params.Arguments) > 0 {
			r.Params.Arguments = withoutNulls(r.Params.Arguments)
		}
		return next(ctx, method, req)
	}
}

// withoutNulls is raw without the null members of its objects; raw itself
// when it has none or is not JSON (the SDK reports that).
func withoutNulls(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte("null")) {
		return raw
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber() // keep every number exactly as given
	var v any
	if d.Decode(&v) != nil {
		return raw
	}
	if !dropNulls(v) {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

// dropNulls deletes the null members of v's objects, recursively, and
// reports whether it deleted any. Null array elements stay (and fail
// validation).
func dropNulls(v any) bool {
	dropped := false
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
				dropped = true
			} else if dropNulls(e) {
				dropped = true
			}
		}
	case []any:
		for _, e := range v {
			if dropNulls(e) {
				dropped = true
			}
		}
	}
	return dropped
}
