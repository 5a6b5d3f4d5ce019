package api

import (
	"context"
	"net"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/memoria-ai/memoria/internal/trace"
	"github.com/memoria-ai/memoria/messages"
)

// Trace makes the server record a span per request (REST, MCP, gateway,
// web explorer) and per MCP method with tp, under the caller's span when
// the request carries a W3C traceparent. A nil tp leaves tracing off:
// ServeHTTP then does no tracing work at all.
func (s *Server) Trace(tp oteltrace.TracerProvider) {
	if tp == nil {
		return
	}
	s.tp = tp
	s.tracer = tp.Tracer(trace.Scope, oteltrace.WithInstrumentationVersion(Version))
}

// traceContext reads traceparent and tracestate. No trace header goes back
// in responses: Trace Context defines them as request headers (its
// traceresponse is a draft of Level 3).
var traceContext = propagation.TraceContext{}

// startSpan starts the server span of r, named by its route (the mux
// pattern, never the raw path: OpenTelemetry's HTTP conventions), and
// returns r with the span in its context and the function that ends it
// with the status rw saw.
func (s *Server) startSpan(r *http.Request, pattern string, rw *statusWriter) (*http.Request, func()) {
	route := pattern
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		route = pattern[i+1:]
	}
	name := r.Method
	if route != "" {
		name += " " + route
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", r.Method),
		attribute.String("url.path", r.URL.Path),
		attribute.String("url.scheme", scheme),
		attribute.String("network.protocol.version", strings.TrimPrefix(r.Proto, "HTTP/")),
	}
	if route != "" {
		attrs = append(attrs, attribute.String("http.route", route))
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, attribute.String("user_agent.original", ua))
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		attrs = append(attrs, attribute.String("client.address", host))
	}
	ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := s.tracer.Start(ctx, name, oteltrace.WithSpanKind(oteltrace.SpanKindServer), oteltrace.WithAttributes(attrs...))
	return r.WithContext(ctx), func() {
		code := rw.code()
		span.SetAttributes(attribute.Int("http.response.status_code", code))
		if code >= 500 { // 4xx are the client's: not a server span's error
			span.SetStatus(codes.Error, http.StatusText(code))
		}
		span.End()
	}
}

// traceMCP is the MCP middleware that records a span per MCP method,
// named as OpenTelemetry's MCP conventions do ("tools/call recall"): a
// child of the request's span over HTTP, a root over stdio.
func traceMCP(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		name, attrs := method, []attribute.KeyValue{attribute.String("mcp.method.name", method)}
		switch p := req.GetParams().(type) {
		case *mcp.CallToolParamsRaw:
			name += " " + p.Name
			attrs = append(attrs, attribute.String("gen_ai.tool.name", p.Name))
		case *mcp.GetPromptParams:
			name += " " + p.Name
			attrs = append(attrs, attribute.String("gen_ai.prompt.name", p.Name))
		case *mcp.ReadResourceParams:
			attrs = append(attrs, attribute.String("mcp.resource.uri", p.URI))
		}
		ctx, span := trace.Start(ctx, name, attrs...)
		defer span.End()
		res, err := next(ctx, method, req)
		if err != nil {
			trace.Fail(span, err)
		} else if tr, ok := res.(*mcp.CallToolResult); ok && tr.IsError {
			span.SetStatus(codes.Error, "tool error")
		}
		return res, err
	}
}

// tagSona names the sona a request works on in its span (nil rec: none).
func tagSona(ctx context.Context, rec *messages.Sona) {
	if rec != nil {
		oteltrace.SpanFromContext(ctx).SetAttributes(attribute.String("memoria.sona.uuid", rec.Uuid))
	}
}
