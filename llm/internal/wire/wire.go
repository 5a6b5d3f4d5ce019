// Package wire is what the provider clients (llm/openai, llm/anthropic)
// share: a JSON POST over net/http, a server-sent event stream, and the
// classification of what goes wrong into the llm package's errors — an
// HTTP error reply becomes *llm.APIError (status, the provider's message,
// Retry-After), a reply that is not the wire format wraps llm.ErrMalformed,
// a done context gives the context's error. Nothing here retries: the
// resilience guard does.
package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/memoria-ai/memoria/llm"
)

// maxBody bounds a JSON reply (an embeddings batch is the largest: 256
// vectors of 3072 floats is about 16 MiB as text).
const maxBody = 64 << 20

// Client posts JSON to one provider's API.
type Client struct {
	// Provider names the provider in errors.
	Provider string
	// BaseURL is prefixed to every path (no trailing slash needed).
	BaseURL string
	// Header is sent with every request (authentication, API version).
	Header http.Header
	// HTTP is the client (nil: http.DefaultClient).
	HTTP *http.Client
	// Now is the clock Retry-After dates are read against (nil: time.Now).
	Now func() time.Time
}

// PostJSON sends body as JSON to path and decodes the reply into out.
func (c *Client) PostJSON(ctx context.Context, path string, body, out any) error {
	resp, err := c.post(ctx, path, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return c.failed(ctx, err)
	}
	if len(raw) > maxBody {
		return fmt.Errorf("%w: %s: a reply over %d MiB", llm.ErrMalformed, c.Provider, maxBody>>20)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return c.malformed(err)
	}
	return nil
}

// Stream sends body as JSON to path, asking for server-sent events, and
// hands each event to fn until fn returns stop or an error (which Stream
// returns as it is). An event whose data is an error object (an OpenAI
// `data: {"error":{…}}` or Anthropic's `event: error`) ends the stream
// with an *llm.APIError. Stream returns nil when fn stopped it, and
// ErrEnded when the stream ended first: a reply cut short is never
// mistaken for a whole one.
func (c *Client) Stream(ctx context.Context, path string, body any, fn func(Event) (stop bool, err error)) error {
	resp, err := c.post(ctx, path, body, "text/event-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		return fmt.Errorf("%w: %s: a JSON reply to a streamed request", llm.ErrMalformed, c.Provider)
	}
	sse := NewSSEReader(resp.Body)
	for {
		ev, err := sse.Next()
		switch {
		case errors.Is(err, io.EOF):
			return fmt.Errorf("%w: %s: %w", llm.ErrMalformed, c.Provider, ErrEnded)
		case errors.Is(err, bufio.ErrTooLong):
			return c.malformed(fmt.Errorf("an event stream line over %d MiB", maxLine>>20))
		case err != nil:
			return c.failed(ctx, err)
		}
		if ev.Name == "error" || strings.Contains(ev.Data, `"error"`) {
			if ae := c.streamError(ev); ae != nil {
				return ae
			}
		}
		stop, err := fn(ev)
		if err != nil || stop {
			return err
		}
	}
}

// ErrEnded is wrapped (with llm.ErrMalformed) by Stream's error when the
// event stream ended before its last event.
var ErrEnded = errors.New("the stream ended before its last event")

// Decode unmarshals an event's data, classifying a failure as malformed.
func (c *Client) Decode(ev Event, v any) error {
	if err := json.Unmarshal([]byte(ev.Data), v); err != nil {
		return c.malformed(fmt.Errorf("event %q: %w", ev.Name, err))
	}
	return nil
}

func (c *Client) post(ctx context.Context, path string, body any, accept string) (*http.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the request: %w", c.Provider, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Provider, err)
	}
	for k, v := range c.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, c.failed(ctx, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	return nil, &llm.APIError{Provider: c.Provider, Status: resp.StatusCode, Message: errorMessage(resp.StatusCode, raw),
		RetryAfter: llm.ParseRetryAfter(resp.Header.Get("Retry-After"), resp.Header.Get("Retry-After-Ms"), now())}
}

// failed classifies a transport error: the context's error when it is
// done (the caller went away or the guard's timeout fired), else the
// network error named after the provider.
func (c *Client) failed(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %w", c.Provider, cerr)
	}
	return fmt.Errorf("%s: %w", c.Provider, err)
}

func (c *Client) malformed(err error) error {
	return fmt.Errorf("%w: %s: %v", llm.ErrMalformed, c.Provider, err)
}

// errorReply is an error body of either provider, and of the servers that
// speak their formats: OpenAI's {"error":{"message","type","code"}},
// Anthropic's {"type":"error","error":{"type","message"}}, a bare
// {"error":"…"} (Ollama) or a top-level {"message","type"} (older vLLM).
type errorReply struct {
	Error   json.RawMessage `json:"error"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
}

type errorObject struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// parseError reads an error body; ok is false when raw is not one.
func parseError(raw []byte) (obj errorObject, ok bool) {
	var r errorReply
	var te *json.UnmarshalTypeError // a field of another shape: the rest is still read
	if err := json.Unmarshal(raw, &r); err != nil && !errors.As(err, &te) {
		return obj, false
	}
	if len(r.Error) > 0 && string(r.Error) != "null" {
		if err := json.Unmarshal(r.Error, &obj); (err == nil || errors.As(err, &te)) && (obj.Message != "" || obj.Type != "") {
			return obj, true
		}
		var s string
		if json.Unmarshal(r.Error, &s) == nil && s != "" {
			return errorObject{Message: s}, true
		}
		return obj, false
	}
	if r.Message != "" && r.Type != "error" {
		return errorObject{Message: r.Message, Type: r.Type}, true
	}
	return obj, false
}

func (o errorObject) String() string {
	if o.Type != "" && o.Message != "" {
		return o.Type + ": " + o.Message
	}
	return o.Type + o.Message
}

// errorMessage is the message of an HTTP error reply: the provider's own
// when the body is one of its error objects, else the status text and, for
// a short plain-text body (not an HTML page from a proxy), its first line.
func errorMessage(status int, raw []byte) string {
	if obj, ok := parseError(raw); ok {
		return obj.String()
	}
	msg := http.StatusText(status)
	if msg == "" {
		msg = fmt.Sprintf("status %d", status)
	}
	text := strings.TrimSpace(string(raw))
	switch {
	case text == "":
		return msg
	case strings.HasPrefix(text, "<"):
		return msg + " (an HTML page, not the provider's API)"
	}
	line, _, _ := strings.Cut(text, "\n")
	if len(line) > 200 {
		line = line[:200] + "…"
	}
	return msg + ": " + line
}

// streamStatus is the HTTP status an error type stands for, for an error
// sent inside a stream that began with 200 (so that the guard classifies
// it as it would the same error before the stream): Anthropic's documented
// types, and OpenAI's.
var streamStatus = map[string]int{
	"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
	"permission_error": 403, "not_found_error": 404, "request_too_large": 413,
	"rate_limit_error": 429, "rate_limit_exceeded": 429, "insufficient_quota": 429,
	"api_error": 500, "server_error": 500, "timeout_error": 504, "overloaded_error": 529,
}

// streamError is the *llm.APIError an event carries, nil when it carries
// none. Its status is the error's numeric code when that is an HTTP error
// status, else the one its type stands for, else 500.
func (c *Client) streamError(ev Event) *llm.APIError {
	obj, ok := parseError([]byte(ev.Data))
	if !ok {
		if ev.Name != "error" {
			return nil
		}
		obj.Message = ev.Data
	}
	status := streamStatus[obj.Type]
	var code int
	if json.Unmarshal(obj.Code, &code) == nil && code >= 400 && code <= 599 {
		status = code
	}
	if status == 0 {
		status = http.StatusInternalServerError
	}
	return &llm.APIError{Provider: c.Provider, Status: status, Message: "in the stream: " + obj.String()}
}

// Schema is a structured request's schema as it is sent: the document,
// checked to be one JSON object.
func Schema(provider string, s *llm.Schema) (json.RawMessage, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(s.JSON, &probe); err != nil {
		return nil, fmt.Errorf("%s: schema %s is not a JSON object: %w", provider, s.Name, err)
	}
	return json.RawMessage(s.JSON), nil
}
