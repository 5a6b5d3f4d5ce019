package openai_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/fakeprovider"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/llm/openai"
	"github.com/memoria-ai/memoria/llm/resilience"
)

func chat(t *testing.T, srv *fakeprovider.Server) *openai.Chat {
	t.Helper()
	c, err := openai.NewChat(openai.Options{BaseURL: srv.URL, APIKey: "sk-test", Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var req = llm.Request{Messages: []llm.Message{
	{Role: llm.RoleSystem, Content: "You are alice."},
	{Role: llm.RoleUser, Content: "My bicycle is in the blue shed.", Name: "bob"},
	{Role: llm.RoleAssistant, Content: "Noted."},
	{Role: llm.RoleUser, Content: "Where is my bicycle?"},
}, MaxTokens: 64}

func TestChatComplete(t *testing.T) {
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply {
		return fakeprovider.Reply{Tokens: []string{"In the ", "blue shed."}, Model: "gpt-test-2025"}
	})
	defer srv.Close()
	resp, err := chat(t, srv).Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Response{Content: "In the blue shed.", Model: "gpt-test-2025", StopReason: llm.StopEndTurn,
		Usage: llm.Usage{PromptTokens: 11, CompletionTokens: 2}}
	if resp != want {
		t.Fatalf("resp = %+v, want %+v", resp, want)
	}
	got := srv.Requests()[0]
	if got.Path != "/chat/completions" || got.Header.Get("Authorization") != "Bearer sk-test" {
		t.Fatalf("request %s with auth %q", got.Path, got.Header.Get("Authorization"))
	}
	body := got.JSON()
	if body["model"] != "gpt-test" || body["max_tokens"] != float64(64) {
		t.Fatalf("body = %v", body)
	}
	msgs := body["messages"].([]any)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if !slices.Equal(roles, []string{"system", "user", "assistant", "user"}) {
		t.Fatalf("roles = %v", roles)
	}
	if msgs[1].(map[string]any)["name"] != "bob" || msgs[3].(map[string]any)["content"] != "Where is my bicycle?" {
		t.Fatalf("messages = %v", msgs)
	}
	if _, ok := body["response_format"]; ok {
		t.Fatal("response_format sent without a schema")
	}
}

func TestChatStructured(t *testing.T) {
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply {
		return fakeprovider.Reply{Tokens: []string{`{"summary":"x"}`}, Finish: "length"}
	})
	defer srv.Close()
	r := req
	r.Schema = &llm.Schema{Name: "summary", JSON: []byte(`{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}`)}
	resp, err := chat(t, srv).Complete(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != llm.StopMaxTokens {
		t.Fatalf("stop = %s, want maxTokens (finish_reason length)", resp.StopReason)
	}
	rf := srv.Requests()[0].JSON()["response_format"].(map[string]any)
	js := rf["json_schema"].(map[string]any)
	if rf["type"] != "json_schema" || js["name"] != "summary" || js["strict"] != true ||
		js["schema"].(map[string]any)["required"].([]any)[0] != "summary" {
		t.Fatalf("response_format = %v", rf)
	}
}

func TestChatStream(t *testing.T) {
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply {
		return fakeprovider.Reply{Tokens: []string{"In", " the", " blue", " shed."}}
	})
	defer srv.Close()
	var got []string
	resp, err := chat(t, srv).Stream(context.Background(), req, func(s string) error { got = append(got, s); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"In", " the", " blue", " shed."}) || resp.Content != "In the blue shed." ||
		resp.StopReason != llm.StopEndTurn || resp.Usage.CompletionTokens != 4 || resp.Model != "fake-model" {
		t.Fatalf("tokens %q, resp %+v", got, resp)
	}
	if srv.Requests()[0].JSON()["stream"] != true {
		t.Fatal("stream not asked for")
	}
	// A sink that fails stops the stream with its error.
	stop := errors.New("client gone")
	if _, err := chat(t, srv).Stream(context.Background(), req, func(string) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("err = %v, want the sink's", err)
	}
}

func TestErrorsAreClassified(t *testing.T) {
	srv := fakeprovider.OpenAI(func(n int, _ fakeprovider.Request) fakeprovider.Reply {
		switch n {
		case 0:
			return fakeprovider.Reply{Status: 429, Header: map[string]string{"Retry-After": "7"}}
		case 1:
			return fakeprovider.Reply{Status: 503}
		case 2:
			return fakeprovider.Reply{Status: 401}
		}
		return fakeprovider.Reply{Raw: `{"id":"x","choices":[{"message":{"content":"unterminated`}
	})
	defer srv.Close()
	c := chat(t, srv)
	for i, want := range []struct {
		status int
		retry  time.Duration
	}{{429, 7 * time.Second}, {503, 0}, {401, 0}} {
		_, err := c.Complete(context.Background(), req)
		var ae *llm.APIError
		if !errors.As(err, &ae) || ae.Status != want.status || ae.RetryAfter != want.retry || ae.Provider != "openai" {
			t.Fatalf("call %d: err = %#v, want status %d retry %s", i, err, want.status, want.retry)
		}
		if ae.Retryable() != (want.status != 401) {
			t.Fatalf("status %d retryable = %v", want.status, ae.Retryable())
		}
	}
	if _, err := c.Complete(context.Background(), req); !errors.Is(err, llm.ErrMalformed) {
		t.Fatalf("malformed JSON: err = %v, want ErrMalformed", err)
	}
	if srv.Count() != 4 {
		t.Fatalf("%d requests: the SDK retried on its own", srv.Count())
	}
}

func TestEmbeddings(t *testing.T) {
	dims := 4
	srv := fakeprovider.OpenAI(func(_ int, r fakeprovider.Request) fakeprovider.Reply {
		var vecs [][]float64
		for i := range r.JSON()["input"].([]any) {
			v := make([]float64, dims)
			v[i%len(v)] = 2 // not normalised: the client normalises
			vecs = append(vecs, v)
		}
		return fakeprovider.Reply{Vectors: vecs}
	})
	defer srv.Close()
	e, err := openai.NewEmbedder(openai.Options{BaseURL: srv.URL, Model: "text-embedding-3-small"}, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	if e.ID() != "openai/text-embedding-3-small/4" || e.Dims() != 4 {
		t.Fatalf("id %s dims %d", e.ID(), e.Dims())
	}
	vecs, err := e.Embed(context.Background(), []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 3 || srv.Count() != 2 { // batches of two
		t.Fatalf("%d vectors in %d requests", len(vecs), srv.Count())
	}
	for i, v := range vecs {
		if math.Abs(float64(v[i%2])-1) > 1e-6 {
			t.Fatalf("vector %d = %v", i, v)
		}
	}
	body := srv.Requests()[0].JSON()
	if body["dimensions"] != float64(4) || body["model"] != "text-embedding-3-small" || body["encoding_format"] != "float" {
		t.Fatalf("body = %v", body)
	}

	dims = 3 // the model answers with another length than configured
	_, err = e.Embed(context.Background(), []string{"a"})
	if !errors.Is(err, llm.ErrMalformed) || !strings.Contains(err.Error(), "returned 3 dimensions, embedder.dims is 4") {
		t.Fatalf("dimension mismatch: err = %v", err)
	}
}

// The request bodies and headers are the API's, field for field.
func TestWireRequests(t *testing.T) {
	srv := fakeprovider.OpenAI(func(_ int, r fakeprovider.Request) fakeprovider.Reply {
		return fakeprovider.Reply{Tokens: []string{`{"summary":"x"}`}, Vectors: [][]float64{{1, 0}}}
	})
	defer srv.Close()
	c := chat(t, srv)
	if _, err := c.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	r := req
	r.MaxTokens = 0
	r.Schema = &llm.Schema{Name: "summary", JSON: []byte(`{"type":"object","properties":{"summary":{"type":"string"}}}`)}
	if _, err := c.Stream(context.Background(), r, func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"text-embedding-3-large", "nomic-embed-text"} {
		e, err := openai.NewEmbedder(openai.Options{BaseURL: srv.URL + "/", Model: model}, 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Embed(context.Background(), []string{""}); err != nil {
			t.Fatal(err)
		}
	}
	msgs := `[{"role":"system","content":"You are alice."},{"role":"user","content":"My bicycle is in the blue shed.","name":"bob"},
		{"role":"assistant","content":"Noted."},{"role":"user","content":"Where is my bicycle?"}]`
	for i, want := range []string{
		`{"model":"gpt-test","max_tokens":64,"messages":` + msgs + `}`,
		`{"model":"gpt-test","messages":` + msgs + `,"stream":true,"stream_options":{"include_usage":true},
		  "response_format":{"type":"json_schema","json_schema":{"name":"summary","strict":true,
		  "schema":{"type":"object","properties":{"summary":{"type":"string"}}}}}}`,
		`{"model":"text-embedding-3-large","input":[" "],"encoding_format":"float","dimensions":2}`,
		`{"model":"nomic-embed-text","input":[" "],"encoding_format":"float"}`,
	} {
		got := srv.Requests()[i]
		if err := got.JSONEquals(want); err != nil {
			t.Errorf("request %d (%s): %v", i, got.Path, err)
		}
		auth := "Bearer sk-test"
		if i >= 2 {
			auth = "" // no key, no Authorization header (a local server)
		}
		if got.Header.Get("Authorization") != auth || got.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %d: Authorization %q Content-Type %q", i, got.Header.Get("Authorization"), got.Header.Get("Content-Type"))
		}
	}
	if p := srv.Requests()[2].Path; p != "/embeddings" {
		t.Errorf("a base URL with a trailing slash: path %s", p)
	}
	if _, err := c.Complete(context.Background(), llm.Request{Messages: req.Messages, Schema: &llm.Schema{Name: "x", JSON: []byte(`[1]`)}}); err == nil ||
		!strings.Contains(err.Error(), "schema x is not a JSON object") || srv.Count() != 4 {
		t.Fatalf("a schema that is not an object: err = %v, %d requests", err, srv.Count())
	}
}

// streamed runs one streamed call against a scripted event stream.
func streamed(t *testing.T, events string, abort bool) ([]string, llm.Response, error) {
	t.Helper()
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply {
		return fakeprovider.Reply{Events: events, Abort: abort}
	})
	defer srv.Close()
	var got []string
	resp, err := chat(t, srv).Stream(context.Background(), req, func(s string) error { got = append(got, s); return nil })
	return got, resp, err
}

func chunk(content, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `data: {"model":"m1","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":` + f + "}]}\n\n"
}

func TestStreamEdgeCases(t *testing.T) {
	usage := `data: {"model":"m1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}` + "\n\n"
	// Comments, a data line split in two, CRLF line ends and a second
	// choice (ignored) are read as the standard says.
	events := ": OPENROUTER PROCESSING\n\n" + chunk("In", "") +
		"data: {\"model\":\"m1\",\"choices\":[{\"index\":0,\"delta\":\ndata: {\"content\":\" the shed\"}}]}\r\n\r\n" +
		`data: {"choices":[{"index":1,"delta":{"content":"other"}}]}` + "\n\n" +
		chunk("", "stop") + usage + "data: [DONE]\n\n" + chunk("after done", "")
	got, resp, err := streamed(t, events, false)
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Response{Content: "In the shed", Model: "m1", StopReason: llm.StopEndTurn, Usage: llm.Usage{PromptTokens: 5, CompletionTokens: 2}}
	if !slices.Equal(got, []string{"In", " the shed"}) || resp != want {
		t.Fatalf("tokens %q resp %+v, want %+v", got, resp, want)
	}

	// A stream whose finish reason came is whole even if [DONE] does not.
	if _, resp, err := streamed(t, chunk("a", "length"), false); err != nil || resp.StopReason != llm.StopMaxTokens {
		t.Fatalf("no [DONE] after the finish: resp %+v err %v", resp, err)
	}

	// Cut short: never a truncated answer. Ended cleanly before the finish
	// reason: malformed; broken off in transfer: a network error.
	for _, tc := range []struct {
		name   string
		events string
		abort  bool
		class  string
	}{
		{"ended before the finish reason", chunk("In", "") + chunk(" the", ""), false, "malformed"},
		{"ended in the middle of an event", chunk("In", "") + `data: {"choices":[{"index":0,"delta":{"content":" the"}}]}`, false, "malformed"},
		{"broken off in transfer", chunk("In", ""), true, "network"},
		{"not JSON", chunk("In", "") + "data: {\"choices\":[\n\n", false, "malformed"},
		{"a line over 4 MiB", chunk("In", "") + "data: " + strings.Repeat("x", 4<<20) + "\n\n", false, "malformed"},
	} {
		got, resp, err := streamed(t, tc.events, tc.abort)
		if err == nil || resilience.Classify(err) != tc.class {
			t.Errorf("%s: resp %+v err %v (class %s), want a %s error", tc.name, resp, err, resilience.Classify(err), tc.class)
		}
		if got[0] != "In" {
			t.Errorf("%s: tokens %q", tc.name, got)
		}
	}

	// An error frame mid-stream ends the call with the provider's error,
	// after the tokens that came before it.
	got, _, err = streamed(t, chunk("In", "")+`data: {"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`+"\n\n", false)
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != 500 || !strings.Contains(ae.Message, "server_error: The server had an error") || !slices.Equal(got, []string{"In"}) {
		t.Fatalf("error frame: tokens %q err %#v", got, err)
	}

	// A refusal is an error, not an empty answer.
	_, _, err = streamed(t, `data: {"choices":[{"index":0,"delta":{"refusal":"I can't"}}]}`+"\n\n"+chunk("", "stop")+"data: [DONE]\n\n", false)
	if !errors.As(err, &ae) || ae.Status != 422 || ae.Message != "refused: I can't" {
		t.Fatalf("refusal: err = %v", err)
	}
}

func TestErrorBodies(t *testing.T) {
	replies := []fakeprovider.Reply{
		{Status: 400, Raw: `{"error":{"message":"Invalid 'max_tokens': integer below minimum value.","type":"invalid_request_error","param":"max_tokens","code":"integer_below_min_value"}}`},
		{Status: 502, Raw: "<html><head><title>502 Bad Gateway</title></head><body><center>nginx</center></body></html>", Header: map[string]string{"Content-Type": "text/html"}},
		{Status: 429, Header: map[string]string{"Retry-After": "1", "Retry-After-Ms": "1500"}},
		{Status: 404, Raw: `{"error":"model \"llama9\" not found, try pulling it first"}`},
		{Status: 200, Raw: `{"choices":[]}`},
	}
	srv := fakeprovider.OpenAI(func(n int, _ fakeprovider.Request) fakeprovider.Reply { return replies[n] })
	defer srv.Close()
	c := chat(t, srv)
	for i, want := range []llm.APIError{
		{Status: 400, Message: "invalid_request_error: Invalid 'max_tokens': integer below minimum value."},
		{Status: 502, Message: "Bad Gateway (an HTML page, not the provider's API)"},
		{Status: 429, Message: "server_error: scripted 429", RetryAfter: 1500 * time.Millisecond},
		{Status: 404, Message: `model "llama9" not found, try pulling it first`},
	} {
		_, err := c.Complete(context.Background(), req)
		var ae *llm.APIError
		if !errors.As(err, &ae) || ae.Status != want.Status || ae.Message != want.Message || ae.RetryAfter != want.RetryAfter {
			t.Errorf("reply %d: err = %#v, want %+v", i, err, want)
		}
	}
	if _, err := c.Complete(context.Background(), req); !errors.Is(err, llm.ErrMalformed) {
		t.Errorf("no choices: err = %v, want ErrMalformed", err)
	}
	// A JSON answer to a streamed request is not a stream.
	srv2 := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply { return fakeprovider.Reply{Raw: `{"choices":[]}`} })
	defer srv2.Close()
	if _, err := chat(t, srv2).Stream(context.Background(), req, func(string) error { return nil }); !errors.Is(err, llm.ErrMalformed) {
		t.Errorf("JSON to a stream: err = %v, want ErrMalformed", err)
	}
}

// The caller's context reaches the HTTP request: cancelling it ends a
// call in flight, streamed or not, and the server sees the client go.
func TestCancel(t *testing.T) {
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply { return fakeprovider.Reply{Hang: true} })
	defer srv.Close()
	c := chat(t, srv)
	calls := []func(ctx context.Context) error{
		func(ctx context.Context) error { _, err := c.Complete(ctx, req); return err },
		func(ctx context.Context) error {
			_, err := c.Stream(ctx, req, func(string) error { return nil })
			return err
		},
	}
	for i, call := range calls {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- call(ctx) }()
		<-srv.Arrived
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("call %d: err = %v, want context.Canceled", i, err)
		}
		<-srv.Canceled
	}
}
