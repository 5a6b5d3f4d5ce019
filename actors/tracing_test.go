package actors_test

import (
	"context"
	"slices"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/messages"
)

// An advance under a caller's span is traced as "advance" with a child per
// step, in order: embed, append (the input), recall (with its stages),
// tiers, the model call, embed, append (the response); each append is
// linked from the group commit that made it durable. A query traces the
// same read steps under the caller's span.
func TestAdvanceSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	cfg := testConfig(t.TempDir())
	self, err := memory.Open(context.Background(), memory.Options{Config: cfg, Embedder: llm.NewHashedEmbedder(llm.DefaultDims), Tracer: tp})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := actors.Start(actors.Options{Self: self, LLM: llm.NewOffline(), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{self: self, sys: sys}
	t.Cleanup(e.close)
	sona, err := self.Sonas.Create(context.Background(), "traced")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Advance(context.Background(), sona.Uuid, &messages.ChatRequest{Content: "untraced: no span, no provider"}); err != nil {
		t.Fatal(err)
	}
	before := len(rec.Ended())
	for _, sp := range rec.Ended() {
		if n := sp.Name(); n != "store.commit" && n != "store.fsync" {
			t.Fatalf("an advance without a caller's span traced %s", n)
		}
	}

	ctx, root := tp.Tracer("test").Start(context.Background(), "POST /sona/{uuid}/chat")
	if _, err := sys.Advance(ctx, sona.Uuid, &messages.ChatRequest{Content: "I keep my bicycle in the blue shed"}); err != nil {
		t.Fatal(err)
	}
	root.End()
	spans := rec.Ended()[before:]
	children := func(parent oteltrace.SpanContext) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, sp := range spans {
			if sp.Parent().SpanID() == parent.SpanID() && sp.Parent().TraceID() == parent.TraceID() {
				out = append(out, sp)
			}
		}
		return out
	}
	top := children(root.SpanContext())
	if len(top) != 1 || top[0].Name() != "advance" {
		t.Fatalf("under the request: %v", spanNames(top))
	}
	advance := top[0]
	steps := children(advance.SpanContext())
	slices.SortStableFunc(steps, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	want := []string{"embed", "append", "recall", "tiers", "chat", "embed", "append"}
	if got := spanNames(steps); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	// Each started after the one before ended — but the input's append,
	// which is early: its commit overlaps what follows (it ends before the
	// advance does, below).
	for i, sp := range steps {
		if i > 0 && i != 2 && sp.StartTime().Before(steps[i-1].EndTime()) {
			t.Errorf("%s started before %s ended", sp.Name(), steps[i-1].Name())
		}
		if sp.EndTime().After(advance.EndTime()) {
			t.Errorf("%s ended after the advance", sp.Name())
		}
	}
	if got := spanNames(children(steps[2].SpanContext())); len(got) < 4 {
		t.Errorf("recall's stages: %v", got)
	}
	// The appends are linked from their group commits.
	for _, app := range []sdktrace.ReadOnlySpan{steps[1], steps[6]} {
		linked := false
		for _, sp := range rec.Ended() {
			for _, l := range sp.Links() {
				linked = linked || sp.Name() == "store.commit" && l.SpanContext.SpanID() == app.SpanContext().SpanID()
			}
		}
		if !linked {
			t.Errorf("no group commit links to append %s", app.SpanContext().SpanID())
		}
	}

	// A query: the same read steps, under the caller's span.
	before = len(rec.Ended())
	ctx, root = tp.Tracer("test").Start(context.Background(), "POST /sona/{uuid}/query")
	if _, err := sys.Query(ctx, sona.Uuid, &messages.ChatRequest{Content: "where is my bicycle?"}); err != nil {
		t.Fatal(err)
	}
	root.End()
	spans = rec.Ended()[before:]
	if got, want := spanNames(children(root.SpanContext())), []string{"embed", "recall", "tiers", "chat"}; !slices.Equal(got, want) {
		t.Fatalf("query steps %v, want %v", got, want)
	}
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, sp := range spans {
		out = append(out, sp.Name())
	}
	return out
}
