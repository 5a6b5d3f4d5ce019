// Package llm is the seam between the Memoria memory core and language
// models. It owns two contracts and nothing else:
//
//   - LLM: turn a conversation (a Request of Messages) into one Response.
//   - Embedder: turn texts into vectors for similarity search.
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
	"strings"
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
)

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
