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
