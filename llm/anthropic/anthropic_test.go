package anthropic_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/fakeprovider"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/llm/anthropic"
	"github.com/memoria-ai/memoria/llm/resilience"
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

// The request bodies and headers are the API's, field for field.
func TestWireRequests(t *testing.T) {
	srv := fakeprovider.Anthropic(func(int, fakeprovider.Request) fakeprovider.Reply {
		return fakeprovider.Reply{Tokens: []string{`{"a":1}`}}
	})
	defer srv.Close()
	c := chat(t, srv)
	if _, err := c.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	r := llm.Request{Messages: []llm.Message{
		{Role: llm.RoleAssistant, Content: "Hello."},
		{Role: llm.RoleUser, Content: "Hi."},
		{Role: llm.RoleAssistant, Content: "What now?"},
		{Role: llm.RoleAssistant, Content: "Anything?"},
	}, Schema: &llm.Schema{Name: "a", JSON: []byte(`{"type":"object","properties":{"a":{"type":"integer"}}}`)}}
	if _, err := c.Stream(context.Background(), r, func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{
		`{"model":"claude-test","max_tokens":50,"system":[{"type":"text","text":"You are alice.\n\nPersona: likes tea."}],
		  "messages":[{"role":"user","content":[{"type":"text","text":"My bicycle is in the blue shed.\n\nbob: Where is my bicycle?"}]}]}`,
		// No system prompt; a conversation that starts with the assistant
		// gets a user turn first; consecutive assistant turns are merged.
		`{"model":"claude-test","max_tokens":1024,"stream":true,"messages":[
		  {"role":"user","content":[{"type":"text","text":"(conversation continues)"}]},
		  {"role":"assistant","content":[{"type":"text","text":"Hello."}]},
		  {"role":"user","content":[{"type":"text","text":"Hi."}]},
		  {"role":"assistant","content":[{"type":"text","text":"What now?\n\nAnything?"}]}],
		  "output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}}`,
	} {
		got := srv.Requests()[i]
		if err := got.JSONEquals(want); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
		if got.Path != "/v1/messages" || got.Header.Get("X-Api-Key") != "ak-test" || got.Header.Get("Anthropic-Version") != "2023-06-01" ||
			got.Header.Get("Content-Type") != "application/json" || got.Header.Get("Authorization") != "" {
			t.Errorf("request %d: %s with headers %v", i, got.Path, got.Header)
		}
	}
	if _, err := c.Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleSystem, Content: "x"}}}); !errors.Is(err, llm.ErrNoUserMessage) {
		t.Fatalf("only a system prompt: err = %v", err)
	}
}

const (
	start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\"," +
		"\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"
	blockStart = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	ping       = "event: ping\ndata: {\"type\": \"ping\"}\n\n"
	stop       = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":4}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
)

func delta(text string) string {
	return "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + text + "\"}}\n\n"
}

// streamed runs one streamed call against a scripted event stream.
func streamed(t *testing.T, events string, abort bool) ([]string, llm.Response, error) {
	t.Helper()
	srv := fakeprovider.Anthropic(func(int, fakeprovider.Request) fakeprovider.Reply {
		return fakeprovider.Reply{Events: events, Abort: abort}
	})
	defer srv.Close()
	var got []string
	resp, err := chat(t, srv).Stream(context.Background(), req, func(s string) error { got = append(got, s); return nil })
	return got, resp, err
}

func TestStreamEdgeCases(t *testing.T) {
	// Pings, comments, other block types and unknown events are passed
	// over; the usage is message_start's input and message_delta's output.
	events := ping + start + ": comment\n\n" + blockStart + ping + delta("In") +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"citations_delta\",\"citation\":{}}}\n\n" +
		"event: future_event\ndata: {\"type\":\"future_event\"}\n\n" + delta(" the shed") + stop
	got, resp, err := streamed(t, events, false)
	want := llm.Response{Content: "In the shed", Model: "claude-x", StopReason: llm.StopEndTurn, Usage: llm.Usage{PromptTokens: 9, CompletionTokens: 4}}
	if err != nil || !slices.Equal(got, []string{"In", " the shed"}) || resp != want {
		t.Fatalf("tokens %q resp %+v err %v, want %+v", got, resp, err, want)
	}

	// Cut short: never a truncated answer.
	for _, tc := range []struct {
		name   string
		events string
		abort  bool
		class  string
	}{
		{"ended before message_stop", start + blockStart + delta("In") + delta(" the"), false, "malformed"},
		{"ended after message_delta, before message_stop", start + blockStart + delta("In") + strings.TrimSuffix(stop, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), false, "malformed"},
		{"broken off in transfer", start + blockStart + delta("In"), true, "network"},
		{"message_stop with no stop reason", start + blockStart + delta("In") + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", false, "malformed"},
		{"no message_start", blockStart + delta("In") + stop, false, "malformed"},
	} {
		_, resp, err := streamed(t, tc.events, tc.abort)
		if err == nil || resilience.Classify(err) != tc.class {
			t.Errorf("%s: resp %+v err %v (class %s), want a %s error", tc.name, resp, err, resilience.Classify(err), tc.class)
		}
	}

	// An error event mid-stream is the provider's error, classified as the
	// status its type stands for (overloaded: 529, retryable).
	got, _, err = streamed(t, start+blockStart+delta("In")+
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", false)
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != 529 || !ae.Retryable() || !strings.Contains(ae.Message, "overloaded_error: Overloaded") || !slices.Equal(got, []string{"In"}) {
		t.Fatalf("error event: tokens %q err %#v", got, err)
	}
}

func TestErrorBodies(t *testing.T) {
	replies := []fakeprovider.Reply{
		{Status: 400, Raw: `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"},"request_id":"req_011"}`},
		{Status: 502, Raw: "<!DOCTYPE html><html><body>Bad gateway</body></html>", Header: map[string]string{"Content-Type": "text/html"}},
		{Status: 429, Header: map[string]string{"Retry-After": "Fri, 01 Jan 2100 00:00:00 GMT"}},
		{Tokens: []string{"no"}, Finish: "refusal"},
	}
	srv := fakeprovider.Anthropic(func(n int, _ fakeprovider.Request) fakeprovider.Reply { return replies[n] })
	defer srv.Close()
	now := time.Date(2099, 12, 31, 23, 59, 0, 0, time.UTC)
	c, err := anthropic.NewChat(anthropic.Options{BaseURL: srv.URL, Model: "claude-test", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []llm.APIError{
		{Status: 400, Message: "invalid_request_error: max_tokens: Field required"},
		{Status: 502, Message: "Bad Gateway (an HTML page, not the provider's API)"},
		{Status: 429, Message: "api_error: scripted 429", RetryAfter: time.Minute},
		{Status: 422, Message: "the model refused to answer"},
	} {
		_, err := c.Complete(context.Background(), req)
		var ae *llm.APIError
		if !errors.As(err, &ae) || ae.Status != want.Status || ae.Message != want.Message || ae.RetryAfter != want.RetryAfter || ae.Retryable() != (want.Status >= 429 && want.Status != 422) {
			t.Errorf("reply %d: err = %#v, want %+v", i, err, want)
		}
	}
	if h := srv.Requests()[0].Header; h.Get("X-Api-Key") != "" || h.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("no key: headers %v", h)
	}
}

// The caller's context reaches the HTTP request, streamed or not.
func TestCancel(t *testing.T) {
	srv := fakeprovider.Anthropic(func(int, fakeprovider.Request) fakeprovider.Reply { return fakeprovider.Reply{Hang: true} })
	defer srv.Close()
	c := chat(t, srv)
	for i, stream := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			var err error
			if stream {
				_, err = c.Stream(ctx, req, func(string) error { return nil })
			} else {
				_, err = c.Complete(ctx, req)
			}
			done <- err
		}()
		<-srv.Arrived
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("call %d: err = %v, want context.Canceled", i, err)
		}
		<-srv.Canceled
	}
}
