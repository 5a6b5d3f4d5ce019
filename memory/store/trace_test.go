package store_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/store"
)

// A group commit is traced as a root span "store.commit", ended before its
// operations are acknowledged, linked to the spans that submitted them,
// with a child "store.fsync".
func TestGroupCommitSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	o := store.OptionsOf(config.Default().Store)
	o.Tracer = tp
	s, err := store.Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	ctx, caller := tp.Tracer("test").Start(context.Background(), "append")
	p := s.SubmitTraced(ctx, func(tx store.Tx) error { tx.Set([]byte("t/a"), []byte("1")); return nil })
	if err := p.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	caller.End()
	var commit, fsync sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		switch sp.Name() {
		case "store.commit":
			commit = sp
		case "store.fsync":
			fsync = sp
		}
	}
	if commit == nil || fsync == nil {
		t.Fatalf("spans %v", rec.Ended())
	}
	if commit.Parent().IsValid() || commit.SpanContext().TraceID() == caller.SpanContext().TraceID() {
		t.Errorf("the commit is not a root of its own trace")
	}
	if links := commit.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != caller.SpanContext().SpanID() {
		t.Errorf("links %v, want the caller's span", links)
	}
	if fsync.Parent().SpanID() != commit.SpanContext().SpanID() {
		t.Errorf("fsync's parent %v", fsync.Parent())
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, a := range commit.Attributes() {
		attrs[a.Key] = a.Value
	}
	if attrs["memoria.store.ops"].AsInt64() != 1 || attrs["memoria.store.commit"].AsInt64() < 1 || attrs["memoria.store.bytes"].AsInt64() <= 0 {
		t.Errorf("attributes %v", attrs)
	}

	// An operation submitted without a span: a commit without links.
	if err := s.Update(context.Background(), func(tx store.Tx) error { tx.Set([]byte("t/b"), []byte("2")); return nil }); err != nil {
		t.Fatal(err)
	}
	ended := rec.Ended()
	if last := ended[len(ended)-1]; last.Name() != "store.commit" || len(last.Links()) != 0 {
		t.Errorf("last span %s with links %v", last.Name(), last.Links())
	}
	// A barrier writes nothing: no commit, no span.
	if err := s.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != len(ended) {
		t.Errorf("a barrier made %d spans", n-len(ended))
	}
}
