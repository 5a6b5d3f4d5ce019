package api

// MCP (seed 000, "MCP"; DESIGN.md §6.3) with the official Go SDK: the
// tools recall, insert, query, chat, list_sonas and create_sona, and the
// resource templates ipfs://{cid}, memoria://memory/{cid},
// memoria://file/{cid} and memoria://sona/{uuid}, and the prompts
// recall_and_answer and remember (mcp_prompts.go); the tools' schemas and
// annotations are in mcp_schema.go. Every tool and resource
// calls the same operations as the REST API (ops.go), so writes go through
// the sona actors and the principal's scopes and sonas are checked the
// same way. Served over stdio (`memoria mcp`) and streamable HTTP at /mcp.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ipfs/go-cid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/internal/trace"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/messages"
)

// Version is the server version MCP clients are told.
var Version = "0.1.0"

const mcpInstructions = `Memoria is a long-term memory: memories are grouped into sonas (sub-personas), each advancing one linear chain of thought.
Start with list_sonas (or create_sona), then insert memories, recall the ones that matter for a prompt, or chat (stored) / query (not stored) with the sona's model.
The prompt recall_and_answer recalls for a question and asks for an answer from the memories; remember asks to store a text's facts.
Read memories as memoria://memory/{cid}, files as memoria://file/{cid}, sonas as memoria://sona/{uuid} and raw blocks as ipfs://{cid}.`

// MCPServer returns an MCP server whose tools and resources act as p
// (Local over stdio; the request's token over HTTP).
func (s *Server) MCPServer(p *Principal) *mcp.Server {
	log := s.log.With("component", "mcp")
	srv := mcp.NewServer(&mcp.Implementation{Name: "memoria", Title: "Memoria", Version: Version}, &mcp.ServerOptions{
		Instructions: mcpInstructions,
		SchemaCache:  s.mcp.cache,
		Logger:       sdkLogger(log),
	})
	m := &mcpTools{s: s, p: p}
	d := s.mcp
	srv.AddReceivingMiddleware(logRequests(log), dropNullArgs)
	if s.tp != nil {
		srv.AddReceivingMiddleware(traceMCP) // added last, runs first: logRequests's line carries the span
	}
	mcp.AddTool(srv, d.recall, withErrors(m, m.recall))
	mcp.AddTool(srv, d.insert, withErrors(m, m.insert))
	mcp.AddTool(srv, d.query, withErrors(m, m.query))
	mcp.AddTool(srv, d.chat, withErrors(m, m.chat))
	mcp.AddTool(srv, d.listSonas, withErrors(m, m.listSonas))
	mcp.AddTool(srv, d.createSona, withErrors(m, m.createSona))
	mcp.AddTool(srv, d.forget, withErrors(m, m.forget))
	m.addPrompts(srv)

	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "ipfs", Title: "IPFS block",
		URITemplate: "ipfs://{cid}", MIMEType: "application/vnd.ipld.raw",
		Description: "The exact bytes of a block (a memory, an ACT or a file), verifiable against its CID."}, m.readBlock)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "memory", Title: "Memory",
		URITemplate: "memoria://memory/{cid}", MIMEType: "application/json",
		Description: "A memory: its data, timestamp, edges and metadata, as JSON."}, m.readMemory)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "file", Title: "File",
		URITemplate: "memoria://file/{cid}",
		Description: "A file: by a file memory's CID (with its MIME type) or by the raw block's CID."}, m.readFile)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "sona", Title: "Sona",
		URITemplate: "memoria://sona/{uuid}", MIMEType: "application/json",
		Description: "A sona: its uuid, name, head ACT and chain length, as JSON."}, m.readSona)
	return srv
}

// mcpHTTP is the streamable HTTP transport at /mcp. It is stateless: every
// POST is a whole exchange, served by a server bound to that request's
// principal (ServeHTTP authenticated it), so a session can never outlive
// or borrow a token.
func (s *Server) mcpHTTP() http.Handler {
	return jsonErrors(mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		return s.MCPServer(principalFrom(r.Context()))
	}, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		Logger:              sdkLogger(s.log.With("component", "mcp")),
		MaxRequestBodyBytes: s.cfg.Server.MaxBodyBytes,
	}))
}

// ServeMCPStdio serves MCP on stdin/stdout until the client leaves or ctx
// ends. Nothing else may write to stdout meanwhile.
func (s *Server) ServeMCPStdio(ctx context.Context) error {
	return s.MCPServer(Local).Run(trace.WithProvider(ctx, s.tp), &mcp.StdioTransport{})
}

// sdkLogger is the MCP SDK's logger: its warnings and errors only. Its
// INFO lines tell a session's life (connecting, connected, disconnected),
// which over stateless HTTP is three lines a request, saying nothing
// logRequests does not.
func sdkLogger(log *slog.Logger) *slog.Logger {
	return slog.New(minLevel{log.Handler(), slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}
func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

// logRequests logs one DEBUG line per MCP request: the method, the tool,
// prompt or resource it names, how long it took and how it failed.
func logRequests(log *slog.Logger) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if !log.Enabled(ctx, slog.LevelDebug) {
				return next(ctx, method, req)
			}
			start := time.Now()
			res, err := next(ctx, method, req)
			attrs := []any{"method", method}
			switch p := req.GetParams().(type) {
			case *mcp.CallToolParamsRaw:
				attrs = append(attrs, "tool", p.Name)
			case *mcp.GetPromptParams:
				attrs = append(attrs, "prompt", p.Name)
			case *mcp.ReadResourceParams:
				attrs = append(attrs, "uri", p.URI)
			}
			attrs = append(attrs, "took", time.Since(start))
			if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
				attrs = append(attrs, "tool_error", true)
			}
			if err != nil {
				attrs = append(attrs, "error", err)
			}
			log.DebugContext(ctx, "mcp request", attrs...)
			return res, err
		}
	}
}

type mcpTools struct {
	s *Server
	p *Principal
}

// call gives a tool or resource handler the principal and the request
// timeout.
func (m *mcpTools) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(WithPrincipal(ctx, m.p), m.s.cfg.Server.RequestTimeout.D())
}

// withErrors runs a typed tool with the principal and the request timeout,
// and turns its errors into tool errors (isError, with a message naming
// the error's class) rather than protocol errors: the model sees what went
// wrong.
func withErrors[In, Out any](m *mcpTools, fn func(context.Context, In) (Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		ctx, cancel := m.call(ctx)
		defer cancel()
		out, err := fn(ctx, in)
		if err != nil {
			var zero Out
			return nil, zero, m.toolError(ctx, err)
		}
		return nil, out, nil
	}
}

func (m *mcpTools) toolError(ctx context.Context, err error) error {
	_, code, msg := m.s.classify(ctx, err)
	return fmt.Errorf("%s: %s", code, msg)
}

// int32Arg narrows a tool's integer argument; out-of-range values stay out
// of range (the bound checks reject them).
func int32Arg(v int) int32 {
	return int32(max(min(v, math.MaxInt32), math.MinInt32))
}

// optInt32Arg is int32Arg of an optional argument.
func optInt32Arg(v *int) *int32 {
	if v == nil {
		return nil
	}
	n := int32Arg(*v)
	return &n
}

// Tool inputs and outputs. The SDK derives their JSON schemas: fields
// without omitempty are required.

// RecallInput is the recall tool's input.
type RecallInput struct {
	Sona        string `json:"sona" jsonschema:"the sona to recall in: its uuid or unambiguous name"`
	Query       string `json:"query" jsonschema:"what to recall memories for"`
	K           int    `json:"k,omitempty" jsonschema:"how many ranked hits to return; 0 or absent: the configured default"`
	BudgetChars int    `json:"budget_chars,omitempty" jsonschema:"character budget of the recalled memories; 0 or absent: the configured default"`
	Scope       string `json:"scope,omitempty" jsonschema:"self (every sona, weighted by similarity) or sona (this sona and the backbone); absent: the configured default"`
	AgentID     string `json:"agent_id,omitempty" jsonschema:"the recalling agent, for its co-access weights"`
	Expand      *int   `json:"expand,omitempty" jsonschema:"at most this many memories beyond the hits, reached from them; 0: none; absent: the configured default"`
}

// RecallOutput is the recall tool's output.
type RecallOutput struct {
	Memories []MemoryOutput `json:"memories" jsonschema:"the recalled memories, in topological order (the hits carry their rank)"`
	// Unanswered are the cluster members that did not answer in time.
	Unanswered []string `json:"unanswered,omitempty" jsonschema:"in a cluster: the members that did not answer in time (the recall is made of the others')"`
}

// MemoryOutput is a memory as a tool returns it.
type MemoryOutput struct {
	CID  string `json:"cid" jsonschema:"the memory's content identifier"`
	URI  string `json:"uri" jsonschema:"the memory as a resource"`
	Kind string `json:"kind" jsonschema:"what the memory holds: the sona's own words (self), another party's (other), a text or a file"`
	// Text is the memory's text (a file memory's name).
	Text      string  `json:"text" jsonschema:"the memory's text (a file memory: a short description of the file)"`
	Name      string  `json:"name,omitempty" jsonschema:"the speaker of an other or self memory, or the file name"`
	MimeType  string  `json:"mime_type,omitempty" jsonschema:"a file memory's MIME type"`
	FileURI   string  `json:"file_uri,omitempty" jsonschema:"a file memory's content as a resource"`
	Timestamp int64   `json:"timestamp,omitempty" jsonschema:"unix seconds"`
	Score     float64 `json:"score,omitempty" jsonschema:"recall score"`
	Via       string  `json:"via,omitempty" jsonschema:"how recall reached it: a scored hit, a hit's co-access partner, or along an edge (expansion)"`
	Rank      int     `json:"rank,omitempty" jsonschema:"a hit's place among the hits, from 1 (best first); absent for what expansion added"`
	// Collapsed are near-identical memories recall folded into this one.
	Collapsed []string `json:"collapsed,omitempty" jsonschema:"CIDs of near-identical memories folded into this one (not returned)"`
}

func memoryOutput(c cid.Cid, m *model.Memory) MemoryOutput {
	out := MemoryOutput{CID: c.String(), URI: "memoria://memory/" + c.String(), Kind: m.Data.Kind(), Text: m.Text()}
	if m.Timestamp != nil {
		out.Timestamp = *m.Timestamp
	}
	switch d := m.Data; {
	case d.Self != nil:
		out.Name = d.Self.Name
	case d.Other != nil && d.Other.Name != nil:
		out.Name = *d.Other.Name
	case d.File != nil:
		if d.File.Name != nil {
			out.Name = *d.File.Name
		}
		if d.File.MimeType != nil {
			out.MimeType = *d.File.MimeType
		}
		out.FileURI = "memoria://file/" + c.String()
	}
	return out
}

func (m *mcpTools) recall(ctx context.Context, in RecallInput) (RecallOutput, error) {
	rec, err := m.s.resolveSona(ctx, in.Sona)
	if err != nil {
		return RecallOutput{}, err
	}
	recalled, unanswered, err := m.s.recallOp(ctx, rec, &messages.RecallRequest{
		Query: in.Query, K: int32Arg(in.K), BudgetChars: int32Arg(in.BudgetChars), Scope: in.Scope, AgentId: in.AgentID,
		Expand: optInt32Arg(in.Expand),
	})
	if err != nil {
		return RecallOutput{}, err
	}
	out := RecallOutput{Memories: []MemoryOutput{}, Unanswered: unanswered}
	for _, rc := range recalled {
		mo := memoryOutput(rc.CID, rc.Memory)
		mo.Score, mo.Via, mo.Rank, mo.Collapsed = rc.Score, rc.Via, rc.Rank, cidStrings(rc.Collapsed)
		out.Memories = append(out.Memories, mo)
	}
	return out, nil
}

// InsertInput is the insert tool's input.
type InsertInput struct {
	Sona    string `json:"sona" jsonschema:"the sona to store the memory in: its uuid or unambiguous name"`
	Content string `json:"content,omitempty" jsonschema:"the memory's text (required unless file is given)"`
	Name    string `json:"name,omitempty" jsonschema:"who said it: stores an other memory with this speaker instead of a text memory"`
	// File stores a file memory instead of a text one.
	File *FileInput `json:"file,omitempty" jsonschema:"a file to store (as a block) and remember as a file memory, instead of content"`
	Kind string     `json:"kind,omitempty" jsonschema:"outcome, fact, error, goal, observation or note (the configured default when absent)"`
	// Edges name the memories this one is supported by.
	Edges     []EdgeInput       `json:"edges,omitempty" jsonschema:"memories this one builds on"`
	Labels    map[string]string `json:"labels,omitempty" jsonschema:"free-form labels"`
	AgentID   string            `json:"agent_id,omitempty" jsonschema:"the writing agent (provenance)"`
	Timestamp int64             `json:"timestamp,omitempty" jsonschema:"unix seconds; absent: no timestamp"`
	Dedup     *bool             `json:"dedup,omitempty" jsonschema:"reinforce a near-duplicate instead of storing (default from config)"`
	RequestID string            `json:"request_id,omitempty" jsonschema:"an idempotency key (unique per sona): a call sent again with it is answered with the first call's memory, never stored twice"`
}

// FileInput is a file given to the insert tool.
type FileInput struct {
	Base64   string `json:"base64" jsonschema:"the file's bytes, base64-encoded"`
	MimeType string `json:"mime_type,omitempty" jsonschema:"its MIME type, e.g. text/plain"`
	Name     string `json:"name,omitempty" jsonschema:"its file name"`
}

// EdgeInput is an edge of an inserted memory.
type EdgeInput struct {
	Target string  `json:"target" jsonschema:"CID of the supporting memory"`
	Weight float64 `json:"weight" jsonschema:"how strongly it supports this one"`
}

// InsertOutput is the insert tool's output.
type InsertOutput struct {
	CID          string   `json:"cid" jsonschema:"the stored (or reinforced) memory's content identifier"`
	URI          string   `json:"uri" jsonschema:"the memory as a resource"`
	Seq          *int64   `json:"seq,omitempty" jsonschema:"position of the new ACT in the sona's chain"`
	Existed      bool     `json:"existed" jsonschema:"the memory was already in the sona"`
	Deduplicated bool     `json:"deduplicated" jsonschema:"a near-duplicate was reinforced instead; cid is that memory"`
	Similarity   *float64 `json:"similarity,omitempty" jsonschema:"cosine similarity to the reinforced near-duplicate"`
}

func (m *mcpTools) insert(ctx context.Context, in InsertInput) (InsertOutput, error) {
	data, file, err := m.insertData(in)
	if err != nil {
		return InsertOutput{}, err
	}
	var ts *int64
	if in.Timestamp != 0 {
		ts = &in.Timestamp
	}
	resp, _, err := m.s.insertOp(ctx, insertion{Sona: in.Sona, Kind: in.Kind, AgentID: in.AgentID, Labels: in.Labels, Dedup: in.Dedup, RequestID: in.RequestID,
		Memory: func() (*model.Memory, error) { return newMemory(data, ts, in.Edges) }, File: file})
	if err != nil {
		return InsertOutput{}, err
	}
	return InsertOutput{CID: resp.Cid, URI: "memoria://memory/" + resp.Cid, Seq: resp.Seq, Existed: resp.Existed,
		Deduplicated: resp.Deduplicated, Similarity: resp.Similarity}, nil
}

// insertData is the data union an insert describes, and the file that
// comes with a file memory: stored by the memory's append, so a refused
// insert stores nothing.
func (m *mcpTools) insertData(in InsertInput) (model.Data, []byte, error) {
	if in.File == nil {
		if strings.TrimSpace(in.Content) == "" {
			return model.Data{}, nil, badRequest("invalid", "content must not be empty (or give a file)")
		}
		if in.Name != "" {
			return model.Data{Other: &model.OtherData{Name: &in.Name, Content: in.Content}}, nil, nil
		}
		return model.Data{Text: &model.TextData{Content: in.Content}}, nil, nil
	}
	if in.Content != "" {
		return model.Data{}, nil, badRequest("invalid", "give content or file, not both")
	}
	raw, err := base64.StdEncoding.DecodeString(in.File.Base64)
	if err != nil {
		return model.Data{}, nil, badRequest("invalid", "file.base64 is not valid base64: %v", err)
	}
	if len(raw) > m.s.cfg.Store.MaxBlockBytes {
		return model.Data{}, nil, &apiError{base.ErrTooLarge, "too_large",
			fmt.Sprintf("file of %d bytes exceeds the block limit of %d bytes", len(raw), m.s.cfg.Store.MaxBlockBytes)}
	}
	c, err := model.SumCID(model.CodecRaw, raw)
	if err != nil {
		return model.Data{}, nil, err
	}
	f := &model.FileData{Content: c}
	if in.File.Name != "" {
		f.Name = &in.File.Name
	}
	if in.File.MimeType != "" {
		f.MimeType = &in.File.MimeType
	}
	return model.Data{File: f}, raw, nil
}

// ChatInput is the chat and query tools' input.
type ChatInput struct {
	Sona        string `json:"sona" jsonschema:"the sona to talk to: its uuid or unambiguous name"`
	Content     string `json:"content" jsonschema:"the message"`
	Name        string `json:"name,omitempty" jsonschema:"who is speaking (stored as an other memory's speaker)"`
	AgentID     string `json:"agent_id,omitempty" jsonschema:"the calling agent (provenance)"`
	K           int    `json:"k,omitempty" jsonschema:"how many ranked hits to recall; 0 or absent: the configured default"`
	BudgetChars int    `json:"budget_chars,omitempty" jsonschema:"character budget of the recalled context; 0 or absent: the configured default"`
	Scope       string `json:"scope,omitempty" jsonschema:"self or sona recall scope; absent: the configured default"`
	Expand      *int   `json:"expand,omitempty" jsonschema:"at most this many recalled memories beyond the hits; 0: none; absent: the configured default"`
	RequestID   string `json:"request_id,omitempty" jsonschema:"an idempotency key (unique per sona): a chat step sent again with it is answered with the first step's reply, never appended twice (not for query)"`
}

func (in ChatInput) request() *messages.ChatRequest {
	return &messages.ChatRequest{Content: in.Content, Name: in.Name, AgentId: in.AgentID, RequestId: in.RequestID,
		K: int32Arg(in.K), BudgetChars: int32Arg(in.BudgetChars), Scope: in.Scope, Expand: optInt32Arg(in.Expand)}
}

// ScoredOutput is a recalled memory a reply was built on.
type ScoredOutput struct {
	CID   string  `json:"cid" jsonschema:"the recalled memory's content identifier"`
	Score float64 `json:"score" jsonschema:"its recall score"`
}

func scoredOutputs(refs []*messages.ScoredRef) []ScoredOutput {
	out := []ScoredOutput{}
	for _, r := range refs {
		out = append(out, ScoredOutput{CID: r.Cid, Score: r.Score})
	}
	return out
}

// QueryOutput is the query tool's output.
type QueryOutput struct {
	Response   string         `json:"response" jsonschema:"the model's answer"`
	Model      string         `json:"model" jsonschema:"the model that answered"`
	StopReason string         `json:"stop_reason" jsonschema:"why the model stopped: it finished, hit a stop sequence or reached its token limit"`
	Recalled   []ScoredOutput `json:"recalled" jsonschema:"the memories the answer was built on"`
	Unanswered []string       `json:"unanswered,omitempty" jsonschema:"in a cluster: the members that did not answer the recall in time (it is made of the others')"`
}

func (m *mcpTools) query(ctx context.Context, in ChatInput) (QueryOutput, error) {
	if in.RequestID != "" {
		return QueryOutput{}, badRequest("invalid", "request_id is for chat and insert: a query appends nothing")
	}
	rec, err := m.s.resolveSona(ctx, in.Sona)
	if err != nil {
		return QueryOutput{}, err
	}
	ctx, unanswered := actors.CollectUnanswered(ctx)
	resp, err := m.s.queryOp(ctx, rec, in.request())
	if err != nil {
		return QueryOutput{}, err
	}
	r := resp.GetResponse()
	return QueryOutput{Response: r.GetContent(), Model: r.GetModel(), StopReason: r.GetStopReason(), Recalled: scoredOutputs(resp.Recalled),
		Unanswered: unanswered()}, nil
}

// ChatOutput is the chat tool's output.
type ChatOutput struct {
	Response    string         `json:"response" jsonschema:"the model's answer"`
	Model       string         `json:"model" jsonschema:"the model that answered"`
	StopReason  string         `json:"stop_reason" jsonschema:"why the model stopped: it finished, hit a stop sequence or reached its token limit"`
	InputCID    string         `json:"input_cid" jsonschema:"the stored input memory"`
	ResponseCID string         `json:"response_cid" jsonschema:"the stored response memory"`
	Recalled    []ScoredOutput `json:"recalled" jsonschema:"the memories the answer was built on (its edges)"`
	Unanswered  []string       `json:"unanswered,omitempty" jsonschema:"in a cluster: the members that did not answer the recall in time (it is made of the others')"`
}

func (m *mcpTools) chat(ctx context.Context, in ChatInput) (ChatOutput, error) {
	rec, err := m.s.resolveSona(ctx, in.Sona)
	if err != nil {
		return ChatOutput{}, err
	}
	ctx, unanswered := actors.CollectUnanswered(ctx)
	resp, err := m.s.chatOp(ctx, rec, in.request())
	if err != nil {
		return ChatOutput{}, err
	}
	r := resp.GetResponse()
	return ChatOutput{Response: r.GetContent(), Model: r.GetModel(), StopReason: r.GetStopReason(),
		InputCID: resp.GetInput().GetCid(), ResponseCID: r.GetCid(), Recalled: scoredOutputs(resp.Recalled), Unanswered: unanswered()}, nil
}

// ListSonasInput is the list_sonas tool's input.
type ListSonasInput struct {
	Name   string `json:"name,omitempty" jsonschema:"only the sonas with this name"`
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous page"`
	Limit  int    `json:"limit,omitempty" jsonschema:"page size; absent: 50"`
}

// SonaOutput is a sona as a tool returns it.
type SonaOutput struct {
	UUID      string `json:"uuid" jsonschema:"the sona's identifier"`
	Name      string `json:"name" jsonschema:"the sona's name"`
	URI       string `json:"uri" jsonschema:"the sona as a resource"`
	Length    int64  `json:"length" jsonschema:"ACTs in its chain"`
	Head      string `json:"head,omitempty" jsonschema:"CID of the head ACT"`
	CreatedAt int64  `json:"created_at" jsonschema:"unix seconds"`
}

func sonaOutput(r *messages.Sona) SonaOutput {
	return SonaOutput{UUID: r.Uuid, Name: r.Name, URI: "memoria://sona/" + r.Uuid, Length: r.Length, Head: r.GetHead(), CreatedAt: r.CreatedAt}
}

// ListSonasOutput is the list_sonas tool's output.
type ListSonasOutput struct {
	Sonas      []SonaOutput `json:"sonas" jsonschema:"this page of sonas"`
	NextCursor string       `json:"next_cursor,omitempty" jsonschema:"pass as cursor for the next page; absent on the last"`
	Unanswered []string     `json:"unanswered,omitempty" jsonschema:"in a cluster: the members that did not answer in time (the list is made of the others')"`
}

func (m *mcpTools) listSonas(ctx context.Context, in ListSonasInput) (ListSonasOutput, error) {
	max := m.s.cfg.Server.MaxListLimit
	limit := in.Limit
	if limit == 0 {
		limit = min(50, max)
	}
	if limit < 1 || limit > max {
		return ListSonasOutput{}, badRequest("invalid_limit", "limit must be within 1..%d", max)
	}
	resp, unanswered, err := m.s.listSonasOp(ctx, in.Name, in.Cursor, limit)
	if err != nil {
		return ListSonasOutput{}, err
	}
	out := ListSonasOutput{Sonas: []SonaOutput{}, NextCursor: resp.GetNextCursor(), Unanswered: unanswered}
	for _, r := range resp.Items {
		out.Sonas = append(out.Sonas, sonaOutput(r))
	}
	return out, nil
}

// CreateSonaInput is the create_sona tool's input.
type CreateSonaInput struct {
	Name           string `json:"name" jsonschema:"the sona's name, unique among the sonas unless allow_duplicate"`
	AllowDuplicate bool   `json:"allow_duplicate,omitempty" jsonschema:"create the sona even when another has this name (the name then names neither: use uuids)"`
}

func (m *mcpTools) createSona(ctx context.Context, in CreateSonaInput) (SonaOutput, error) {
	rec, err := m.s.createSonaOp(ctx, in.Name, in.AllowDuplicate)
	if err != nil {
		return SonaOutput{}, err
	}
	return sonaOutput(rec), nil
}

// Resources.

// resourceError turns an operation's error into the resource read's: the
// SDK's resource-not-found for what does not exist, invalid params for a
// malformed URI, and the classified message otherwise.
func (m *mcpTools) resourceError(ctx context.Context, uri string, err error) error {
	status, code, msg := m.s.classify(ctx, err)
	switch status {
	case http.StatusNotFound:
		return mcp.ResourceNotFoundError(uri)
	case http.StatusGone:
		// Forgotten: the resource is not there, as the SDK's not-found
		// says, and the message says why (the REST routes' 410).
		return &jsonrpc.Error{Code: mcp.CodeResourceNotFound, Message: fmt.Sprintf("%s: %s", code, msg),
			Data: json.RawMessage(fmt.Sprintf(`{"uri":%q,"forgotten":true}`, uri))}
	case http.StatusBadRequest:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: %s", code, msg)}
	}
	return fmt.Errorf("%s: %s", code, msg)
}

// uriParam is the part of uri after prefix.
func uriParam(uri, prefix string) (string, error) {
	v, ok := strings.CutPrefix(uri, prefix)
	if !ok || v == "" || strings.ContainsAny(v, "/?#") {
		return "", badRequest("invalid", "want %s{id}, got %q", prefix, uri)
	}
	return v, nil
}

func (m *mcpTools) cidParam(uri, prefix string) (cid.Cid, error) {
	v, err := uriParam(uri, prefix)
	if err != nil {
		return cid.Undef, err
	}
	return parseCID(v)
}

func (m *mcpTools) readBlock(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	ctx, cancel := m.call(ctx)
	defer cancel()
	c, err := m.cidParam(uri, "ipfs://")
	if err != nil {
		return nil, m.resourceError(ctx, uri, err)
	}
	// Like the gateway: a block is not tied to a sona.
	if err := requireUnscoped(ctx, "reading raw blocks"); err != nil {
		return nil, m.resourceError(ctx, uri, err)
	}
	data, err := m.s.self.Block(c)
	if err != nil {
		return nil, m.resourceError(ctx, uri, err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/vnd.ipld.raw", Blob: data}}}, nil
}

func (m *mcpTools) readMemory(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	ctx, cancel := m.call(ctx)
	defer cancel()
	c, err := m.cidParam(uri, "memoria://memory/")
	if err != nil {
		return nil, m.resourceError(ctx, uri, err)
	}
	if c.Prefix().Codec != model.CodecDagCBOR {
		return nil, mcp.ResourceNotFoundError(uri) // a raw block is never a memory
	}
	out, err := m.s.memoryOp(ctx, c)
	if err != nil {
		return nil, m.resourceError(ctx, uri, err)
	}
	return m.jsonResource(uri, out)
}

// jsonResource renders an API message as a JSON resource.
func (m *mcpTools) jsonResource(uri string, msg proto.Message) (*mcp.ReadResourceResult, error) {
	body, err := MarshalJSON(msg)
	if err != nil {
		return nil, m.resourceError(context.Background(), uri, err) // cannot happen: a message we built
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(body)}}}, nil
}

func (m *mcpTools) readFile(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	ctx, cancel := m.call(ctx)
	defer cancel()
	c, err := m.cidParam(uri, "memoria://file/")
	if err != nil {
		return nil, m.resourceError(ctx, uri, err)
	}
	data, mimeType, _, err := m.s.fileOp(ctx, c)
	if err != nil {
		return nil, m.resourceError(ctx, uri, err)
	}
	rc := &mcp.ResourceContents{URI: uri, MIMEType: mimeType}
	if textual(mimeType) && utf8.Valid(data) {
		rc.Text = string(data)
	} else {
		rc.Blob = data
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{rc}}, nil
}

// textual reports whether a MIME type is text a client shows as such.
func textual(mimeType string) bool {
	mt, _, _ := strings.Cut(mimeType, ";")
	mt = strings.TrimSpace(mt)
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "application/xml" || strings.HasSuffix(mt, "+xml")
}

func (m *mcpTools) readSona(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	ctx, cancel := m.call(ctx)
	defer cancel()
	id, err := uriParam(uri, "memoria://sona/")
	if err != nil {
		return nil, m.resourceError(ctx, uri, err)
	}
	if err := requireScope(ctx, ScopeRead); err != nil {
		return nil, m.resourceError(ctx, uri, err)
	}
	rec, err := m.s.sonaByUUID(ctx, id)
	if errors.Is(err, base.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, m.resourceError(ctx, uri, err)
	}
	return m.jsonResource(uri, rec)
}

// ForgetInput is the forget tool's input (POST /forget's body).
type ForgetInput struct {
	CIDs        []string `json:"cids,omitempty" jsonschema:"memories to forget, by CID"`
	Sona        string   `json:"sona,omitempty" jsonschema:"a sona (uuid or name): its memories (with the filters below, those that match)"`
	Label       string   `json:"label,omitempty" jsonschema:"key or key=value: the memories with that label"`
	AgentID     string   `json:"agent_id,omitempty" jsonschema:"the memories this agent wrote"`
	Since       *int64   `json:"since,omitempty" jsonschema:"the memories created at or after this unix second"`
	Until       *int64   `json:"until,omitempty" jsonschema:"the memories created before this unix second"`
	DerivedFrom []string `json:"derived_from,omitempty" jsonschema:"memories whose derivatives (what their reverse edges reach) go with them"`
	Reason      string   `json:"reason,omitempty" jsonschema:"why: recorded in the tombstones"`
	DryRun      bool     `json:"dry_run,omitempty" jsonschema:"list what would be forgotten; forget nothing"`
}

// ForgetOutput is the forget tool's output.
type ForgetOutput struct {
	DryRun   bool     `json:"dry_run" jsonschema:"nothing was forgotten: this is what would be"`
	Memories uint64   `json:"memories" jsonschema:"memories forgotten"`
	Files    uint64   `json:"files" jsonschema:"file blocks forgotten"`
	Already  uint64   `json:"already" jsonschema:"CIDs named that were forgotten before"`
	CIDs     []string `json:"cids" jsonschema:"the CIDs forgotten (at most 1000)"`
}

func (m *mcpTools) forget(ctx context.Context, in ForgetInput) (ForgetOutput, error) {
	rep, err := m.s.forgetOp(ctx, &messages.ForgetRequest{Cids: in.CIDs, Sona: in.Sona, Label: in.Label, AgentId: in.AgentID,
		Since: in.Since, Until: in.Until, DerivedFrom: in.DerivedFrom, Reason: in.Reason, DryRun: in.DryRun})
	if err != nil {
		return ForgetOutput{}, err
	}
	out := ForgetOutput{DryRun: rep.DryRun, Memories: rep.Memories, Files: rep.Files, Already: rep.Already, CIDs: []string{}}
	for _, t := range rep.Items {
		out.CIDs = append(out.CIDs, t.Cid)
	}
	return out, nil
}
