package trace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os/exec"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/memoria-ai/memoria/internal/trace"
)

// TestPureOfTransports: memory/ may import this package, so it must bring
// neither net/http nor the SDK nor an exporter.
func TestPureOfTransports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list saw %d packages", len(deps))
	}
	for _, d := range deps {
		if d == "net/http" || strings.HasPrefix(d, "go.opentelemetry.io/otel/sdk") ||
			strings.HasPrefix(d, "github.com/memoria-ai/memoria/internal/otlp") || strings.HasPrefix(d, "google.golang.org/grpc") {
			t.Errorf("internal/trace depends on %s", d)
		}
	}
}

func TestStart(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())

	// Off: no span in the context, no provider.
	ctx := context.Background()
	got, span := trace.Start(ctx, "nothing")
	if got != ctx || span.IsRecording() {
		t.Fatal("Start without a span or provider made a span")
	}
	span.End()

	// A root from the provider in the context, then a child of it.
	ctx, root := trace.Start(trace.WithProvider(ctx, tp), "group commit", attribute.Int("writes", 3))
	_, child := trace.Start(ctx, "fsync")
	trace.Fail(child, context.DeadlineExceeded)
	child.End()
	root.End()

	// A child of a request's span, with no provider in the context.
	_, req := tp.Tracer("api").Start(context.Background(), "POST /sona/{uuid}/chat")
	_, step := trace.Start(oteltrace.ContextWithSpan(context.Background(), req), "advance")
	step.End()
	req.End()

	ended := rec.Ended()
	if len(ended) != 4 {
		t.Fatalf("%d spans", len(ended))
	}
	fsync, commit, advance, request := ended[0], ended[1], ended[2], ended[3]
	if commit.Name() != "group commit" || commit.Parent().IsValid() || commit.InstrumentationScope().Name != trace.Scope ||
		len(commit.Attributes()) != 1 || commit.Attributes()[0] != attribute.Int("writes", 3) {
		t.Errorf("root %s parent %v attrs %v", commit.Name(), commit.Parent(), commit.Attributes())
	}
	if fsync.Parent().SpanID() != commit.SpanContext().SpanID() || fsync.Status().Description != context.DeadlineExceeded.Error() ||
		len(fsync.Events()) != 1 {
		t.Errorf("child: parent %v, status %v, events %v", fsync.Parent(), fsync.Status(), fsync.Events())
	}
	if advance.Parent().SpanID() != request.SpanContext().SpanID() {
		t.Errorf("advance's parent %v, want the request's span", advance.Parent())
	}
}

func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(trace.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "api")
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("t").Start(context.Background(), "x")
	defer span.End()

	log.InfoContext(ctx, "with")
	log.Info("without")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	var with, without map[string]any
	if json.Unmarshal([]byte(lines[0]), &with) != nil || json.Unmarshal([]byte(lines[1]), &without) != nil {
		t.Fatalf("lines: %q", lines)
	}
	sc := span.SpanContext()
	if with["trace_id"] != sc.TraceID().String() || with["span_id"] != sc.SpanID().String() || with["component"] != "api" {
		t.Errorf("with a span: %v", with)
	}
	if _, ok := without["trace_id"]; ok {
		t.Errorf("without a span: %v", without)
	}
}
