package wire

import (
	"strings"
	"testing"
)

func TestErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"OpenAI", 400, `{"error":{"message":"Invalid 'messages'","type":"invalid_request_error","param":"messages","code":null}}`,
			"invalid_request_error: Invalid 'messages'"},
		{"Anthropic", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`,
			"overloaded_error: Overloaded"},
		{"a message with no type", 401, `{"error":{"message":"Incorrect API key provided"}}`, "Incorrect API key provided"},
		{"Ollama's bare string", 404, `{"error":"model \"llama9\" not found, try pulling it first"}`, `model "llama9" not found, try pulling it first`},
		{"vLLM's top-level message", 400, `{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}`,
			"BadRequestError: max_tokens is too large"},
		{"a field of another shape", 400, `{"error":{"message":"bad","type":"invalid_request_error","param":{"x":1},"code":7}}`, "invalid_request_error: bad"},
		{"an HTML page from a proxy", 502, "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>nginx</body></html>",
			"Bad Gateway (an HTML page, not the provider's API)"},
		{"plain text", 503, "upstream connect error or disconnect/reset before headers\nmore", "Service Unavailable: upstream connect error or disconnect/reset before headers"},
		{"an empty body", 500, "", "Internal Server Error"},
		{"JSON that is no error object", 500, `{"detail":"x"}`, `Internal Server Error: {"detail":"x"}`},
		{"a status with no text", 599, "", "status 599"},
		{"a long line is cut", 500, strings.Repeat("y", 300), "Internal Server Error: " + strings.Repeat("y", 200) + "…"},
	} {
		if got := errorMessage(tc.status, []byte(tc.body)); got != tc.want {
			t.Errorf("%s: message %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestStreamError(t *testing.T) {
	c := &Client{Provider: "p"}
	for _, tc := range []struct {
		name string
		ev   Event
		want int // 0: no error
	}{
		{"an OpenAI chunk", Event{Data: `{"choices":[{"index":0,"delta":{"content":"error"}}]}`}, 0},
		{"an Anthropic delta", Event{Name: "content_block_delta", Data: `{"type":"content_block_delta","delta":{"type":"text_delta","text":"\"error\""}}`}, 0},
		{"OpenAI's error frame", Event{Data: `{"error":{"message":"The server had an error","type":"server_error"}}`}, 500},
		{"a rate limit", Event{Data: `{"error":{"message":"slow down","type":"rate_limit_exceeded"}}`}, 429},
		{"vLLM's numeric code wins", Event{Data: `{"error":{"message":"too long","type":"BadRequestError","code":400}}`}, 400},
		{"Anthropic's overload", Event{Name: "error", Data: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}, 529},
		{"an unknown type", Event{Name: "error", Data: `{"type":"error","error":{"type":"new_error","message":"?"}}`}, 500},
		{"an error event that is not JSON", Event{Name: "error", Data: "boom"}, 500},
	} {
		ae := c.streamError(tc.ev)
		switch {
		case tc.want == 0 && ae != nil:
			t.Errorf("%s: error %v from an event that is none", tc.name, ae)
		case tc.want != 0 && (ae == nil || ae.Status != tc.want || ae.Provider != "p"):
			t.Errorf("%s: error %#v, want status %d", tc.name, ae, tc.want)
		}
	}
}
