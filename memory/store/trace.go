package store

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/memoria-ai/memoria/internal/trace"
)

// Group commits are traced when Options.Tracer is set: a span
// "store.commit" per transaction that writes, from when its first
// operation ran until it is durable, before its operations are
// acknowledged (a batch of operations that write nothing, such as a
// Barrier, commits nothing and is not traced). It is a root — a
// commit serves several callers — linked to the span of each operation
// submitted with SubmitTraced; a child "store.fsync" covers the commit of
// the transaction (its fsync).

// commitSpan is the span of one transaction (a no-op when not traced).
type commitSpan struct {
	oteltrace.Span
	tracer oteltrace.Tracer
}

// traceBegin marks when a transaction begins (zero when not traced).
func (s *Store) traceBegin() time.Time {
	if s.tracer == nil {
		return time.Time{}
	}
	return time.Now()
}

// traceCommit starts the span of a transaction begun at began that holds
// applied, which write about bytes.
func (s *Store) traceCommit(began time.Time, applied []appliedOp, bytes uint64) commitSpan {
	if s.tracer == nil || bytes == 0 {
		return commitSpan{Span: noop.Span{}}
	}
	var links []oteltrace.Link
	for _, a := range applied {
		if a.p.link.IsValid() {
			links = append(links, oteltrace.Link{SpanContext: a.p.link})
		}
	}
	_, span := s.tracer.Start(context.Background(), "store.commit", oteltrace.WithNewRoot(), oteltrace.WithTimestamp(began),
		oteltrace.WithLinks(links...), oteltrace.WithAttributes(attribute.Int("memoria.store.ops", len(applied)), attribute.Int64("memoria.store.bytes", int64(bytes))))
	return commitSpan{Span: span, tracer: s.tracer}
}

// fsync starts the child span of the transaction's commit.
func (c commitSpan) fsync() oteltrace.Span {
	if c.tracer == nil {
		return c.Span
	}
	_, span := c.tracer.Start(oteltrace.ContextWithSpan(context.Background(), c.Span), "store.fsync")
	return span
}

// end ends the span with the commit's number (mark) or its failure.
func (c commitSpan) end(mark *ackMark, err error) {
	if mark != nil {
		c.SetAttributes(attribute.Int64("memoria.store.commit", int64(mark.commits)))
	}
	trace.Fail(c.Span, err)
	c.End()
}
