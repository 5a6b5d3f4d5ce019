// Package anthropic is the Anthropic provider: the Messages API (plain,
// streamed, and structured through output_config.format json_schema),
// spoken directly over net/http in the API's documented wire format. The
// system prompt goes in its own field; consecutive turns of one role are
// merged, as the API wants alternating user and assistant turns starting
// with the user. Stop reasons map to the schema's endTurn, stopSequence
// and maxTokens.
//
// The client never retries (the resilience package does), and the key
// comes from the configured variable only.
package anthropic

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

// Provider is the provider's name in errors and metrics.
const Provider = "anthropic"

// DefaultMaxTokens is sent when a request sets no MaxTokens: the API
// requires a limit.
const DefaultMaxTokens = 1024

// DefaultBaseURL is Anthropic's own API.
const DefaultBaseURL = "https://api.anthropic.com"

// Version is the API version sent as the anthropic-version header.
const Version = "2023-06-01"

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
	c     *wire.Client
	model string
}

var _ llm.Streamer = (*Chat)(nil)

// NewChat returns a Messages client.
func NewChat(o Options) (*Chat, error) {
	if o.Model == "" {
		return nil, errors.New("anthropic: a model is needed (llm.model)")
	}
	c := &wire.Client{Provider: Provider, BaseURL: o.BaseURL, Header: http.Header{}, HTTP: o.HTTPClient, Now: o.Now}
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	c.Header.Set("anthropic-version", Version)
	if o.APIKey != "" {
		c.Header.Set("x-api-key", o.APIKey)
	}
	return &Chat{c: c, model: o.Model}, nil
}

// messagesRequest is the body of POST /v1/messages.
type messagesRequest struct {
	Model        string        `json:"model"`
	MaxTokens    int           `json:"max_tokens"`
	System       []textBlock   `json:"system,omitempty"`
	Messages     []message     `json:"messages"`
	OutputConfig *outputConfig `json:"output_config,omitempty"`
	Stream       bool          `json:"stream,omitempty"`
}

type textBlock struct {
	Type string `json:"type"` // text
	Text string `json:"text"`
}

type message struct {
	Role    string      `json:"role"`
	Content []textBlock `json:"content"`
}

type outputConfig struct {
	Format struct {
		Type   string          `json:"type"` // json_schema
		Schema json.RawMessage `json:"schema"`
	} `json:"format"`
}

// reply is a message, as POST /v1/messages answers and as a stream builds
// it up.
type reply struct {
	Type       string      `json:"type"`
	Model      string      `json:"model"`
	Content    []textBlock `json:"content"`
	StopReason string      `json:"stop_reason"`
	Usage      usage       `json:"usage"`
}

type usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// event is one event of a streamed message; which fields are set depends
// on its type.
type event struct {
	Type         string    `json:"type"`
	Message      reply     `json:"message"`       // message_start
	ContentBlock textBlock `json:"content_block"` // content_block_start
	Delta        struct {
		Type       string `json:"type"` // content_block_delta: text_delta, …
		Text       string `json:"text"`
		StopReason string `json:"stop_reason"` // message_delta
	} `json:"delta"`
	Usage usage `json:"usage"` // message_delta: cumulative
}

func (c *Chat) request(req llm.Request) (messagesRequest, error) {
	if len(req.Messages) == 0 {
		return messagesRequest{}, llm.ErrEmptyRequest
	}
	p := messagesRequest{Model: c.model, MaxTokens: DefaultMaxTokens}
	if req.MaxTokens > 0 {
		p.MaxTokens = req.MaxTokens
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
		role := "assistant"
		if t.user {
			role = "user"
		}
		p.Messages = append(p.Messages, message{Role: role, Content: []textBlock{{Type: "text", Text: strings.Join(t.text, "\n\n")}}})
	}
	if len(system) > 0 {
		p.System = []textBlock{{Type: "text", Text: strings.Join(system, "\n\n")}}
	}
	if req.Schema != nil {
		schema, err := wire.Schema(Provider, req.Schema)
		if err != nil {
			return p, err
		}
		p.OutputConfig = &outputConfig{}
		p.OutputConfig.Format.Type, p.OutputConfig.Format.Schema = "json_schema", schema
	}
	return p, nil
}

// Complete asks for one message.
func (c *Chat) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	p, err := c.request(req)
	if err != nil {
		return llm.Response{}, err
	}
	var msg reply
	if err := c.c.PostJSON(ctx, "/v1/messages", p, &msg); err != nil {
		return llm.Response{}, err
	}
	return c.response(msg)
}

func (c *Chat) response(msg reply) (llm.Response, error) {
	if msg.Type != "message" || msg.StopReason == "" {
		return llm.Response{}, fmt.Errorf("%w: anthropic: the reply is not a finished message", llm.ErrMalformed)
	}
	if msg.StopReason == "refusal" {
		return llm.Response{}, &llm.APIError{Provider: Provider, Status: http.StatusUnprocessableEntity, Message: "the model refused to answer"}
	}
	var b strings.Builder
	for _, block := range msg.Content {
		if block.Type == "text" {
			b.WriteString(block.Text)
		}
	}
	model := msg.Model
	if model == "" {
		model = c.model
	}
	return llm.Response{
		Content: b.String(), Model: model, StopReason: stopReason(msg.StopReason),
		Usage: llm.Usage{PromptTokens: msg.Usage.InputTokens, CompletionTokens: msg.Usage.OutputTokens},
	}, nil
}

// Stream asks for a streamed message and hands out each text delta. The
// message is whole at message_stop; a stream that ends before it, or
// whose events come out of order, is ErrMalformed.
func (c *Chat) Stream(ctx context.Context, req llm.Request, onToken func(string) error) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	p, err := c.request(req)
	if err != nil {
		return llm.Response{}, err
	}
	p.Stream = true
	var msg reply
	var text strings.Builder
	started := false
	emit := func(s string) error {
		if s == "" {
			return nil
		}
		text.WriteString(s)
		return onToken(s)
	}
	err = c.c.Stream(ctx, "/v1/messages", p, func(ev wire.Event) (bool, error) {
		var e event
		if err := c.c.Decode(ev, &e); err != nil {
			return false, err
		}
		if !started && e.Type != "message_start" && e.Type != "ping" {
			return false, fmt.Errorf("%w: anthropic: the stream began with %q, not message_start", llm.ErrMalformed, e.Type)
		}
		switch e.Type {
		case "message_start":
			msg, started = e.Message, true
		case "content_block_start":
			if e.ContentBlock.Type == "text" {
				return false, emit(e.ContentBlock.Text)
			}
		case "content_block_delta":
			if e.Delta.Type == "text_delta" {
				return false, emit(e.Delta.Text)
			}
		case "message_delta":
			if e.Delta.StopReason != "" {
				msg.StopReason = e.Delta.StopReason
			}
			if e.Usage.InputTokens > 0 {
				msg.Usage.InputTokens = e.Usage.InputTokens
			}
			if e.Usage.OutputTokens > 0 {
				msg.Usage.OutputTokens = e.Usage.OutputTokens
			}
		case "message_stop":
			return true, nil
		}
		return false, nil // ping, content_block_stop, and event types to come
	})
	if err != nil {
		return llm.Response{}, err
	}
	msg.Content = []textBlock{{Type: "text", Text: text.String()}}
	return c.response(msg)
}

// stopReason maps the API's stop_reason to the schema's.
func stopReason(r string) llm.StopReason {
	switch r {
	case "max_tokens", "model_context_window_exceeded":
		return llm.StopMaxTokens
	case "stop_sequence":
		return llm.StopSequence
	}
	return llm.StopEndTurn // end_turn, tool_use, pause_turn
}
