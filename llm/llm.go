// Package llm is the seam between the Memoria memory core and language
// models. It owns three contracts and nothing else:
//
//   - LLM: turn a conversation (a Request of Messages) into one Response.
//   - Embedder: turn texts into vectors for similarity search.
//   - Reranker: score documents against a query (optional, for recall).
//
// Real providers (OpenAI, Anthropic, ...) plug in behind these interfaces.
// The package also ships two deterministic, offline implementations so that
// the whole server runs and is testable with no network access:
// HashedEmbedder (feature hashing) and OfflineLLM (an extractive responder).
//
// Invariants every implementation must keep:
//
//   - Context: if ctx is already done when a call starts, the call does no
//     work and returns ctx.Err().
//   - Embedder.Embed returns exactly one vector per input text, in input
//     order, each of length Dims() and L2-normalised (unit length), so that a
//     dot product is a cosine similarity.
//   - Embedder.ID names the embedding space; vectors with different IDs must
//     never be compared or stored in the same index.
//   - Implementations are safe for concurrent use by multiple goroutines.
//   - Bad input yields an error, never a panic.
//
// Errors returned by this package wrap or equal the sentinel errors declared
// here, so callers can test them with errors.Is.
package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Role of a chat message.
type Role string

// Chat message roles.
const (
	// RoleSystem marks instructions and context supplied by Memoria itself.
	RoleSystem Role = "system"
	// RoleUser marks a message written by the user (or calling agent).
	RoleUser Role = "user"
	// RoleAssistant marks a message previously produced by a model.
	RoleAssistant Role = "assistant"
)

// Message is one turn of a conversation.
type Message struct {
	// Role says who produced the message.
	Role Role
	// Content is the message text.
	Content string
	// Name is an optional speaker name, for multi-party conversations.
	Name string
}

// Request is the input to LLM.Complete.
type Request struct {
	// Messages is the conversation, oldest first. It must not be empty.
	Messages []Message
	// MaxTokens caps the length of the reply; 0 means the provider default.
	MaxTokens int
	// Schema, when set, asks for a reply that is one JSON value valid
	// against it (structured output). A model that cannot honour it
	// returns ErrUnsupported; callers then fall back to their own
	// deterministic logic.
	Schema *Schema
}

// Schema is a JSON schema for a structured reply.
type Schema struct {
	// Name identifies the schema to the provider (letters, digits, _ and -).
	Name string
	// JSON is the schema document.
	JSON []byte
}

// StopReason says why a model stopped generating. Values follow the Memoria
// schema: "endTurn" | "stopSequence" | "maxTokens".
type StopReason string

// Stop reasons.
const (
	// StopEndTurn means the model finished its reply naturally.
	StopEndTurn StopReason = "endTurn"
	// StopSequence means the model hit a stop sequence.
	StopSequence StopReason = "stopSequence"
	// StopMaxTokens means the reply was cut at Request.MaxTokens.
	StopMaxTokens StopReason = "maxTokens"
)

// Response is the output of LLM.Complete.
type Response struct {
	// Content is the reply text.
	Content string
	// Model names the model that produced the reply.
	Model string
	// StopReason says why generation stopped.
	StopReason StopReason
	// Usage is the token count the provider reported (zero when it
	// reports none, as the offline model).
	Usage Usage
}

// Usage counts the tokens of one call.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
}

// Streamer is an LLM that can hand out its reply while it is generated.
// Stream calls onToken with each piece of text, in order, and returns the
// whole Response (whose Content is the concatenation of the pieces) when
// generation ends. An error from onToken stops the stream and is returned.
type Streamer interface {
	LLM
	Stream(ctx context.Context, req Request, onToken func(string) error) (Response, error)
}

// Stream asks m for a streamed reply when it is a Streamer, and otherwise
// completes req and hands the whole reply to onToken at once.
func Stream(ctx context.Context, m LLM, req Request, onToken func(string) error) (Response, error) {
	if s, ok := m.(Streamer); ok {
		return s.Stream(ctx, req, onToken)
	}
	resp, err := m.Complete(ctx, req)
	if err != nil {
		return resp, err
	}
	if resp.Content != "" {
		if err := onToken(resp.Content); err != nil {
			return Response{}, err
		}
	}
	return resp, nil
}

// Availability is implemented by an LLM that can tell, before a call, that
// the call would fail at once (a provider behind an open circuit breaker):
// Available returns nil or an error wrapping ErrCircuitOpen.
type Availability interface {
	Available() error
}

// LLM completes conversations.
type LLM interface {
	// Complete returns the model's reply to req. It returns ErrEmptyRequest
	// when req has no messages, and ctx.Err() when ctx is done before work
	// starts.
	Complete(ctx context.Context, req Request) (Response, error)
}

// Embedder maps texts to vectors.
type Embedder interface {
	// Embed returns one L2-normalised vector per text, in order, each of
	// Dims() length.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Dims is the length of every vector Embed returns.
	Dims() int
	// ID identifies the embedding space (provider/model/dims), e.g.
	// "hashed/v1/384"; vectors from different IDs are not comparable.
	ID() string
}

// Reranker scores documents against a query (recall.rerank): a
// cross-encoder's /rerank endpoint, or a chat model asked to.
type Reranker interface {
	// Rerank returns one relevance per document, in order, higher more
	// relevant; NaN for a document the model left unscored. Scores are
	// comparable within one call only.
	Rerank(ctx context.Context, query string, documents []string) ([]float64, error)
}

// Sentinel errors.
var (
	// ErrEmptyRequest is returned by LLM.Complete for a request with no
	// messages.
	ErrEmptyRequest = errors.New("llm: request has no messages")
	// ErrNoUserMessage is returned by LLM.Complete for a request that has
	// messages but none with RoleUser.
	ErrNoUserMessage = errors.New("llm: request has no user message")
	// ErrUnsupported is returned by LLM.Complete for a request the model
	// cannot serve, such as a structured reply from a model without one.
	ErrUnsupported = errors.New("llm: not supported by this model")
	// ErrCircuitOpen is returned without calling the provider while its
	// circuit breaker is open (after consecutive failures).
	ErrCircuitOpen = errors.New("llm: provider unavailable (circuit open)")
	// ErrMalformed marks a provider reply that could not be read (not the
	// wire format, or a reply that breaks the Embedder contract).
	ErrMalformed = errors.New("llm: malformed provider reply")
)

// APIError is a provider's HTTP error reply, classified for retries.
type APIError struct {
	// Provider names the provider (openai, anthropic).
	Provider string
	// Status is the HTTP status of the reply.
	Status int
	// RetryAfter is the wait the provider asked for (Retry-After,
	// retry-after-ms), 0 when it named none.
	RetryAfter time.Duration
	// Message is the provider's error message.
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("llm: %s answered %d: %s", e.Provider, e.Status, e.Message)
}

// Retryable reports whether the call may succeed if repeated: rate limits
// (429), request timeouts (408) and server errors (5xx); never other 4xx.
func (e *APIError) Retryable() bool {
	return e.Status == 429 || e.Status == 408 || e.Status >= 500
}

// ParseRetryAfter reads a Retry-After header value (seconds or an HTTP
// date, relative to now) and, when set, retry-after-ms (milliseconds,
// which wins). It returns 0 when neither gives a wait.
func ParseRetryAfter(retryAfter, retryAfterMS string, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(strings.TrimSpace(retryAfterMS), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := strings.TrimSpace(retryAfter)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs > 0 {
			return time.Duration(secs * float64(time.Second))
		}
		return 0
	}
	if t, err := time.Parse(time.RFC1123, v); err == nil { // the HTTP date format
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// Unfence strips a Markdown code fence around a structured (JSON) reply,
// which some models add even when asked for JSON only.
func Unfence(s string) string {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			rest = rest[i+1:]
		}
		s = strings.TrimSuffix(strings.TrimSpace(rest), "```")
	}
	return s
}

// Normalize scales v to unit length in place; false, leaving v as it is,
// when it cannot (v is zero or not finite). It is the one normalisation:
// embedders' outputs, the store's check of them, centroids and page
// vectors. A vector already within 1e-6 of unit length is left as it is,
// so normalising twice changes nothing. The sum of squares is accumulated
// in float64 with explicit conversions, which forbid fusing into an FMA,
// so the result is the same on every architecture.
func Normalize(v []float32) bool {
	var sum float64
	for _, x := range v {
		sum += float64(float64(x) * float64(x))
	}
	if sum == 0 || math.IsInf(sum, 0) || math.IsNaN(sum) {
		return false
	}
	if math.Abs(sum-1) < 1e-6 {
		return true
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return true
}
