// Package api holds Memoria's transports. This file is the REST API: JSON
// in and out on one listener, every error as {"error":{"code","message"}}
// with its HTTP status. Reads go straight to the memory.Self; writes to a
// sona's chain go through its actor.
package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/metrics"
	"github.com/memoria-ai/memoria/internal/trace"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/forget"
	"github.com/memoria-ai/memoria/messages"
)

// Server serves the REST API, MCP over streamable HTTP at /mcp, and
// whatever else is mounted on its mux, behind one authentication check.
type Server struct {
	self    *memory.Self
	sys     *actors.System
	cfg     config.Config
	log     *slog.Logger
	mux     *http.ServeMux
	tokens  *tokens
	metrics *metrics.Set // nil: nothing is recorded
	guard   *browserGuard
	mcp     *mcpDefs                 // the MCP tools' definitions
	clock   clock.Clock              // the self's: times requests and recalls
	tp      oteltrace.TracerProvider // nil: tracing is off (tracing.go)
	tracer  oteltrace.Tracer
	// sonaCreator, when set, creates the sonas instead of the self's
	// Sonas (a cluster member claims the name cluster-wide: CreateSonasWith).
	sonaCreator SonaCreator
	// forgetRunner, when set, carries out the forgets (ForgetWith).
	forgetRunner ForgetRunner
	// recallRunner, when set, runs the recalls (RecallWith); sonaLister
	// lists the sonas (ListSonasWith).
	recallRunner RecallRunner
	sonaLister   SonaLister
}

// A SonaCreator creates a sona called name, refusing a name another sona
// has (base.ErrExists) when unique.
type SonaCreator func(ctx context.Context, name string, unique bool) (*messages.Sona, error)

// CreateSonasWith has fn create every sona created through this server
// (POST /sonas, MCP create_sona).
func (s *Server) CreateSonasWith(fn SonaCreator) { s.sonaCreator = fn }

// NewServer builds the REST API over a self and its actor system.
func NewServer(self *memory.Self, sys *actors.System, cfg config.Config, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{self: self, sys: sys, cfg: cfg, log: log, mux: http.NewServeMux(), tokens: newTokens(cfg.Server.Auth),
		guard: newBrowserGuard(cfg.Server), mcp: newMCPDefs(cfg), clock: self.Clock()}
	s.routes()
	return s
}

// ServeMetrics records the HTTP and recall metrics in m and serves m at
// GET /metrics.
func (s *Server) ServeMetrics(m *metrics.Set) {
	s.metrics = m
	s.mux.Handle("GET /metrics", m.Handler())
}

// Mux is the mux the routes are registered on, for transports mounted
// beside the REST API (the gateway): whatever it serves is behind
// ServeHTTP's authentication, limits and metrics.
func (s *Server) Mux() *http.ServeMux { return s.mux }

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /healthz", s.health)
	m.HandleFunc("GET /memory/{cid}", s.getMemory)
	m.HandleFunc("GET /memory/{cid}/evaluation", s.getEvaluation)
	m.HandleFunc("GET /memories/list", s.listMemories)
	m.HandleFunc("POST /memories", s.insert)
	m.HandleFunc("GET /sona/{uuid}", s.getSona)
	m.HandleFunc("GET /sona/{uuid}/tiers", s.getTiers)
	m.HandleFunc("GET /sonas/list", s.listSonas)
	m.HandleFunc("POST /sonas", s.createSona)
	m.HandleFunc("POST /sona/{uuid}/chat", s.chat)
	m.HandleFunc("POST /sona/{uuid}/query", s.query)
	m.HandleFunc("POST /sona/{uuid}/recall", s.recall)
	m.HandleFunc("POST /files", s.putFile)
	m.HandleFunc("GET /file/{cid}", s.getFile)
	m.HandleFunc("GET /ipfs/{path...}", s.serveGateway) // GET and HEAD (gateway.go)
	m.HandleFunc("POST /admin/heartbeat", s.heartbeat)
	m.HandleFunc("POST /admin/compact", s.compact)
	m.HandleFunc("POST /admin/gc", s.gc) // the store's upkeep (storage.go)
	m.HandleFunc("GET /admin/storage", s.storage)
	m.HandleFunc("POST /admin/backup", s.backup)
	m.HandleFunc("GET /insights", s.insights)
	m.HandleFunc("POST /backbone", s.writeBackbone)
	m.HandleFunc("GET /backbone", s.listBackbone)
	m.HandleFunc("POST /backbone/contribute", s.contribute)
	m.HandleFunc("GET /backbone/pending", s.pending)
	m.HandleFunc("GET /conflicts", s.conflicts)
	m.HandleFunc("POST /conflicts/{id}/resolve", s.resolve)
	m.HandleFunc("GET /export", s.export)
	m.HandleFunc("POST /import", s.importExport)
	m.HandleFunc("GET /anchors", s.anchors)
	m.HandleFunc("POST /forget", s.forget) // forget.go
	m.HandleFunc("GET /forgotten", s.forgotten)
	m.Handle("/mcp", s.mcpHTTP())
	s.uiRoutes(m) // the web explorer (ui.go)
}

// transfers are the routes that move a whole self: they get
// server.transfer_timeout and server.max_import_bytes instead of the
// request limits.
// A CAR of a whole DAG from the gateway is one too, and so are a backup
// and a pass of the store's garbage collection (which may rewrite it).
var transfers = map[string]bool{"GET /export": true, "POST /import": true, "GET /ipfs/{path...}": true,
	"POST /admin/backup": true, "POST /admin/gc": true}

// RequestLimit is the time a request may take (server.request_timeout,
// or transfer_timeout for the transfer routes), and whether it is a
// transfer: the listener sets the connection's deadlines from it.
func (s *Server) RequestLimit(r *http.Request) (time.Duration, bool) {
	if _, pattern := s.mux.Handler(r); transfers[pattern] {
		return s.cfg.Server.TransferTimeout.D(), true
	}
	return s.cfg.Server.RequestTimeout.D(), false
}

// ErrBodyTimeout marks a request body that did not arrive within its
// deadline (server.read_timeout; transfer_timeout for the transfers).
var ErrBodyTimeout = errors.New("api: the request body was not received in time")

// ServeHTTP authenticates the request, applies the request limits, turns
// panics into 500s and the mux's own 404/405 answers into JSON errors, and
// records the request's metrics by route (the mux pattern).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.clock.Now()
	h, pattern := s.mux.Handler(r)
	rw := &statusWriter{ResponseWriter: w}
	w = rw
	defer func() { s.metrics.ObserveHTTP(pattern, r.Method, rw.code(), s.clock.Since(start)) }()
	if s.tracer != nil {
		var end func()
		r, end = s.startSpan(r, pattern, rw)
		defer end()
	}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p) // a response cut short on purpose (see export)
			}
			s.log.ErrorContext(r.Context(), "handler panic", "path", r.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			writeError(w, http.StatusInternalServerError, "internal", "internal error")
		}
	}()
	// A principal already in the context was set in process (the embedded
	// client, tests): a remote request cannot carry one.
	p, inProcess := r.Context().Value(principalKey{}).(*Principal)
	if !inProcess || p == nil {
		if err := s.guard.check(r); err != nil {
			s.fail(w, err)
			return
		}
		if p = s.authorize(w, r, pattern); p == nil {
			return
		}
	}
	if !p.SonaScoped() {
		rw.elapsed = func() time.Duration { return s.clock.Since(start) }
	}
	timeout, limit := s.cfg.Server.RequestTimeout.D(), s.cfg.Server.MaxBodyBytes
	if transfers[pattern] {
		timeout, limit = s.cfg.Server.TransferTimeout.D(), s.cfg.Server.MaxImportBytes
	}
	ctx, cancel := context.WithTimeout(WithPrincipal(r.Context(), p), timeout)
	defer cancel()
	r = r.WithContext(ctx)
	rw.ctx = ctx
	r.Body = http.MaxBytesReader(w, r.Body, limit)

	if pattern == "" {
		// Not found or method not allowed: keep the mux's status and Allow header.
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if allow := rec.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		if rec.status == http.StatusMethodNotAllowed {
			writeError(w, rec.status, "method_not_allowed", fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow")))
		} else {
			writeError(w, http.StatusNotFound, "not_found", "no route for "+r.Method+" "+r.URL.Path)
		}
		return
	}
	s.mux.ServeHTTP(w, r) // sets the path values h reads
	s.log.DebugContext(ctx, "request", "method", r.Method, "path", r.URL.Path, "took", s.clock.Since(start))
}

// statusWriter remembers the status a handler answered with, and gives
// fail the request's context (for its trace ids in log lines and span).
// When elapsed is set — a principal not scoped to sonas: a scoped one
// is not told how long the server took, which could tell it what
// another sona holds — the response's headers carry the server's time
// until them, `Server-Timing: app;dur=<ms>` (what `memoria bench`
// reports beside the latency its clients see).
type statusWriter struct {
	http.ResponseWriter
	status  int
	ctx     context.Context
	elapsed func() time.Duration
	stamped bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.stamp()
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.stamp()
	return w.ResponseWriter.Write(b)
}

// stamp sets the Server-Timing header before the headers go out.
func (w *statusWriter) stamp() {
	if w.stamped || w.elapsed == nil {
		return
	}
	w.stamped = true
	ms := float64(w.elapsed().Microseconds()) / 1000
	w.Header().Set("Server-Timing", "app;dur="+strconv.FormatFloat(ms, 'f', 3, 64))
}

// Flush lets streamed responses (MCP's event streams, exports) through.
func (w *statusWriter) Flush() {
	w.stamp()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(code int)        { r.status = code }

// The API's own error classes, beside memory/base's.
var (
	errForbidden        = errors.New("forbidden")              // the principal may not do this
	errNotAcceptable    = errors.New("not acceptable")         // no representation asked for is served
	errUnsupportedMedia = errors.New("unsupported media type") // a body in a format not read
)

// apiError is a refusal of the shared operations: its class (one of
// memory/base's or the API's own sentinels above; errors.Is sees it), the
// code its answer names and the message. The operations say what went
// wrong; classify alone says what each class is answered with (the
// status of its class, its own code and message).
type apiError struct {
	class error
	code  string
	msg   string
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.class }

func badRequest(code, format string, args ...any) error {
	return &apiError{base.ErrInvalid, code, fmt.Sprintf(format, args...)}
}

// fail writes err as a JSON error with the status its class deserves.
func (s *Server) fail(w http.ResponseWriter, err error) {
	ctx := context.Background()
	if sw, ok := w.(*statusWriter); ok && sw.ctx != nil {
		ctx = sw.ctx
	}
	status, code, msg := s.classify(ctx, err)
	writeError(w, status, code, msg)
}

// classify gives an error its HTTP status, code and message (REST writes
// them as a JSON error, MCP as a tool error), and logs the server's own
// failures (with ctx, so the lines carry its trace ids, and on its span).
func (s *Server) classify(ctx context.Context, err error) (status int, code, msg string) {
	var ae *apiError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		status, _, _ = s.classify(ctx, ae.class) // its class's status, its own code and message
		return status, ae.code, ae.msg
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body exceeds %d bytes", mbe.Limit)
	case errors.Is(err, ErrBodyTimeout):
		return http.StatusRequestTimeout, "timeout", err.Error()
	case errors.Is(err, base.ErrInvalid):
		return http.StatusBadRequest, "invalid", err.Error()
	case errors.Is(err, base.ErrForgotten):
		return http.StatusGone, "forgotten", err.Error()
	case errors.Is(err, errForbidden), errors.Is(err, forget.ErrNotAllowed):
		return http.StatusForbidden, "forbidden", err.Error()
	case errors.Is(err, base.ErrNotFound):
		return http.StatusNotFound, "not_found", err.Error()
	case errors.Is(err, errNotAcceptable):
		return http.StatusNotAcceptable, "not_acceptable", err.Error()
	case errors.Is(err, base.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, "too_large", err.Error()
	case errors.Is(err, errUnsupportedMedia):
		return http.StatusUnsupportedMediaType, "unsupported_media_type", err.Error()
	case errors.Is(err, base.ErrDiskFull):
		return http.StatusInsufficientStorage, "insufficient_storage", err.Error()
	case errors.Is(err, base.ErrAmbiguous), errors.Is(err, base.ErrChainConflict):
		return http.StatusConflict, "conflict", err.Error()
	case errors.Is(err, base.ErrExists):
		return http.StatusConflict, "exists", err.Error()
	case errors.Is(err, llm.ErrCircuitOpen):
		return http.StatusServiceUnavailable, "llm_unavailable", err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "timeout", fmt.Sprintf("the request took longer than allowed (server.request_timeout %s): %v", s.cfg.Server.RequestTimeout, err)
	case errors.Is(err, actors.ErrLLM):
		return http.StatusBadGateway, "llm_failed", err.Error()
	case errors.Is(err, context.Canceled):
		return 499, "canceled", "the client went away"
	case errors.Is(err, actors.ErrUnavailable), errors.Is(err, base.ErrClosed):
		return http.StatusServiceUnavailable, "unavailable", err.Error()
	case errors.Is(err, base.ErrCorrupt):
		s.log.ErrorContext(ctx, "corruption", "err", err)
		trace.Fail(oteltrace.SpanFromContext(ctx), err)
		return http.StatusInternalServerError, "corrupt", err.Error()
	default:
		s.log.ErrorContext(ctx, "internal error", "err", err)
		trace.Fail(oteltrace.SpanFromContext(ctx), err)
		return http.StatusInternalServerError, "internal", err.Error()
	}
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, &messages.ErrorResponse{Error: &messages.ErrorBody{Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, m proto.Message) {
	b := jsonBuffers.Get().(*bytes.Buffer)
	defer putJSONBuffer(b)
	b.Reset()
	if err := writeMessage(b, m.ProtoReflect()); err != nil {
		status = http.StatusInternalServerError
		b.Reset()
		b.WriteString(`{"error":{"code":"internal","message":"response cannot be rendered"}}`)
	}
	b.WriteByte('\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	// Its length, as it is whole: a recall's answer of tens of kilobytes
	// went out chunked.
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// jsonBuffers are the buffers responses are rendered into, kept between
// requests (a recall's answer is tens of kilobytes: grown afresh each
// time, the buffer was a tenth of its rendering's cost).
var jsonBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putJSONBuffer keeps b for the next response unless it grew past 1 MiB
// (a large export's: let the collector have it).
func putJSONBuffer(b *bytes.Buffer) {
	if b.Cap() <= 1<<20 {
		jsonBuffers.Put(b)
	}
}

// decode reads a JSON request body into m.
func decode(r *http.Request, m proto.Message) error {
	body, err := readJSON(r)
	if err != nil {
		return err
	}
	if err := UnmarshalJSON(body, m); err != nil {
		return badRequest("malformed_json", "%s", jsonProblem("the body", body, err))
	}
	return nil
}

// readJSON reads a non-empty JSON request body.
func readJSON(r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
			return nil, &apiError{errUnsupportedMedia, "unsupported_media_type",
				fmt.Sprintf("send JSON with Content-Type: application/json, not %q", ct)}
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("malformed_json", "request body is empty: send a JSON object")
	}
	return body, nil
}
