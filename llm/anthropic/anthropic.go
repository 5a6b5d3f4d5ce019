// Package anthropic is the Anthropic provider: the Messages API (plain,
// streamed, and structured through output_config.format json_schema)
// through the official SDK (github.com/anthropics/anthropic-sdk-go). The
// system prompt goes in its own field; consecutive turns of one role are
// merged, as the API wants alternating user and assistant turns starting
// with the user. Stop reasons map to the schema's endTurn, stopSequence
// and maxTokens.
//
// The SDK's own retries and environment defaults are off: the resilience
// package retries, and the key comes from the configured variable only.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/memoria-ai/memoria/llm"
)

// Provider is the provider's name in errors and metrics.
const Provider = "anthropic"

// DefaultMaxTokens is sent when a request sets no MaxTokens: the API
// requires a limit.
const DefaultMaxTokens = 1024

// Options configure a client.
type Options struct {
	// BaseURL of the API (default https://api.anthropic.com).
	BaseURL string
	// APIKey is sent as x-api-key.
	APIKey string
	// Model names the model, e.g. claude-sonnet-4-5.
	Model string
	// HTTPClient replaces http.DefaultClient.
	HTTPClient *http.Client
	// Now is the clock Retry-After dates are read against.
	Now func() time.Time
}

// Chat is an llm.LLM and llm.Streamer over the Messages API.
type Chat struct {
	c     sdk.Client
	model string
	now   func() time.Time
}

var _ llm.Streamer = (*Chat)(nil)

// NewChat returns a Messages client.
func NewChat(o Options) (*Chat, error) {
	if o.Model == "" {
		return nil, errors.New("anthropic: a model is needed (llm.model)")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithMaxRetries(0), option.WithAPIKey(o.APIKey)}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	return &Chat{c: sdk.NewClient(opts...), model: o.Model, now: o.Now}, nil
}

func (c *Chat) params(req llm.Request) (sdk.MessageNewParams, error) {
	if len(req.Messages) == 0 {
		return sdk.MessageNewParams{}, llm.ErrEmptyRequest
	}
	p := sdk.MessageNewParams{Model: sdk.Model(c.model), MaxTokens: DefaultMaxTokens}
	if req.MaxTokens > 0 {
		p.MaxTokens = int64(req.MaxTokens)
	}
	var system []string
	type turn struct {
		user bool
		text []string
	}
	var turns []turn
	for _, m := range req.Messages {
		text := m.Content
		switch m.Role {
		case llm.RoleSystem:
			system = append(system, text)
			continue
		case llm.RoleUser:
			if m.Name != "" {
				text = m.Name + ": " + text
			}
		}
		user := m.Role != llm.RoleAssistant
		if n := len(turns); n > 0 && turns[n-1].user == user {
			turns[n-1].text = append(turns[n-1].text, text)
			continue
		}
		turns = append(turns, turn{user: user, text: []string{text}})
	}
	if len(turns) == 0 {
		return p, llm.ErrNoUserMessage
	}
	if !turns[0].user {
		turns = append([]turn{{user: true, text: []string{"(conversation continues)"}}}, turns...)
	}
	for _, t := range turns {
		block := sdk.NewTextBlock(strings.Join(t.text, "\n\n"))
		if t.user {
			p.Messages = append(p.Messages, sdk.NewUserMessage(block))
		} else {
			p.Messages = append(p.Messages, sdk.NewAssistantMessage(block))
		}
	}
	if len(system) > 0 {
		p.System = []sdk.TextBlockParam{{Text: strings.Join(system, "\n\n")}}
	}
	if req.Schema != nil {
		var schema map[string]any
		if err := json.Unmarshal(req.Schema.JSON, &schema); err != nil {
			return p, fmt.Errorf("anthropic: schema %s: %w", req.Schema.Name, err)
		}
		p.OutputConfig = sdk.OutputConfigParam{Format: sdk.JSONOutputFormatParam{Schema: schema}}
	}
	return p, nil
}

// Complete asks for one message.
func (c *Chat) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	p, err := c.params(req)
	if err != nil {
		return llm.Response{}, err
	}
	msg, err := c.c.Messages.New(ctx, p)
	if err != nil {
		return llm.Response{}, c.convertError(ctx, err)
	}
	return c.response(msg)
}

func (c *Chat) response(msg *sdk.Message) (llm.Response, error) {
	if msg.Type != "message" || msg.StopReason == "" {
		return llm.Response{}, fmt.Errorf("%w: anthropic: the reply is not a finished message", llm.ErrMalformed)
	}
	var b strings.Builder
	for _, block := range msg.Content {
		if block.Type == "text" {
			b.WriteString(block.Text)
		}
	}
	if msg.StopReason == sdk.StopReasonRefusal {
		return llm.Response{}, &llm.APIError{Provider: Provider, Status: http.StatusUnprocessableEntity, Message: "the model refused to answer"}
	}
	model := string(msg.Model)
	if model == "" {
		model = c.model
	}
	return llm.Response{
		Content: b.String(), Model: model, StopReason: stopReason(msg.StopReason),
		Usage: llm.Usage{PromptTokens: int(msg.Usage.InputTokens), CompletionTokens: int(msg.Usage.OutputTokens)},
	}, nil
}

// Stream asks for a streamed message and hands out each text delta.
func (c *Chat) Stream(ctx context.Context, req llm.Request, onToken func(string) error) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	p, err := c.params(req)
	if err != nil {
		return llm.Response{}, err
	}
	st := c.c.Messages.NewStreaming(ctx, p)
	defer st.Close()
	var msg sdk.Message
	for st.Next() {
		ev := st.Current()
		if err := msg.Accumulate(ev); err != nil {
			return llm.Response{}, fmt.Errorf("%w: anthropic: %v", llm.ErrMalformed, err)
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" && ev.Delta.Text != "" {
			if err := onToken(ev.Delta.Text); err != nil {
				return llm.Response{}, err
			}
		}
	}
	if err := st.Err(); err != nil {
		return llm.Response{}, c.convertError(ctx, err)
	}
	return c.response(&msg)
}

// stopReason maps the API's stop_reason to the schema's.
func stopReason(r sdk.StopReason) llm.StopReason {
	switch r {
	case sdk.StopReasonMaxTokens:
		return llm.StopMaxTokens
	case sdk.StopReasonStopSequence:
		return llm.StopSequence
	}
	return llm.StopEndTurn // end_turn, tool_use, pause_turn
}

// convertError turns an SDK error into *llm.APIError, llm.ErrMalformed or
// the context's error.
func (c *Chat) convertError(ctx context.Context, err error) error {
	var api *llm.APIError
	var ae *sdk.Error
	if errors.As(err, &ae) {
		api = &llm.APIError{Provider: Provider, Status: ae.StatusCode, Message: ae.RawJSON()}
		if api.Message == "" {
			api.Message = http.StatusText(ae.StatusCode)
		}
		if ae.Response != nil {
			api.RetryAfter = llm.ParseRetryAfter(ae.Response.Header.Get("Retry-After"), ae.Response.Header.Get("Retry-After-Ms"), c.now())
		}
	}
	return llm.ProviderError(ctx, Provider, err, api)
}
