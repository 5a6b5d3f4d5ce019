package otlp_test

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/memoria-ai/memoria/internal/otlp"
	"github.com/memoria-ai/memoria/internal/otlp/otlptest"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func newTracing(t *testing.T, vars map[string]string, log *slog.Logger) *otlp.Tracing {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr, err := otlp.New(log, otlp.Options{Getenv: env(vars), Version: "v-test"})
	if err != nil || tr == nil {
		t.Fatalf("tracing %v, %v", tr, err)
	}
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	return tr
}

// TestExportWireFormat sends spans of every attribute type, with events,
// links, statuses, a parent and a remote parent, and reads them back with
// OpenTelemetry's generated types.
func TestExportWireFormat(t *testing.T) {
	for _, gz := range []bool{false, true} {
		c := otlptest.New(t)
		vars := map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": c.URL + "/",
			"OTEL_EXPORTER_OTLP_HEADERS":  "Authorization=Bearer%20s3cret, x-tenant = blue",
			"OTEL_SERVICE_NAME":           "memoria-test",
			"OTEL_RESOURCE_ATTRIBUTES":    "deployment.environment.name=ci,service.name=ignored",
		}
		if gz {
			vars["OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"] = "gzip"
		}
		tr := newTracing(t, vars, nil)
		tracer := tr.Provider.Tracer("scope-a", trace.WithInstrumentationVersion("1.2"))

		remote := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
			SpanID:  trace.SpanID{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, TraceFlags: trace.FlagsSampled, Remote: true})
		ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
		ctx, root := tracer.Start(ctx, "root", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("why", "test")}}))
		root.SetAttributes(attribute.Bool("b", false), attribute.Int64("i", -7), attribute.Float64("f", 0.5),
			attribute.String("s", ""), attribute.StringSlice("ss", []string{"x", "y"}), attribute.Int64Slice("is", []int64{1, 2}))
		root.AddEvent("ev", trace.WithAttributes(attribute.Int("n", 3)))
		_, child := tracer.Start(ctx, "child")
		child.SetStatus(codes.Error, "broke")
		child.End()
		root.SetStatus(codes.Ok, "")
		root.End()
		if err := tr.Provider.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}

		reqs := c.Requests()
		if len(reqs) != 1 {
			t.Fatalf("gzip %v: %d requests, want 1", gz, len(reqs))
		}
		h := reqs[0].Header
		if reqs[0].Path != "/v1/traces" || h.Get("Content-Type") != "application/x-protobuf" ||
			h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Tenant") != "blue" {
			t.Errorf("gzip %v: path %q, headers %v", gz, reqs[0].Path, h)
		}
		if gz != (h.Get("Content-Encoding") == "gzip") {
			t.Errorf("gzip %v: Content-Encoding %q", gz, h.Get("Content-Encoding"))
		}
		spans := c.Spans()
		if len(spans) != 2 {
			t.Fatalf("%d spans", len(spans))
		}
		ch, rt := spans[0], spans[1]
		if ch.Name != "child" || rt.Name != "root" || rt.Scope != "scope-a" {
			t.Fatalf("spans %q, %q (scope %q)", ch.Name, rt.Name, rt.Scope)
		}
		if res := rt.Resource; res["service.name"].GetStringValue() != "memoria-test" ||
			res["deployment.environment.name"].GetStringValue() != "ci" || res["service.version"].GetStringValue() != "v-test" ||
			res["telemetry.sdk.language"].GetStringValue() != "go" {
			t.Errorf("resource %v", res)
		}
		if rt.TraceID() != "4bf92f3577b34da6a3ce929d0e0e4736" || rt.ParentID() != "00f067aa0ba902b7" ||
			rt.Flags != 0x301 || rt.Kind != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("root: trace %s parent %s flags %#x kind %v", rt.TraceID(), rt.ParentID(), rt.Flags, rt.Kind)
		}
		if ch.TraceID() != rt.TraceID() || ch.ParentID() != rt.SpanID() || ch.Flags != 0x101 || ch.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
			t.Errorf("child: trace %s parent %s (root %s) flags %#x kind %v", ch.TraceID(), ch.ParentID(), rt.SpanID(), ch.Flags, ch.Kind)
		}
		if ch.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || ch.Status.GetMessage() != "broke" ||
			rt.Status.GetCode() != tracepb.Status_STATUS_CODE_OK {
			t.Errorf("statuses %v, %v", ch.Status, rt.Status)
		}
		if rt.StartTimeUnixNano == 0 || rt.EndTimeUnixNano < rt.StartTimeUnixNano {
			t.Errorf("times %d..%d", rt.StartTimeUnixNano, rt.EndTimeUnixNano)
		}
		b, i, f, s := rt.Attr("b"), rt.Attr("i"), rt.Attr("f"), rt.Attr("s")
		if b == nil || b.GetValue() == nil || b.GetBoolValue() || i.GetIntValue() != -7 || f.GetDoubleValue() != 0.5 ||
			s == nil || s.GetValue() == nil || s.GetStringValue() != "" {
			t.Errorf("scalar attributes %v %v %v %v", b, i, f, s)
		}
		if ss := rt.Attr("ss").GetArrayValue().GetValues(); len(ss) != 2 || ss[1].GetStringValue() != "y" {
			t.Errorf("string slice %v", ss)
		}
		if is := rt.Attr("is").GetArrayValue().GetValues(); len(is) != 2 || is[1].GetIntValue() != 2 {
			t.Errorf("int slice %v", is)
		}
		if len(rt.Events) != 1 || rt.Events[0].Name != "ev" || rt.Events[0].Attributes[0].Value.GetIntValue() != 3 {
			t.Errorf("events %v", rt.Events)
		}
		if len(rt.Links) != 1 || hex.EncodeToString(rt.Links[0].SpanId) != remote.SpanID().String() ||
			hex.EncodeToString(rt.Links[0].TraceId) != remote.TraceID().String() ||
			rt.Links[0].Attributes[0].Value.GetStringValue() != "test" || rt.Links[0].Flags != 0x301 {
			t.Errorf("links %v", rt.Links)
		}
	}
}

// TestExportRetries: a collector that asks to retry later gets the batch
// again, once it is ready.
func TestExportRetries(t *testing.T) {
	c := otlptest.New(t)
	c.Reply(func(w http.ResponseWriter, n int) bool {
		if n == 0 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	tr := newTracing(t, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": c.URL + "/custom/path"}, nil)
	_, span := tr.Provider.Tracer("t").Start(context.Background(), "once")
	span.End()
	if err := tr.Provider.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	reqs := c.Requests()
	if len(reqs) != 2 || reqs[1].Path != "/custom/path" || len(c.Named("once")) != 2 {
		t.Fatalf("%d requests (want the refused one and its retry at the traces endpoint as given)", len(reqs))
	}
}

// TestExportFailuresAreLoggedRateLimited: a collector refusing every batch
// costs one log line a minute, and never an error to the caller.
func TestExportFailuresAreLoggedRateLimited(t *testing.T) {
	c := otlptest.New(t)
	c.Reply(func(w http.ResponseWriter, n int) bool {
		http.Error(w, "no such tenant", http.StatusBadRequest)
		return true
	})
	var logs otlptest.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clockMu sync.Mutex
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	withPassword := "http://memoria:s3cret@" + strings.TrimPrefix(c.URL, "http://")
	cfg, err := otlp.FromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": withPassword}))
	if err != nil {
		t.Fatal(err)
	}
	exp := otlp.NewExporter(cfg, nil, slog.New(slog.NewTextHandler(&logs, nil)), clock)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	export := func() {
		_, s := tp.Tracer("t").Start(context.Background(), "x")
		s.End() // the syncer exports at End
	}
	export()
	export()
	export()
	if n := strings.Count(logs.String(), "trace export failed"); n != 1 {
		t.Fatalf("%d lines for three failures within a minute:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "400 Bad Request") || !strings.Contains(logs.String(), "no such tenant") {
		t.Errorf("the line does not say why: %s", logs.String())
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Errorf("the endpoint's password was logged: %s", logs.String())
	}
	clockMu.Lock()
	now = now.Add(time.Minute)
	clockMu.Unlock()
	export()
	if n := strings.Count(logs.String(), "trace export failed"); n != 2 || !strings.Contains(logs.String(), "failures_not_logged=2") {
		t.Fatalf("a minute later: %d lines:\n%s", n, logs.String())
	}
	if len(c.Requests()) != 4 {
		t.Errorf("%d requests; a 400 is not retried", len(c.Requests()))
	}
}

// TestPartialSuccessIsLogged: spans the collector took a batch but
// rejected some of are reported.
func TestPartialSuccessIsLogged(t *testing.T) {
	c := otlptest.New(t)
	c.Reply(func(w http.ResponseWriter, n int) bool {
		w.WriteHeader(http.StatusOK)
		// ExportTraceServiceResponse{partial_success{rejected_spans: 1, error_message: "too old"}}
		w.Write([]byte{0x0a, 0x0b, 0x08, 0x01, 0x12, 0x07, 't', 'o', 'o', ' ', 'o', 'l', 'd'})
		return true
	})
	var logs otlptest.Buffer
	tr := newTracing(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": c.URL}, slog.New(slog.NewTextHandler(&logs, nil)))
	_, s := tr.Provider.Tracer("t").Start(context.Background(), "x")
	s.End()
	if err := tr.Provider.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "rejected 1 spans: too old") {
		t.Errorf("partial success not logged: %s", logs.String())
	}
}

func TestFromEnv(t *testing.T) {
	off := []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"}, // no endpoint
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"},
	}
	for _, vars := range off {
		cfg, err := otlp.FromEnv(env(vars))
		if err != nil || cfg.Endpoint != "" {
			t.Errorf("%v: endpoint %q, %v; want off", vars, cfg.Endpoint, err)
		}
	}
	on := []struct {
		vars     map[string]string
		endpoint string
		timeout  time.Duration
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318/v1/traces", 10 * time.Second},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c/otlp/", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500"}, "https://c/otlp/v1/traces", 2500 * time.Millisecond},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b/t",
			"OTEL_EXPORTER_OTLP_TIMEOUT": "1", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "3000"}, "http://b/t", 3 * time.Second},
	}
	for _, tc := range on {
		cfg, err := otlp.FromEnv(env(tc.vars))
		if err != nil || cfg.Endpoint != tc.endpoint || cfg.Timeout != tc.timeout {
			t.Errorf("%v: %q %v, %v; want %q %v", tc.vars, cfg.Endpoint, cfg.Timeout, err, tc.endpoint, tc.timeout)
		}
	}
	bad := []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://c/x"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_SAMPLER": "sometimes"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_RESOURCE_ATTRIBUTES": "a=%zz"},
		{"OTEL_TRACES_EXPORTER": "zipkin"},
		{"OTEL_SDK_DISABLED": "yes"},
	}
	for _, vars := range bad {
		if _, err := otlp.FromEnv(env(vars)); !errors.Is(err, otlp.ErrConfig) {
			t.Errorf("%v: %v; want ErrConfig", vars, err)
		}
	}
}

// TestSampler: OTEL_TRACES_SAMPLER=always_off records nothing, and
// traceidratio at 0 neither, while the default follows the parent.
func TestSampler(t *testing.T) {
	for _, tc := range []struct {
		vars map[string]string
		want int
	}{
		{map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}, 0},
		{map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}, 0},
		{map[string]string{}, 1},
	} {
		c := otlptest.New(t)
		tc.vars["OTEL_EXPORTER_OTLP_ENDPOINT"] = c.URL
		tr := newTracing(t, tc.vars, nil)
		_, s := tr.Provider.Tracer("t").Start(context.Background(), "x")
		s.End()
		if err := tr.Provider.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := len(c.Spans()); got != tc.want {
			t.Errorf("%v: %d spans, want %d", tc.vars, got, tc.want)
		}
	}
}
