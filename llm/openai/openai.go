// Package openai is the OpenAI-compatible provider: chat completions
// (plain, streamed, and structured with a json_schema response format) and
// embeddings, through the official SDK (github.com/openai/openai-go). One
// provider serves OpenAI and every server that speaks its API: Ollama
// (http://localhost:11434/v1), vLLM, the llama.cpp server, LM Studio.
//
// The SDK's own retries are turned off: the resilience package retries,
// with the backoff, Retry-After handling and breaker the server needs.
// Errors come back as *llm.APIError (an HTTP error reply), llm.ErrMalformed
// (a reply that is not the wire format) or the context's error.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/memoria-ai/memoria/llm"
)

// Provider is the provider's name in errors, metrics and embedder IDs.
const Provider = "openai"

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

func (o Options) client() sdk.Client {
	opts := []option.RequestOption{option.WithMaxRetries(0), option.WithAPIKey(o.APIKey)}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	return sdk.NewClient(opts...)
}

// Chat is an llm.LLM and llm.Streamer over the chat completions API.
type Chat struct {
	c     sdk.Client
	model string
	now   func() time.Time
}

var _ llm.Streamer = (*Chat)(nil)

// NewChat returns a chat client.
func NewChat(o Options) (*Chat, error) {
	if o.Model == "" {
		return nil, errors.New("openai: a model is needed (llm.model)")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Chat{c: o.client(), model: o.Model, now: o.Now}, nil
}

func (c *Chat) params(req llm.Request) (sdk.ChatCompletionNewParams, error) {
	if len(req.Messages) == 0 {
		return sdk.ChatCompletionNewParams{}, llm.ErrEmptyRequest
	}
	p := sdk.ChatCompletionNewParams{Model: shared.ChatModel(c.model)}
	for _, m := range req.Messages {
		switch m.Role {
		case llm.RoleSystem:
			p.Messages = append(p.Messages, sdk.SystemMessage(m.Content))
		case llm.RoleAssistant:
			p.Messages = append(p.Messages, sdk.AssistantMessage(m.Content))
		default:
			u := sdk.UserMessage(m.Content)
			if m.Name != "" && u.OfUser != nil {
				u.OfUser.Name = param.NewOpt(m.Name)
			}
			p.Messages = append(p.Messages, u)
		}
	}
	if req.MaxTokens > 0 {
		p.MaxTokens = param.NewOpt(int64(req.MaxTokens))
	}
	if req.Schema != nil {
		var schema map[string]any
		if err := json.Unmarshal(req.Schema.JSON, &schema); err != nil {
			return p, fmt.Errorf("openai: schema %s: %w", req.Schema.Name, err)
		}
		p.ResponseFormat = sdk.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: req.Schema.Name, Schema: schema, Strict: param.NewOpt(true)},
		}}
	}
	return p, nil
}

// Complete asks for one chat completion.
func (c *Chat) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	p, err := c.params(req)
	if err != nil {
		return llm.Response{}, err
	}
	out, err := c.c.Chat.Completions.New(ctx, p)
	if err != nil {
		return llm.Response{}, convertError(ctx, err, c.now)
	}
	if len(out.Choices) == 0 {
		return llm.Response{}, fmt.Errorf("%w: openai: the reply has no choices", llm.ErrMalformed)
	}
	ch := out.Choices[0]
	if ch.Message.Content == "" && ch.Message.Refusal != "" {
		return llm.Response{}, &llm.APIError{Provider: Provider, Status: http.StatusUnprocessableEntity, Message: "refused: " + ch.Message.Refusal}
	}
	return llm.Response{
		Content:    ch.Message.Content,
		Model:      modelOr(out.Model, c.model),
		StopReason: stopReason(ch.FinishReason),
		Usage:      llm.Usage{PromptTokens: int(out.Usage.PromptTokens), CompletionTokens: int(out.Usage.CompletionTokens)},
	}, nil
}

// Stream asks for a streamed chat completion and hands out each content
// delta as it arrives.
func (c *Chat) Stream(ctx context.Context, req llm.Request, onToken func(string) error) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	p, err := c.params(req)
	if err != nil {
		return llm.Response{}, err
	}
	p.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}
	st := c.c.Chat.Completions.NewStreaming(ctx, p)
	defer st.Close()
	var b strings.Builder
	resp := llm.Response{Model: c.model}
	finish := ""
	for st.Next() {
		chunk := st.Current()
		if chunk.Model != "" {
			resp.Model = chunk.Model
		}
		if chunk.Usage.PromptTokens > 0 || chunk.Usage.CompletionTokens > 0 {
			resp.Usage = llm.Usage{PromptTokens: int(chunk.Usage.PromptTokens), CompletionTokens: int(chunk.Usage.CompletionTokens)}
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if d := ch.Delta.Content; d != "" {
				b.WriteString(d)
				if err := onToken(d); err != nil {
					return llm.Response{}, err
				}
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if err := st.Err(); err != nil {
		return llm.Response{}, convertError(ctx, err, c.now)
	}
	if finish == "" {
		return llm.Response{}, fmt.Errorf("%w: openai: the stream ended without a finish reason", llm.ErrMalformed)
	}
	resp.Content, resp.StopReason = b.String(), stopReason(finish)
	return resp, nil
}

// stopReason maps finish_reason to the schema's stop reasons.
func stopReason(finish string) llm.StopReason {
	switch finish {
	case "length":
		return llm.StopMaxTokens
	case "stop":
		return llm.StopEndTurn
	case "content_filter":
		return llm.StopSequence
	}
	return llm.StopEndTurn
}

func modelOr(got, want string) string {
	if got != "" {
		return got
	}
	return want
}

// Embedder is an llm.Embedder over the embeddings API.
type Embedder struct {
	c        sdk.Client
	model    string
	dims     int
	sendDims bool
	batch    int
	now      func() time.Time
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
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Embedder{c: o.client(), model: o.Model, dims: dims, batch: batch, now: o.Now,
		sendDims: strings.HasPrefix(o.Model, "text-embedding-3"),
		id:       fmt.Sprintf("%s/%s/%d", Provider, o.Model, dims)}, nil
}

// Dims is the vector length.
func (e *Embedder) Dims() int { return e.dims }

// ID is "openai/<model>/<dims>".
func (e *Embedder) ID() string { return e.id }

// Embed embeds texts in batches; vectors are normalised.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.batch {
		part := texts[start:min(start+e.batch, len(texts))]
		in := make([]string, len(part))
		for i, t := range part {
			in[i] = t
			if strings.TrimSpace(t) == "" {
				in[i] = " " // the API refuses empty inputs
			}
		}
		p := sdk.EmbeddingNewParams{Model: sdk.EmbeddingModel(e.model),
			Input: sdk.EmbeddingNewParamsInputUnion{OfArrayOfStrings: in}, EncodingFormat: sdk.EmbeddingNewParamsEncodingFormatFloat}
		if e.sendDims {
			p.Dimensions = param.NewOpt(int64(e.dims))
		}
		res, err := e.c.Embeddings.New(ctx, p)
		if err != nil {
			return nil, convertError(ctx, err, e.now)
		}
		if len(res.Data) != len(part) {
			return nil, fmt.Errorf("%w: openai: %d embeddings for %d texts", llm.ErrMalformed, len(res.Data), len(part))
		}
		vecs := make([][]float32, len(part))
		for _, d := range res.Data {
			if d.Index < 0 || int(d.Index) >= len(part) || vecs[d.Index] != nil {
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

// convertError turns an SDK error into *llm.APIError, llm.ErrMalformed or
// the context's error.
func convertError(ctx context.Context, err error, now func() time.Time) error {
	var api *llm.APIError
	var ae *sdk.Error
	if errors.As(err, &ae) {
		api = &llm.APIError{Provider: Provider, Status: ae.StatusCode, Message: apiMessage(ae)}
		if ae.Response != nil {
			api.RetryAfter = llm.ParseRetryAfter(ae.Response.Header.Get("Retry-After"), ae.Response.Header.Get("Retry-After-Ms"), now())
		}
	}
	return llm.ProviderError(ctx, Provider, err, api)
}

func apiMessage(ae *sdk.Error) string {
	if ae.Message != "" {
		return ae.Message
	}
	if raw := ae.RawJSON(); raw != "" {
		return raw
	}
	return http.StatusText(ae.StatusCode)
}
