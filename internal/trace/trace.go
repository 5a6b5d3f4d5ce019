// Package trace is the tracing helper the rest of Memoria calls: Start
// opens a span under whatever the context carries, and LogHandler puts the
// context's trace and span ids into log records.
//
// It imports only the OpenTelemetry API (go.opentelemetry.io/otel/trace and
// attribute), never the SDK, an exporter or net/http, so memory/ can use it
// and stay pure of transports (TestPureOfTransports checks this). Nothing
// here is global: the tracer provider travels in the context, either as the
// provider of the span already there (a request's span, set by the API) or
// put there with WithProvider for work no request started (timers,
// background actors). With neither, Start costs one context lookup and
// returns a no-op span: tracing is off.
package trace

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of Memoria's spans.
const Scope = "github.com/memoria-ai/memoria"

type providerKey struct{}

// WithProvider returns ctx carrying tp, for spans started under ctx that
// have no parent span (a nil tp leaves ctx as it is).
func WithProvider(ctx context.Context, tp oteltrace.TracerProvider) context.Context {
	if tp == nil {
		return ctx
	}
	return context.WithValue(ctx, providerKey{}, tp)
}

// Start starts a span named name under ctx: a child of the span in ctx,
// else a root from the provider given by WithProvider, else a no-op span
// (ctx is then returned as it is). End the span when the work ends.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, oteltrace.Span) {
	var tp oteltrace.TracerProvider
	if parent := oteltrace.SpanFromContext(ctx); parent.SpanContext().IsValid() {
		tp = parent.TracerProvider()
	} else if p, ok := ctx.Value(providerKey{}).(oteltrace.TracerProvider); ok {
		tp = p
	} else {
		return ctx, parent // the context's no-op span
	}
	return tp.Tracer(Scope).Start(ctx, name, oteltrace.WithAttributes(attrs...))
}

// Fail marks span as failed with err (nil: nothing is recorded).
func Fail(span oteltrace.Span, err error) {
	if err == nil || !span.IsRecording() {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}
