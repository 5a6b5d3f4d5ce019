// Package openai is the OpenAI-compatible provider: chat completions
// (plain, streamed, and structured with a json_schema response format) and
// embeddings, spoken directly over net/http in the API's documented wire
// format. One provider serves OpenAI and every server that speaks its API:
// Ollama (http://localhost:11434/v1), vLLM, the llama.cpp server, LM
// Studio. Beside them, the /rerank endpoint that vLLM and the llama.cpp
// server (and Jina, Cohere) serve for reranker models, and HuggingFace
// TEI's variant of it (rerank.go).
//
// The client never retries: the resilience package does, with the
// backoff, Retry-After handling and breaker the server needs. Errors come
// back as *llm.APIError (an HTTP error reply, or an error inside a
// stream), llm.ErrMalformed (a reply that is not the wire format, or a
// stream cut short) or the context's error.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/llm/internal/wire"
)

// Provider is the provider's name in errors, metrics and embedder IDs.
const Provider = "openai"

// DefaultBaseURL is OpenAI's own API.
const DefaultBaseURL = "https://api.openai.com/v1"

// Options configure a client.
type Options struct {
	// BaseURL of the API, e.g. https://api.openai.com/v1 (the default) or
	// http://localhost:11434/v1 for Ollama.
	BaseURL string
	// APIKey is sent as a bearer token (local servers need none).
	APIKey string
	// Model names the chat or embedding model.
	Model string
	// HTTPClient replaces http.DefaultClient.
	HTTPClient *http.Client
	// Now is the clock Retry-After dates are read against.
	Now func() time.Time
}

func (o Options) client() *wire.Client {
	c := &wire.Client{Provider: Provider, BaseURL: o.BaseURL, Header: http.Header{}, HTTP: o.HTTPClient, Now: o.Now}
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	if o.APIKey != "" {
		c.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	return c
}

// Chat is an llm.LLM and llm.Streamer over the chat completions API.
type Chat struct {
	c     *wire.Client
	model string
}

var _ llm.Streamer = (*Chat)(nil)

// NewChat returns a chat client.
func NewChat(o Options) (*Chat, error) {
	if o.Model == "" {
		return nil, errors.New("openai: a model is needed (llm.model)")
	}
	return &Chat{c: o.client(), model: o.Model}, nil
}

// chatRequest is the body of POST /chat/completions.
type chatRequest struct {
	Model          string          `json:"model"`
	Messages       []chatMessage   `json:"messages"`
	MaxTokens      int             `json:"max_tokens,omitempty"`
	ResponseFormat *responseFormat `json:"response_format,omitempty"`
	Stream         bool            `json:"stream,omitempty"`
	StreamOptions  *streamOptions  `json:"stream_options,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	Name    string `json:"name,omitempty"`
}

type responseFormat struct {
	Type       string     `json:"type"` // json_schema
	JSONSchema jsonSchema `json:"json_schema"`
}

type jsonSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

func (u *usage) llm() llm.Usage {
	if u == nil {
		return llm.Usage{}
	}
	return llm.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
}

// chatResponse is the reply of POST /chat/completions.
type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Content string `json:"content"`
			Refusal string `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// chatChunk is one event of a streamed reply.
type chatChunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content string `json:"content"`
			Refusal string `json:"refusal"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

func (c *Chat) request(req llm.Request) (chatRequest, error) {
	if len(req.Messages) == 0 {
		return chatRequest{}, llm.ErrEmptyRequest
	}
	p := chatRequest{Model: c.model, MaxTokens: max(req.MaxTokens, 0)}
	for _, m := range req.Messages {
		msg := chatMessage{Role: string(llm.RoleUser), Content: m.Content}
		switch m.Role {
		case llm.RoleSystem, llm.RoleAssistant:
			msg.Role = string(m.Role)
		default:
			msg.Name = m.Name
		}
		p.Messages = append(p.Messages, msg)
	}
	if req.Schema != nil {
		schema, err := wire.Schema(Provider, req.Schema)
		if err != nil {
			return p, err
		}
		p.ResponseFormat = &responseFormat{Type: "json_schema", JSONSchema: jsonSchema{Name: req.Schema.Name, Schema: schema, Strict: true}}
	}
	return p, nil
}

// Complete asks for one chat completion.
func (c *Chat) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	p, err := c.request(req)
	if err != nil {
		return llm.Response{}, err
	}
	var out chatResponse
	if err := c.c.PostJSON(ctx, "/chat/completions", p, &out); err != nil {
		return llm.Response{}, err
	}
	if len(out.Choices) == 0 {
		return llm.Response{}, fmt.Errorf("%w: openai: the reply has no choices", llm.ErrMalformed)
	}
	ch := out.Choices[0]
	if err := refused(ch.Message.Content, ch.Message.Refusal); err != nil {
		return llm.Response{}, err
	}
	return llm.Response{
		Content:    ch.Message.Content,
		Model:      modelOr(out.Model, c.model),
		StopReason: stopReason(ch.FinishReason),
		Usage:      out.Usage.llm(),
	}, nil
}

// Stream asks for a streamed chat completion (with the usage in its last
// chunk) and hands out each content delta as it arrives. The stream ends
// at `data: [DONE]`; one that ends before it is a whole reply only when
// its finish_reason came, and ErrMalformed otherwise.
func (c *Chat) Stream(ctx context.Context, req llm.Request, onToken func(string) error) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	p, err := c.request(req)
	if err != nil {
		return llm.Response{}, err
	}
	p.Stream, p.StreamOptions = true, &streamOptions{IncludeUsage: true}
	var content, refusal strings.Builder
	resp := llm.Response{Model: c.model}
	finish := ""
	err = c.c.Stream(ctx, "/chat/completions", p, func(ev wire.Event) (bool, error) {
		if ev.Data == "[DONE]" {
			return true, nil
		}
		var chunk chatChunk
		if err := c.c.Decode(ev, &chunk); err != nil {
			return false, err
		}
		resp.Model = modelOr(chunk.Model, resp.Model)
		if chunk.Usage != nil {
			resp.Usage = chunk.Usage.llm()
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			refusal.WriteString(ch.Delta.Refusal)
			if d := ch.Delta.Content; d != "" {
				content.WriteString(d)
				if err := onToken(d); err != nil {
					return false, err
				}
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
		return false, nil
	})
	if err != nil && !(errors.Is(err, wire.ErrEnded) && finish != "") {
		return llm.Response{}, err
	}
	if finish == "" {
		return llm.Response{}, fmt.Errorf("%w: openai: the stream ended without a finish reason", llm.ErrMalformed)
	}
	if err := refused(content.String(), refusal.String()); err != nil {
		return llm.Response{}, err
	}
	resp.Content, resp.StopReason = content.String(), stopReason(finish)
	return resp, nil
}

// refused is the error of a reply that is a refusal and no content.
func refused(content, refusal string) error {
	if content == "" && refusal != "" {
		return &llm.APIError{Provider: Provider, Status: http.StatusUnprocessableEntity, Message: "refused: " + refusal}
	}
	return nil
}

// stopReason maps finish_reason to the schema's stop reasons.
func stopReason(finish string) llm.StopReason {
	switch finish {
	case "length":
		return llm.StopMaxTokens
	case "content_filter":
		return llm.StopSequence
	}
	return llm.StopEndTurn // stop, tool_calls, function_call
}

func modelOr(got, want string) string {
	if got != "" {
		return got
	}
	return want
}

// Embedder is an llm.Embedder over the embeddings API.
type Embedder struct {
	c        *wire.Client
	model    string
	dims     int
	sendDims bool
	batch    int
	id       string
}

var _ llm.Embedder = (*Embedder)(nil)

// NewEmbedder returns an embeddings client for vectors of dims. The
// `dimensions` parameter is sent only to models that take it (OpenAI's
// text-embedding-3 family); every reply is checked to have dims values.
// batch bounds the texts per request (0: 256).
func NewEmbedder(o Options, dims, batch int) (*Embedder, error) {
	if o.Model == "" {
		return nil, errors.New("openai: an embedding model is needed (embedder.model)")
	}
	if dims <= 0 {
		return nil, fmt.Errorf("openai: embedder dims must be positive, got %d", dims)
	}
	if batch <= 0 {
		batch = 256
	}
	return &Embedder{c: o.client(), model: o.Model, dims: dims, batch: batch,
		sendDims: strings.HasPrefix(o.Model, "text-embedding-3"),
		id:       fmt.Sprintf("%s/%s/%d", Provider, o.Model, dims)}, nil
}

// Dims is the vector length.
func (e *Embedder) Dims() int { return e.dims }

// ID is "openai/<model>/<dims>".
func (e *Embedder) ID() string { return e.id }

// embeddingRequest is the body of POST /embeddings.
type embeddingRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
	Dimensions     int      `json:"dimensions,omitempty"`
}

// embeddingResponse is its reply.
type embeddingResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
}

// Embed embeds texts in batches; vectors are normalised.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.batch {
		part := texts[start:min(start+e.batch, len(texts))]
		p := embeddingRequest{Model: e.model, Input: make([]string, len(part)), EncodingFormat: "float"}
		for i, t := range part {
			p.Input[i] = t
			if strings.TrimSpace(t) == "" {
				p.Input[i] = " " // the API refuses empty inputs
			}
		}
		if e.sendDims {
			p.Dimensions = e.dims
		}
		var res embeddingResponse
		if err := e.c.PostJSON(ctx, "/embeddings", p, &res); err != nil {
			return nil, err
		}
		if len(res.Data) != len(part) {
			return nil, fmt.Errorf("%w: openai: %d embeddings for %d texts", llm.ErrMalformed, len(res.Data), len(part))
		}
		vecs := make([][]float32, len(part))
		for _, d := range res.Data {
			if d.Index < 0 || d.Index >= len(part) || vecs[d.Index] != nil {
				return nil, fmt.Errorf("%w: openai: embedding index %d out of place", llm.ErrMalformed, d.Index)
			}
			if len(d.Embedding) != e.dims {
				return nil, fmt.Errorf("%w: openai: model %s returned %d dimensions, embedder.dims is %d", llm.ErrMalformed, e.model, len(d.Embedding), e.dims)
			}
			v := make([]float32, e.dims)
			for i, f := range d.Embedding {
				v[i] = float32(f)
			}
			if !llm.Normalize(v) {
				return nil, fmt.Errorf("%w: openai: a zero or non-finite embedding", llm.ErrMalformed)
			}
			vecs[d.Index] = v
		}
		out = append(out, vecs...)
	}
	return out, nil
}
