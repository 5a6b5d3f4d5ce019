// Package otlp exports Memoria's spans by OTLP/HTTP (protobuf) and sets up
// the OpenTelemetry SDK from the standard OTEL_* variables. Only
// internal/app wires it: the packages that trace (api, and through
// internal/trace memory and actors) see the OpenTelemetry API alone.
//
// It is a small client of the documented wire format
// (https://opentelemetry.io/docs/specs/otlp/#otlphttp) rather than the
// stock otlptracehttp exporter, which brings gRPC along: 109 more packages
// and 10.7 MB more binary (see README, Tracing).
package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// ErrExport marks a batch the collector did not take.
var ErrExport = errors.New("otlp: export failed")

// Exporter is an sdktrace.SpanExporter POSTing ExportTraceServiceRequests.
type Exporter struct {
	cfg    Config
	where  string // the endpoint without a password, for messages
	client *http.Client
	log    *slog.Logger
	now    func() time.Time

	mu         sync.Mutex
	lastLogged time.Time // when a failure was last logged
	suppressed int       // failures not logged since
	stopped    bool
}

// logEvery is how often export failures are logged at most.
const logEvery = time.Minute

// maxAttempts bounds the tries of one batch the collector asks to retry
// (429, 502, 503, 504), all within the export timeout.
const maxAttempts = 5

// NewExporter exports to cfg.Endpoint with client (nil: a client of its
// own), logging failures to log, at most one a minute by now.
func NewExporter(cfg Config, client *http.Client, log *slog.Logger, now func() time.Time) *Exporter {
	if client == nil {
		client = &http.Client{}
	}
	if now == nil {
		now = time.Now
	}
	return &Exporter{cfg: cfg, where: redacted(cfg.Endpoint), client: client, log: log, now: now}
}

var _ sdktrace.SpanExporter = (*Exporter)(nil)

// ExportSpans sends spans in one request, retrying what the collector
// says to retry. A failure is logged (rate-limited) and dropped, not
// returned: the SDK would hand it to OpenTelemetry's global error
// handler, which logs every one to stderr.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	e.mu.Lock()
	stopped := e.stopped
	e.mu.Unlock()
	if stopped {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	if err := e.send(ctx, encodeRequest(e.cfg.Resource, spans)); err != nil {
		e.failed(fmt.Errorf("%d spans: %w", len(spans), err))
	}
	return nil
}

func (e *Exporter) send(ctx context.Context, body []byte) error {
	encoding := ""
	if e.cfg.Gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(body)
		if err := zw.Close(); err != nil {
			return err
		}
		body, encoding = b.Bytes(), "gzip"
	}
	backoff := time.Second
	for attempt := 1; ; attempt++ {
		wait, err := e.post(ctx, body, encoding)
		if err == nil || wait < 0 || attempt == maxAttempts {
			return err
		}
		if wait == 0 {
			wait, backoff = backoff, 2*backoff
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (retrying after: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// post sends body once. A retryable failure comes with the wait the
// collector asked for (Retry-After; 0: back off), any other with -1.
func (e *Exporter) post(ctx context.Context, body []byte, encoding string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.Endpoint, bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	for k, v := range e.cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, err // a collector not up yet is worth another try
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusOK:
		if n, msg := partialSuccess(reply); n > 0 || msg != "" {
			return -1, fmt.Errorf("%w: the collector rejected %d spans: %s", ErrExport, n, msg)
		}
		return 0, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusBadGateway ||
		resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout:
		wait := time.Duration(0)
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			wait = max(time.Duration(s)*time.Second, time.Nanosecond)
		}
		return wait, fmt.Errorf("%w: %s from %s", ErrExport, resp.Status, e.where)
	default:
		return -1, fmt.Errorf("%w: %s from %s: %.200s", ErrExport, resp.Status, e.where, reply)
	}
}

// partialSuccess reads ExportTraceServiceResponse.partial_success
// (rejected_spans = 1, error_message = 2) from a protobuf reply.
func partialSuccess(b []byte) (rejected int64, msg string) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, ""
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			ps, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, ""
			}
			for len(ps) > 0 {
				pnum, ptyp, m := protowire.ConsumeTag(ps)
				if m < 0 {
					return 0, ""
				}
				ps = ps[m:]
				switch {
				case pnum == 1 && ptyp == protowire.VarintType:
					v, m := protowire.ConsumeVarint(ps)
					rejected, ps = int64(v), ps[max(m, 0):]
				case pnum == 2 && ptyp == protowire.BytesType:
					v, m := protowire.ConsumeString(ps)
					msg, ps = v, ps[max(m, 0):]
				default:
					m = protowire.ConsumeFieldValue(pnum, ptyp, ps)
					if m < 0 {
						return 0, ""
					}
					ps = ps[m:]
				}
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, ""
		}
		b = b[n:]
	}
	return rejected, msg
}

// failed logs err, or counts it when one was logged less than logEvery ago.
func (e *Exporter) failed(err error) {
	e.mu.Lock()
	now := e.now()
	if !e.lastLogged.IsZero() && now.Sub(e.lastLogged) < logEvery {
		e.suppressed++
		e.mu.Unlock()
		return
	}
	suppressed := e.suppressed
	e.lastLogged, e.suppressed = now, 0
	e.mu.Unlock()
	e.log.Warn("trace export failed; spans dropped", "err", err, "endpoint", e.where,
		"failures_not_logged", suppressed)
}

// redacted is endpoint with any password in it replaced.
func redacted(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint
	}
	return u.Redacted()
}

// Shutdown stops exporting; the provider has flushed what it held.
func (e *Exporter) Shutdown(context.Context) error {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	return nil
}

// Tracing is the SDK's tracer provider exporting by OTLP.
type Tracing struct {
	Provider *sdktrace.TracerProvider
}

// Options adjust New.
type Options struct {
	// Getenv reads the OTEL_* variables (default os.Getenv, by the caller).
	Getenv func(string) string
	// Version is service.version.
	Version string
	// HTTPClient sends the spans (nil: a client of the exporter's own).
	HTTPClient *http.Client
	// Now is the clock of the failure log's rate limit (nil: time.Now).
	Now func() time.Time
}

// New sets up tracing from the OTEL_* variables: nil when they leave it
// off (no endpoint), and no SDK is started then.
func New(log *slog.Logger, o Options) (*Tracing, error) {
	cfg, err := FromEnv(o.Getenv)
	if err != nil || cfg.Endpoint == "" {
		return nil, err
	}
	for _, kv := range []attribute.KeyValue{ // unless OTEL_RESOURCE_ATTRIBUTES says otherwise
		attribute.String("service.version", o.Version),
		attribute.String("telemetry.sdk.language", "go"),
		attribute.String("telemetry.sdk.name", "opentelemetry"),
		attribute.String("telemetry.sdk.version", sdk.Version()),
	} {
		if !slices.ContainsFunc(cfg.Resource, func(r attribute.KeyValue) bool { return r.Key == kv.Key }) {
			cfg.Resource = append(cfg.Resource, kv)
		}
	}
	exp := NewExporter(cfg, o.HTTPClient, log, o.Now)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(cfg.Sampler))
	log.Info("tracing", "endpoint", exp.where)
	return &Tracing{Provider: tp}, nil
}

// Shutdown exports the spans still held and stops (nil t: nothing to do).
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.Provider.Shutdown(ctx)
}
