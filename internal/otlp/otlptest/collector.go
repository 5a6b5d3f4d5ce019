// Package otlptest is an OTLP/HTTP trace collector for tests: it decodes
// what it receives with OpenTelemetry's own generated protobuf types
// (go.opentelemetry.io/proto/otlp), so a test checks the exporter against
// the wire format, not against our encoder. Only tests import it.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Collector is a running collector. Reply, when set, answers a request
// instead of 200 (it may write a status and headers).
type Collector struct {
	URL string // the base URL: spans are taken at URL + "/v1/traces"

	mu       sync.Mutex
	requests []Request
	reply    func(w http.ResponseWriter, n int) bool
}

// Request is one export as received.
type Request struct {
	Path    string
	Header  http.Header
	Payload *tracepb.TracesData
}

// Span is a decoded span with the resource and scope it came in.
type Span struct {
	*tracepb.Span
	Resource map[string]*commonpb.AnyValue
	Scope    string
}

// TraceID is the span's trace id in hex.
func (s Span) TraceID() string { return hex.EncodeToString(s.Span.TraceId) }

// SpanID is the span's id in hex.
func (s Span) SpanID() string { return hex.EncodeToString(s.Span.SpanId) }

// ParentID is the span's parent id in hex ("" for a root).
func (s Span) ParentID() string { return hex.EncodeToString(s.Span.ParentSpanId) }

// Attr is the attribute key of the span (nil when absent).
func (s Span) Attr(key string) *commonpb.AnyValue {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

// New starts a collector, stopped at the end of the test.
func New(t testing.TB) *Collector {
	c := &Collector{}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// Reply makes f answer the n-th request (from 0) when it returns true.
func (c *Collector) Reply(f func(w http.ResponseWriter, n int) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reply = f
}

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	body := io.Reader(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// An ExportTraceServiceRequest and a TracesData are the same message on
	// the wire (field 1, repeated ResourceSpans); TracesData's package needs
	// no gRPC.
	td := &tracepb.TracesData{}
	if err := proto.Unmarshal(b, td); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	n := len(c.requests)
	c.requests = append(c.requests, Request{Path: r.URL.Path, Header: r.Header.Clone(), Payload: td})
	reply := c.reply
	c.mu.Unlock()
	if reply != nil && reply(w, n) {
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse
}

// Requests are the requests received so far.
func (c *Collector) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Request(nil), c.requests...)
}

// Spans are the spans received so far, in order.
func (c *Collector) Spans() []Span {
	var out []Span
	for _, r := range c.Requests() {
		for _, rs := range r.Payload.ResourceSpans {
			res := map[string]*commonpb.AnyValue{}
			for _, kv := range rs.GetResource().GetAttributes() {
				res[kv.Key] = kv.Value
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					out = append(out, Span{Span: s, Resource: res, Scope: ss.GetScope().GetName()})
				}
			}
		}
	}
	return out
}

// Named is the spans named name.
func (c *Collector) Named(name string) []Span {
	var out []Span
	for _, s := range c.Spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Buffer is a log destination safe for the exporter's and the server's
// goroutines, for tests that read what was logged.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
