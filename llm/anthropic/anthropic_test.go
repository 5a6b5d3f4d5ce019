package anthropic_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/memoria-ai/memoria/internal/fakeprovider"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/llm/anthropic"
)

var req = llm.Request{Messages: []llm.Message{
	{Role: llm.RoleSystem, Content: "You are alice."},
	{Role: llm.RoleSystem, Content: "Persona: likes tea."},
	{Role: llm.RoleUser, Content: "My bicycle is in the blue shed."},
	{Role: llm.RoleUser, Content: "Where is my bicycle?", Name: "bob"},
}, MaxTokens: 50}

func chat(t *testing.T, srv *fakeprovider.Server) *anthropic.Chat {
	t.Helper()
	c, err := anthropic.NewChat(anthropic.Options{BaseURL: srv.URL, APIKey: "ak-test", Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMessages(t *testing.T) {
	for _, tc := range []struct {
		finish string
		want   llm.StopReason
	}{{"end_turn", llm.StopEndTurn}, {"max_tokens", llm.StopMaxTokens}, {"stop_sequence", llm.StopSequence}} {
		srv := fakeprovider.Anthropic(func(int, fakeprovider.Request) fakeprovider.Reply {
			return fakeprovider.Reply{Tokens: []string{"In the ", "blue shed."}, Finish: tc.finish, Model: "claude-test-1"}
		})
		resp, err := chat(t, srv).Complete(context.Background(), req)
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := llm.Response{Content: "In the blue shed.", Model: "claude-test-1", StopReason: tc.want, Usage: llm.Usage{PromptTokens: 13, CompletionTokens: 2}}
		if resp != want {
			t.Fatalf("%s: resp = %+v, want %+v", tc.finish, resp, want)
		}
		got := srv.Requests()[0]
		if got.Header.Get("X-Api-Key") != "ak-test" {
			t.Fatalf("x-api-key = %q", got.Header.Get("X-Api-Key"))
		}
		body := got.JSON()
		system := body["system"].([]any)
		if len(system) != 1 || system[0].(map[string]any)["text"] != "You are alice.\n\nPersona: likes tea." {
			t.Fatalf("system = %v", body["system"])
		}
		msgs := body["messages"].([]any)
		if len(msgs) != 1 || msgs[0].(map[string]any)["role"] != "user" {
			t.Fatalf("messages = %v (consecutive user turns are merged, the system prompt is not a message)", msgs)
		}
		text := msgs[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]
		if text != "My bicycle is in the blue shed.\n\nbob: Where is my bicycle?" || body["max_tokens"] != float64(50) || body["model"] != "claude-test" {
			t.Fatalf("body = %v", body)
		}
	}
}

func TestMessagesStream(t *testing.T) {
	srv := fakeprovider.Anthropic(func(int, fakeprovider.Request) fakeprovider.Reply {
		return fakeprovider.Reply{Tokens: []string{"In", " the", " shed."}, Finish: "max_tokens"}
	})
	defer srv.Close()
	var got []string
	resp, err := chat(t, srv).Stream(context.Background(), req, func(s string) error { got = append(got, s); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"In", " the", " shed."}) || resp.Content != "In the shed." || resp.StopReason != llm.StopMaxTokens ||
		resp.Model != "fake-model" || resp.Usage.CompletionTokens != 3 {
		t.Fatalf("tokens %q resp %+v", got, resp)
	}
}

func TestStructuredAndErrors(t *testing.T) {
	srv := fakeprovider.Anthropic(func(n int, _ fakeprovider.Request) fakeprovider.Reply {
		switch n {
		case 0:
			return fakeprovider.Reply{Tokens: []string{`{"a":1}`}}
		case 1:
			return fakeprovider.Reply{Status: 529, Header: map[string]string{"Retry-After": "2"}}
		}
		return fakeprovider.Reply{Raw: `{"type":"message","content":[{"type":"te`}
	})
	defer srv.Close()
	c := chat(t, srv)
	r := req
	r.Schema = &llm.Schema{Name: "a", JSON: []byte(`{"type":"object","properties":{"a":{"type":"integer"}}}`)}
	if _, err := c.Complete(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	format := srv.Requests()[0].JSON()["output_config"].(map[string]any)["format"].(map[string]any)
	if format["type"] != "json_schema" || format["schema"].(map[string]any)["type"] != "object" {
		t.Fatalf("output_config.format = %v", format)
	}
	var ae *llm.APIError
	if _, err := c.Complete(context.Background(), req); !errors.As(err, &ae) || ae.Status != 529 || !ae.Retryable() || ae.RetryAfter.Seconds() != 2 {
		t.Fatalf("overloaded: err = %v", err)
	}
	if _, err := c.Complete(context.Background(), req); !errors.Is(err, llm.ErrMalformed) {
		t.Fatalf("malformed: err = %v", err)
	}
	if srv.Count() != 3 {
		t.Fatalf("%d requests: the SDK retried on its own", srv.Count())
	}
}
