// Package client is a Go client of Memoria's REST API. The CLI uses it
// against a running server, and against an embedded server in the same
// process (see Embedded), so both paths run the same code.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/messages"
)

// Client talks to one Memoria server.
type Client struct {
	base  string
	hc    *http.Client
	token string
}

// WithToken sends token as Authorization: Bearer on every request.
func (c *Client) WithToken(token string) *Client {
	c.token = token
	return c
}

// New returns a client of the server at base (e.g. http://127.0.0.1:7777).
func New(base string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(base, "/"), hc: hc}
}

// Embedded returns a client that calls h in process, without a network,
// as the local user (api.Local: no token needed, whatever tokens the
// server's config names).
func Embedded(h http.Handler) *Client {
	return New("http://embedded", &http.Client{Transport: handlerTransport{h}})
}

type handlerTransport struct{ h http.Handler }

// RoundTrip runs the handler. A request for server-sent events gets its
// answer over a pipe, as it is written (as over a network); any other, whole.
func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		return t.buffered(r)
	}
	pr, pw := io.Pipe()
	rw := &pipeResponse{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				// The server cut the response short (as a real connection would end).
				rw.cut = fmt.Errorf("%s %s: the server cut the response short", r.Method, r.URL.Path)
				rw.markReady()
				pw.CloseWithError(rw.cut)
				return
			}
			rw.WriteHeader(http.StatusOK)
			pw.Close()
		}()
		t.h.ServeHTTP(rw, r.WithContext(api.WithPrincipal(r.Context(), api.Local)))
	}()
	select {
	case <-rw.ready:
	case <-r.Context().Done():
		pr.CloseWithError(r.Context().Err())
		return nil, r.Context().Err()
	}
	if !rw.wrote { // ready without a header: the handler was cut short
		return nil, rw.cut
	}
	return &http.Response{StatusCode: rw.status, Status: http.StatusText(rw.status), Header: rw.header.Clone(),
		Body: pr, Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// buffered runs the handler to the end and hands over its whole response.
func (t handlerTransport) buffered(r *http.Request) (resp *http.Response, err error) {
	rec := httptest.NewRecorder()
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			// The server cut the response short (as a real connection would end).
			resp, err = nil, fmt.Errorf("%s %s: the server cut the response short", r.Method, r.URL.Path)
		}
	}()
	t.h.ServeHTTP(rec, r.WithContext(api.WithPrincipal(r.Context(), api.Local)))
	return rec.Result(), nil
}

// pipeResponse is the in-process ResponseWriter of handlerTransport.
type pipeResponse struct {
	header http.Header
	pw     *io.PipeWriter
	status int
	wrote  bool // the header was sent
	cut    error
	ready  chan struct{}
	once   sync.Once
}

func (p *pipeResponse) Header() http.Header { return p.header }

func (p *pipeResponse) markReady() { p.once.Do(func() { close(p.ready) }) }

func (p *pipeResponse) WriteHeader(code int) {
	if p.wrote {
		return
	}
	p.status, p.wrote = code, true
	p.markReady()
}

func (p *pipeResponse) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return p.pw.Write(b)
}

// Flush: every Write already reaches the reader.
func (p *pipeResponse) Flush() {}

// Error is an error answer of the server.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code) }

// send makes one request and returns the body of a successful answer, or
// the server's error as an *Error.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, header ...string) ([]byte, error) {
	rc, err := c.open(ctx, method, path, body, header...)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// open makes one request and returns the body of a successful answer to
// read, or the server's error as an *Error.
func (c *Client) open(ctx context.Context, method, path string, body io.Reader, header ...string) (io.ReadCloser, error) {
	resp, err := c.openResponse(ctx, method, path, body, header...)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// openResponse is open with the whole response (its headers, its length).
func (c *Client) openResponse(ctx context.Context, method, path string, body io.Reader, header ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var e messages.ErrorResponse
	if protojson.Unmarshal(data, &e) == nil && e.Error != nil {
		return nil, &Error{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	return nil, &Error{Status: resp.StatusCode, Code: "http", Message: strings.TrimSpace(string(data))}
}

// do makes one request and decodes its JSON answer into out.
func (c *Client) do(ctx context.Context, method, path string, body io.Reader, contentType string, out proto.Message) error {
	var header []string
	if contentType != "" {
		header = []string{"Content-Type", contentType}
	}
	data, err := c.send(ctx, method, path, body, header...)
	if err != nil {
		return err
	}
	return decodeAnswer(path, data, out)
}

// decodeAnswer decodes the JSON answer from path into out.
func decodeAnswer(path string, data []byte, out proto.Message) error {
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, out); err != nil {
		return fmt.Errorf("client: bad response from %s: %w", path, err)
	}
	return nil
}

func (c *Client) post(ctx context.Context, path string, in, out proto.Message) error {
	data, err := c.postJSON(ctx, path, in)
	if err != nil {
		return err
	}
	return decodeAnswer(path, data, out)
}

// postJSON posts in as JSON to path and returns the answer undecoded.
func (c *Client) postJSON(ctx context.Context, path string, in proto.Message) ([]byte, error) {
	body, err := api.MarshalJSON(in)
	if err != nil {
		return nil, err
	}
	return c.send(ctx, http.MethodPost, path, bytes.NewReader(body), "Content-Type", "application/json")
}

func (c *Client) get(ctx context.Context, path string, out proto.Message) error {
	return c.do(ctx, http.MethodGet, path, nil, "", out)
}

// Health returns the server's health summary.
func (c *Client) Health(ctx context.Context) (*messages.Health, error) {
	out := &messages.Health{}
	return out, c.get(ctx, "/healthz", out)
}

// CreateSona creates a sona; a name another sona has is refused (409
// exists).
func (c *Client) CreateSona(ctx context.Context, name string) (*messages.Sona, error) {
	return c.CreateSonaWith(ctx, &messages.CreateSonaRequest{Name: name})
}

// CreateSonaWith creates a sona as req asks (AllowDuplicate: even when
// another sona has its name).
func (c *Client) CreateSonaWith(ctx context.Context, req *messages.CreateSonaRequest) (*messages.Sona, error) {
	out := &messages.Sona{}
	return out, c.post(ctx, "/sonas", req, out)
}

// Sona returns a sona by uuid, or by a name that one sona has.
func (c *Client) Sona(ctx context.Context, ref string) (*messages.Sona, error) {
	out := &messages.Sona{}
	return out, c.get(ctx, "/sona/"+url.PathEscape(ref), out)
}

// Tiers returns the state of a sona's MemoryOS tiers.
func (c *Client) Tiers(ctx context.Context, uuid string) (*messages.Tiers, error) {
	out := &messages.Tiers{}
	return out, c.get(ctx, "/sona/"+url.PathEscape(uuid)+"/tiers", out)
}

// ListSonas returns one page of sonas; name filters by exact name.
func (c *Client) ListSonas(ctx context.Context, name, cursor string, limit int) (*messages.ListSonasResponse, error) {
	out := &messages.ListSonasResponse{}
	return out, c.get(ctx, "/sonas/list?"+pageQuery("name", name, cursor, limit), out)
}

// ListMemories returns one page of memories; sona (uuid or name) lists one
// sona's chain.
func (c *Client) ListMemories(ctx context.Context, sona, cursor string, limit int) (*messages.ListMemoriesResponse, error) {
	out := &messages.ListMemoriesResponse{}
	return out, c.get(ctx, "/memories/list?"+pageQuery("sona", sona, cursor, limit), out)
}

// pageQuery is the query of a list route: an optional filter, the cursor
// and the limit, each left out when empty.
func pageQuery(filter, value, cursor string, limit int) string {
	q := url.Values{}
	if value != "" {
		q.Set(filter, value)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q.Encode()
}

// Memory returns a memory by CID.
func (c *Client) Memory(ctx context.Context, cid string) (*messages.Memory, error) {
	out := &messages.Memory{}
	return out, c.get(ctx, "/memory/"+url.PathEscape(cid), out)
}

// Chat advances a sona with an input and returns its response.
func (c *Client) Chat(ctx context.Context, uuid string, req *messages.ChatRequest) (*messages.ChatResponse, error) {
	out := &messages.ChatResponse{}
	return out, c.post(ctx, "/sona/"+url.PathEscape(uuid)+"/chat", req, out)
}

// ChatStream chats like Chat with the reply streamed: onToken hears each
// piece as the server sends it, and the stored step is returned at the
// end.
func (c *Client) ChatStream(ctx context.Context, uuid string, req *messages.ChatRequest, onToken func(string)) (*messages.ChatResponse, error) {
	in := proto.Clone(req).(*messages.ChatRequest)
	in.Stream = true
	body, err := api.MarshalJSON(in)
	if err != nil {
		return nil, err
	}
	rc, err := c.open(ctx, http.MethodPost, "/sona/"+url.PathEscape(uuid)+"/chat", bytes.NewReader(body),
		"Content-Type", "application/json", "Accept", "text/event-stream")
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	event, data := "", ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		case line == "":
			switch event {
			case "token":
				var t struct {
					Content string `json:"content"`
				}
				if err := json.Unmarshal([]byte(data), &t); err != nil {
					return nil, fmt.Errorf("client: bad token event: %w", err)
				}
				onToken(t.Content)
			case "done":
				out := &messages.ChatResponse{}
				if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(data), out); err != nil {
					return nil, fmt.Errorf("client: bad done event: %w", err)
				}
				return out, nil
			case "error":
				var e messages.ErrorResponse
				if err := protojson.Unmarshal([]byte(data), &e); err != nil || e.Error == nil {
					return nil, fmt.Errorf("client: bad error event: %s", data)
				}
				return nil, &Error{Status: streamStatus[e.Error.Code], Code: e.Error.Code, Message: e.Error.Message}
			}
			event, data = "", ""
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("client: the stream ended before the step was stored")
}

// streamStatus is the status a chat would have answered with for an error
// reported in a stream.
var streamStatus = map[string]int{"llm_failed": http.StatusBadGateway, "llm_unavailable": http.StatusServiceUnavailable,
	"timeout": http.StatusGatewayTimeout, "internal": http.StatusInternalServerError}

// Query answers like Chat but stores nothing.
func (c *Client) Query(ctx context.Context, uuid string, req *messages.ChatRequest) (*messages.QueryResponse, error) {
	out := &messages.QueryResponse{}
	return out, c.post(ctx, "/sona/"+url.PathEscape(uuid)+"/query", req, out)
}

// Recall returns the memories that matter for a query in a sona.
func (c *Client) Recall(ctx context.Context, uuid string, req *messages.RecallRequest) (*messages.RecallResponse, error) {
	out := &messages.RecallResponse{}
	return out, c.post(ctx, recallPath(uuid), req, out)
}

// RecallJSON is Recall's answer as the server sent it, undecoded: for a
// caller that reads a few of its fields itself (decoding the whole
// answer with protojson costs more than the request).
func (c *Client) RecallJSON(ctx context.Context, uuid string, req *messages.RecallRequest) ([]byte, error) {
	return c.postJSON(ctx, recallPath(uuid), req)
}

func recallPath(uuid string) string { return "/sona/" + url.PathEscape(uuid) + "/recall" }

// Insert stores a memory into a sona.
func (c *Client) Insert(ctx context.Context, req *messages.InsertRequest) (*messages.InsertResponse, error) {
	out := &messages.InsertResponse{}
	return out, c.post(ctx, "/memories", req, out)
}

// PutFile stores a file and returns its CID.
func (c *Client) PutFile(ctx context.Context, r io.Reader) (*messages.FileResponse, error) {
	out := &messages.FileResponse{}
	return out, c.do(ctx, http.MethodPost, "/files", r, "application/octet-stream", out)
}

// Block fetches a block's exact bytes through the gateway route.
func (c *Client) Block(ctx context.Context, cid string) ([]byte, error) {
	return c.send(ctx, http.MethodGet, "/ipfs/"+url.PathEscape(cid), nil, "Accept", "application/vnd.ipld.raw")
}

// Heartbeat runs one heartbeat tick now; dream forces dream mode.
func (c *Client) Heartbeat(ctx context.Context, dream bool) (*messages.TickReport, error) {
	path := "/admin/heartbeat"
	if dream {
		path += "?dream=1"
	}
	out := &messages.TickReport{}
	return out, c.do(ctx, http.MethodPost, path, nil, "", out)
}

// Compact sweeps every memory and folds the cold branches now.
func (c *Client) Compact(ctx context.Context) (*messages.TickReport, error) {
	out := &messages.TickReport{}
	return out, c.do(ctx, http.MethodPost, "/admin/compact", nil, "", out)
}

// GC runs a pass of the store's garbage collection now.
func (c *Client) GC(ctx context.Context) (*messages.GCReport, error) {
	out := &messages.GCReport{}
	return out, c.do(ctx, http.MethodPost, "/admin/gc", nil, "", out)
}

// Storage reports the store's size and upkeep.
func (c *Client) Storage(ctx context.Context) (*messages.StorageStatus, error) {
	out := &messages.StorageStatus{}
	return out, c.get(ctx, "/admin/storage", out)
}

// Backup streams a backup of the store: a full one for a nil req, else
// the incremental one req describes.
func (c *Client) Backup(ctx context.Context, req *messages.BackupRequest) (io.ReadCloser, error) {
	var body io.Reader
	if req != nil {
		b, err := api.MarshalJSON(req)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	return c.open(ctx, http.MethodPost, "/admin/backup", body, "Content-Type", "application/json")
}

// Insights returns the stored insights, newest first (limit 0: the
// server's default).
func (c *Client) Insights(ctx context.Context, limit int) (*messages.InsightList, error) {
	out := &messages.InsightList{}
	return out, c.get(ctx, "/insights?"+pageQuery("", "", "", limit), out)
}

// WriteBackbone writes one agent's memory straight to the backbone.
func (c *Client) WriteBackbone(ctx context.Context, req *messages.WriteBackbone) (*messages.BackboneWritten, error) {
	out := &messages.BackboneWritten{}
	return out, c.post(ctx, "/backbone", req, out)
}

// Backbone returns one page of the backbone's memories, in the order written.
func (c *Client) Backbone(ctx context.Context, cursor string, limit int) (*messages.ListMemoriesResponse, error) {
	out := &messages.ListMemoriesResponse{}
	return out, c.get(ctx, "/backbone?"+pageQuery("", "", cursor, limit), out)
}

// Contribute offers an agent's version of a concept to the backbone.
func (c *Client) Contribute(ctx context.Context, req *messages.Contribute) (*messages.ContributeResult, error) {
	out := &messages.ContributeResult{}
	return out, c.post(ctx, "/backbone/contribute", req, out)
}

// Pending returns the concepts waiting for consensus.
func (c *Client) Pending(ctx context.Context) (*messages.PendingList, error) {
	out := &messages.PendingList{}
	return out, c.get(ctx, "/backbone/pending", out)
}

// Conflicts returns the open conflicts.
func (c *Client) Conflicts(ctx context.Context) (*messages.ConflictList, error) {
	out := &messages.ConflictList{}
	return out, c.get(ctx, "/conflicts", out)
}

// ResolveConflict settles a conflict: content (by agent, which may be
// empty) goes to the backbone. It returns the resolution's CID.
func (c *Client) ResolveConflict(ctx context.Context, id, content, agent string) (*messages.MemoryRef, error) {
	out := &messages.MemoryRef{}
	return out, c.post(ctx, "/conflicts/"+url.PathEscape(id)+"/resolve", &messages.Resolve{Content: content, AgentId: agent}, out)
}

// Export opens the JSON export (format memoria-export/1) of one sona —
// sona is its uuid or unambiguous name — or, with all, of every sona. The
// caller reads and closes it; a read error means the export was cut
// short and is incomplete.
func (c *Client) Export(ctx context.Context, sona string, all bool) (io.ReadCloser, error) {
	q := url.Values{}
	if all {
		q.Set("all", "1")
	}
	if sona != "" {
		q.Set("sona", sona)
	}
	return c.open(ctx, http.MethodGet, "/export?"+q.Encode(), nil)
}

// ExportCAR opens the CAR export (CAR v1: roots the sonas' heads, the
// anchored memories and a manifest) of one sona or, with all, of every
// sona. size is its length in bytes, or -1 when the server did not say.
// The caller reads and closes it; a read error means it was cut short.
func (c *Client) ExportCAR(ctx context.Context, sona string, all bool) (rc io.ReadCloser, size int64, err error) {
	q := url.Values{"format": {"car"}}
	if all {
		q.Set("all", "1")
	}
	if sona != "" {
		q.Set("sona", sona)
	}
	resp, err := c.openResponse(ctx, http.MethodGet, "/export?"+q.Encode(), nil)
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}

// ImportCAR imports a CAR export read from r.
func (c *Client) ImportCAR(ctx context.Context, r io.Reader) (*messages.ImportResult, error) {
	out := &messages.ImportResult{}
	return out, c.do(ctx, http.MethodPost, "/import", r, api.CARMediaType, out)
}

// Import imports a JSON export read from r.
func (c *Client) Import(ctx context.Context, r io.Reader) (*messages.ImportResult, error) {
	out := &messages.ImportResult{}
	return out, c.do(ctx, http.MethodPost, "/import", r, "application/json", out)
}

// Anchors returns one page of the anchor list.
func (c *Client) Anchors(ctx context.Context, cursor string, limit int) (*messages.AnchorList, error) {
	out := &messages.AnchorList{}
	return out, c.get(ctx, "/anchors?"+pageQuery("", "", cursor, limit), out)
}

// ResolveSona finds a sona by uuid, or by name when exactly one has it.
// With create, a missing name is created.
func (c *Client) ResolveSona(ctx context.Context, ref string, create bool) (*messages.Sona, error) {
	if strings.TrimSpace(ref) == "" {
		return nil, fmt.Errorf("no sona given: name a sona by uuid or name")
	}
	if s, err := c.Sona(ctx, ref); err == nil {
		return s, nil
	} else if e, ok := err.(*Error); !ok || (e.Status != http.StatusNotFound && e.Status != http.StatusBadRequest && e.Status != http.StatusConflict) {
		return nil, err
	}
	page, err := c.ListSonas(ctx, ref, "", 2)
	if err != nil {
		return nil, err
	}
	switch len(page.Items) {
	case 1:
		return page.Items[0], nil
	case 0:
		if create && !looksLikeUUID(ref) {
			return c.CreateSona(ctx, ref)
		}
		return nil, fmt.Errorf("no sona with uuid or name %q (create it with `memoria sonas create %s`)", ref, ref)
	}
	return nil, fmt.Errorf("more than one sona is named %q: use its uuid (see `memoria sonas`)", ref)
}

// looksLikeUUID reports whether ref has the shape of a uuid: such a ref
// names a sona that does not exist, not a new sona to create.
func looksLikeUUID(ref string) bool {
	ref = strings.Trim(strings.TrimPrefix(strings.ToLower(ref), "urn:uuid:"), "{}")
	if len(ref) != 36 && len(ref) != 32 {
		return false
	}
	for _, r := range ref {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r == '-') {
			return false
		}
	}
	return true
}

// Forget excises what req selects (POST /forget); with req.DryRun, it
// lists what would go and forgets nothing.
func (c *Client) Forget(ctx context.Context, req *messages.ForgetRequest) (*messages.ForgetReport, error) {
	out := &messages.ForgetReport{}
	return out, c.post(ctx, "/forget", req, out)
}
