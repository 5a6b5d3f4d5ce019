package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/fakeprovider"
)

// Chat against a model provider: the scripted fake speaks OpenAI's wire
// format; everything else is the real server.

func withProvider(srv *fakeprovider.Server, tweak ...func(*config.Config)) func(*config.Config) {
	return func(c *config.Config) {
		c.LLM.Provider, c.LLM.BaseURL, c.LLM.Model = "openai", srv.URL, "gpt-test"
		c.LLM.RetryBase, c.LLM.RetryMax = config.Duration(time.Millisecond), config.Duration(time.Millisecond)
		c.Evaluation.Mode = "heuristic" // only chat talks to the model
		for _, f := range tweak {
			f(c)
		}
	}
}

// chatRequests are the provider's chat requests that answer a chat (the
// tiers' structured calls, with a response_format, left out).
func chatRequests(srv *fakeprovider.Server) []fakeprovider.Request {
	var out []fakeprovider.Request
	for _, r := range srv.Requests() {
		if _, structured := r.JSON()["response_format"]; !structured && r.Path == "/chat/completions" {
			out = append(out, r)
		}
	}
	return out
}

func TestRecalledMemoriesReachTheProvider(t *testing.T) {
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply {
		return fakeprovider.Reply{Tokens: []string{"It hangs ", "by the door."}, Finish: "length", Model: "gpt-test-0601"}
	})
	defer srv.Close()
	h := newHarness(t, withProvider(srv))
	id := h.newSona("alice")
	h.insertText(id, "The shed key hangs by the door.")
	h.insertText(id, "Maya's birthday is on the 3rd of May.")

	out := h.post("/sona/"+id+"/chat", map[string]any{"content": "Where is the shed key?"}).obj(t, 200)
	resp := object(t, out["response"])
	if str(t, resp["content"]) != "It hangs by the door." || str(t, resp["model"]) != "gpt-test-0601" || str(t, resp["stop_reason"]) != "maxTokens" {
		t.Fatalf("response = %v", resp)
	}
	reqs := chatRequests(srv)
	if len(reqs) != 1 {
		t.Fatalf("%d chat requests", len(reqs))
	}
	body := string(reqs[0].Body)
	if !strings.Contains(body, "The shed key hangs by the door.") || !strings.Contains(body, "Where is the shed key?") {
		t.Fatalf("the recalled memory or the input is missing from the provider's request: %s", body)
	}
	// The response memory records the model and the stop reason.
	data := object(t, h.memory(str(t, resp["cid"]))["data"])
	part := object(t, array(t, data["parts"])[0])
	if str(t, part["model"]) != "gpt-test-0601" || str(t, data["stop_reason"]) != "maxTokens" || str(t, part["content"]) != "It hangs by the door." {
		t.Fatalf("response memory = %v", data)
	}
	metrics := string(h.get("/metrics").body)
	for _, want := range []string{
		`memoria_llm_calls_total{model="gpt-test",op="complete",provider="openai"}`,
		`memoria_llm_tokens_total{kind="completion",model="gpt-test",provider="openai"}`,
		`memoria_llm_breaker_state{model="gpt-test",provider="openai"} 0`,
		`memoria_llm_queue_wait_seconds_count{model="gpt-test",provider="openai"}`,
		`memoria_llm_latency_seconds_bucket{model="gpt-test",op="complete",provider="openai"`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// sseEvents reads a server-sent event stream into (event, data) pairs.
func sseEvents(t *testing.T, body []byte) [][2]string {
	t.Helper()
	var out [][2]string
	for _, block := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
		var ev [2]string
		for _, line := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				ev[0] = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				ev[1] += v
			}
		}
		out = append(out, ev)
	}
	return out
}

func TestChatStreams(t *testing.T) {
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply {
		return fakeprovider.Reply{Tokens: []string{"In", " the", " blue", " shed."}}
	})
	defer srv.Close()
	h := newHarness(t, withProvider(srv))
	id := h.newSona("alice")
	for _, how := range []struct {
		body   map[string]any
		accept string
	}{
		{map[string]any{"content": "Where is my bicycle?", "stream": true}, ""},
		{map[string]any{"content": "Where is my bicycle now?"}, "text/event-stream"},
	} {
		before := h.sonaLength(id)
		r := h.do("POST", "/sona/"+id+"/chat", how.body, "Accept", how.accept)
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%d %s: %s", r.status, r.header.Get("Content-Type"), r.body)
		}
		events := sseEvents(t, r.body)
		var tokens string
		for _, ev := range events[:len(events)-1] {
			if ev[0] != "token" {
				t.Fatalf("event %v before done", ev)
			}
			var tok struct{ Content string }
			if err := json.Unmarshal([]byte(ev[1]), &tok); err != nil {
				t.Fatal(err)
			}
			tokens += tok.Content
		}
		if len(events) != 5 || tokens != "In the blue shed." || events[4][0] != "done" {
			t.Fatalf("events %v", events)
		}
		done := decodeJSON(t, []byte(events[4][1])).(map[string]any)
		resp := object(t, done["response"])
		if str(t, resp["content"]) != "In the blue shed." {
			t.Fatalf("done = %v", done)
		}
		// The full response is stored once the stream ends.
		data := object(t, h.memory(str(t, resp["cid"]))["data"])
		if str(t, object(t, array(t, data["parts"])[0])["content"]) != "In the blue shed." || h.sonaLength(id) != before+2 {
			t.Fatalf("stored %v, chain %d → %d", data, before, h.sonaLength(id))
		}
	}
	// query does not stream.
	wantError(t, h.post("/sona/"+id+"/query", map[string]any{"content": "x", "stream": true}), 400, "invalid")
}

func TestOfflineModelStreamsWordByWord(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("bob")
	h.insertText(id, "The blue shed holds my bicycle.")
	r := h.do("POST", "/sona/"+id+"/chat", map[string]any{"content": "Where is my bicycle?", "stream": true})
	events := sseEvents(t, r.body)
	if r.status != 200 || len(events) < 4 || events[len(events)-1][0] != "done" {
		t.Fatalf("%d: %s", r.status, r.body)
	}
	if !strings.Contains(string(r.body), `"content":" bicycle."`) {
		t.Fatalf("not word by word: %s", r.body)
	}
}

func TestFailingProviderKeepsTheInputAndOpensTheBreaker(t *testing.T) {
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply { return fakeprovider.Reply{Status: 500} })
	defer srv.Close()
	h := newHarness(t, withProvider(srv, func(c *config.Config) {
		c.LLM.MaxRetries, c.LLM.BreakerFailures, c.LLM.BreakerCooldown = 2, 3, config.Duration(time.Hour)
	}))
	id := h.newSona("alice")

	// 500 × 3: the step fails, its input stays, no response is written.
	r := h.post("/sona/"+id+"/chat", map[string]any{"content": "Hello?"})
	wantError(t, r, 502, "llm_failed")
	if !strings.Contains(string(r.body), "openai answered 500") || !strings.Contains(string(r.body), "after 3 attempts") {
		t.Fatalf("the client does not learn what failed: %s", r.body)
	}
	if n := h.sonaLength(id); n != 1 {
		t.Fatalf("chain length %d, want 1 (the input only)", n)
	}
	items := array(t, h.get("/memories/list?sona="+id).obj(t, 200)["items"])
	if len(items) != 1 || str(t, object(t, object(t, items[0])["data"])["content"]) != "Hello?" {
		t.Fatalf("chain = %v", items)
	}
	// The breaker is open: 503 at once, nothing written, the provider not asked.
	calls := srv.Count()
	start := time.Now()
	r = h.post("/sona/"+id+"/chat", map[string]any{"content": "Still there?"})
	wantError(t, r, 503, "llm_unavailable")
	if !strings.Contains(string(r.body), "failed 3 times in a row") || time.Since(start) > 5*time.Second {
		t.Fatalf("%s after %s", r.body, time.Since(start))
	}
	r = h.do("POST", "/sona/"+id+"/chat", map[string]any{"content": "Streaming?", "stream": true})
	wantError(t, r, 503, "llm_unavailable")
	if srv.Count() != calls || h.sonaLength(id) != 1 {
		t.Fatalf("the open breaker let %d calls through; chain %d", srv.Count()-calls, h.sonaLength(id))
	}
	if !strings.Contains(string(h.get("/metrics").body), `memoria_llm_breaker_state{model="gpt-test",provider="openai"} 2`) {
		t.Fatal("breaker state not in metrics")
	}
}

func TestClientDisconnectCancelsTheModelCall(t *testing.T) {
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply { return fakeprovider.Reply{Hang: true} })
	defer srv.Close()
	h := newHarness(t, withProvider(srv))
	id := h.newSona("alice")
	for _, stream := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		raw, _ := json.Marshal(map[string]any{"content": "Think hard.", "stream": stream})
		req, _ := http.NewRequestWithContext(ctx, "POST", h.url+"/sona/"+id+"/chat", bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := h.hc.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		select {
		case <-srv.Arrived:
		case <-time.After(20 * time.Second):
			t.Fatal("the model was not called")
		}
		cancel()
		select {
		case <-srv.Canceled:
		case <-time.After(20 * time.Second):
			t.Fatalf("stream=%v: the client went away but the model call goes on", stream)
		}
		<-done
	}
}
