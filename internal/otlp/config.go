package otlp

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ErrConfig marks an OTEL_* variable Memoria cannot honour.
var ErrConfig = errors.New("otlp: bad OpenTelemetry configuration")

// Config is what the OTEL_* variables ask of trace export.
type Config struct {
	// Endpoint is the URL spans are POSTed to; empty: tracing is off.
	Endpoint string
	Headers  map[string]string
	Timeout  time.Duration
	Gzip     bool
	Sampler  sdktrace.Sampler
	// Resource holds service.name and OTEL_RESOURCE_ATTRIBUTES.
	Resource []attribute.KeyValue
}

// defaultTimeout is OTLP's default export timeout.
const defaultTimeout = 10 * time.Second

// FromEnv reads the OTEL_* variables through getenv. Tracing is on only
// when an endpoint is set (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT) and neither OTEL_SDK_DISABLED=true nor
// OTEL_TRACES_EXPORTER=none says otherwise; a value Memoria cannot honour
// is an ErrConfig naming the variable.
func FromEnv(getenv func(string) string) (Config, error) {
	var c Config
	bad := func(name, why string) (Config, error) {
		return Config{}, fmt.Errorf("%w: %s=%q: %s", ErrConfig, name, getenv(name), why)
	}
	switch strings.ToLower(strings.TrimSpace(getenv("OTEL_SDK_DISABLED"))) {
	case "true":
		return c, nil
	case "", "false":
	default:
		return bad("OTEL_SDK_DISABLED", "want true or false")
	}
	switch strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) {
	case "none":
		return c, nil
	case "", "otlp":
	default:
		return bad("OTEL_TRACES_EXPORTER", "memoria exports traces by OTLP only (otlp, or none)")
	}
	if v := signal(getenv, "ENDPOINT"); v != "" {
		name := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
		if getenv(name) == "" { // the base URL: traces go to its /v1/traces
			name = "OTEL_EXPORTER_OTLP_ENDPOINT"
			v = strings.TrimRight(v, "/") + "/v1/traces"
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad(name, "want an http:// or https:// URL")
		}
		c.Endpoint = u.String()
	}
	if c.Endpoint == "" {
		return c, nil // off by default
	}
	switch p := signal(getenv, "PROTOCOL"); p {
	case "", "http/protobuf":
	default:
		return bad(signalName(getenv, "PROTOCOL"), "memoria sends OTLP/HTTP with protobuf only (http/protobuf)")
	}
	var err error
	if c.Headers, err = parseList(signal(getenv, "HEADERS")); err != nil {
		return bad(signalName(getenv, "HEADERS"), err.Error())
	}
	c.Timeout = defaultTimeout
	if v := signal(getenv, "TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return bad(signalName(getenv, "TIMEOUT"), "want milliseconds, a positive integer")
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	switch signal(getenv, "COMPRESSION") {
	case "", "none":
	case "gzip":
		c.Gzip = true
	default:
		return bad(signalName(getenv, "COMPRESSION"), "want gzip or none")
	}
	if c.Sampler, err = sampler(getenv("OTEL_TRACES_SAMPLER"), getenv("OTEL_TRACES_SAMPLER_ARG")); err != nil {
		return bad("OTEL_TRACES_SAMPLER", err.Error())
	}
	res, err := parseList(getenv("OTEL_RESOURCE_ATTRIBUTES"))
	if err != nil {
		return bad("OTEL_RESOURCE_ATTRIBUTES", err.Error())
	}
	service := strings.TrimSpace(getenv("OTEL_SERVICE_NAME"))
	if service == "" {
		service = res["service.name"]
	}
	if service == "" {
		service = "memoria"
	}
	res["service.name"] = service
	for _, k := range slices.Sorted(maps.Keys(res)) {
		c.Resource = append(c.Resource, attribute.String(k, res[k]))
	}
	return c, nil
}

// signal is OTEL_EXPORTER_OTLP_TRACES_<what>, else OTEL_EXPORTER_OTLP_<what>.
func signal(getenv func(string) string, what string) string {
	return strings.TrimSpace(getenv(signalName(getenv, what)))
}

func signalName(getenv func(string) string, what string) string {
	if n := "OTEL_EXPORTER_OTLP_TRACES_" + what; getenv(n) != "" {
		return n
	}
	return "OTEL_EXPORTER_OTLP_" + what
}

// parseList reads the OTEL_*_HEADERS and OTEL_RESOURCE_ATTRIBUTES format:
// key=value pairs separated by commas, values percent-encoded.
func parseList(s string) (map[string]string, error) {
	m := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", item)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%q: %v", item, err)
		}
		m[k] = dv
	}
	return m, nil
}

// sampler is OTEL_TRACES_SAMPLER with its argument (default
// parentbased_always_on).
func sampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(arg), 64)
		if err != nil || f < 0 || f > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio in [0, 1]", arg)
		}
		return f, nil
	}
	switch strings.TrimSpace(name) {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, errors.New("want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio")
}
