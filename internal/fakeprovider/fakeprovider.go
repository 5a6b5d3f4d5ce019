// Package fakeprovider serves the wire formats of the remote model APIs
// Memoria talks to — OpenAI chat completions (plain and streamed) and
// embeddings, Anthropic messages (plain and streamed), the /rerank of
// vLLM, llama.cpp's server and Jina, and HuggingFace TEI's — from an
// httptest.Server whose replies a test scripts. It is for tests only:
// the providers run against it unchanged, with no network.
package fakeprovider

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Reply scripts one answer.
type Reply struct {
	// Status other than 0 and 200 answers with that status and an error
	// body in the provider's format (or Raw when set).
	Status int
	// Header is added to the answer (e.g. Retry-After).
	Header map[string]string
	// Raw, when set, is written as the body as it is (malformed JSON).
	Raw string
	// Tokens are the pieces of the reply (streamed one event each; joined
	// for a plain answer).
	Tokens []string
	// Finish is the finish or stop reason in the provider's words
	// (default stop / end_turn).
	Finish string
	// Model is the model named in the answer (default "fake-model").
	Model string
	// Hang holds the answer until the client goes away.
	Hang bool
	// Vectors answer an embeddings request.
	Vectors [][]float64
	// Scores answer a rerank request: document i's relevance (a NaN
	// leaves it out of the results).
	Scores []float64
	// Events, when set, is the body of a 200 text/event-stream answer
	// written as it is: a test's own events, comments and cuts.
	Events string
	// Abort, with Events, breaks the connection after them, in the middle
	// of the chunked body (a stream cut off in transfer).
	Abort bool
}

// Request is one request the server saw.
type Request struct {
	Path   string
	Header http.Header
	Body   []byte
}

// JSON decodes the body.
func (r Request) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// JSONEquals reports, as an error showing both, whether the body is not
// the JSON document want (key order and spacing aside).
func (r Request) JSONEquals(want string) error {
	var got, exp any
	if err := json.Unmarshal(r.Body, &got); err != nil {
		return fmt.Errorf("the body is not JSON: %v: %s", err, r.Body)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		return fmt.Errorf("the wanted body is not JSON: %v", err)
	}
	g, _ := json.Marshal(got)
	e, _ := json.Marshal(exp)
	if string(g) != string(e) {
		return fmt.Errorf("body\n got %s\nwant %s", g, e)
	}
	return nil
}

// Server is a scripted provider.
type Server struct {
	*httptest.Server
	// Script gives the reply to the n-th request (from 0).
	Script func(n int, req Request) Reply

	mu       sync.Mutex
	requests []Request
	n        atomic.Int64
	// Canceled receives a value each time a hanging request's client went
	// away.
	Canceled chan struct{}
	// Arrived receives a value when a request arrives (buffered; never
	// blocks the server).
	Arrived chan struct{}
}

// Requests returns the requests seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count is how many requests arrived.
func (s *Server) Count() int { return int(s.n.Load()) }

func newServer(script func(int, Request) Reply, serve func(*Server, http.ResponseWriter, *http.Request, Request, Reply)) *Server {
	s := &Server{Script: script, Canceled: make(chan struct{}, 64), Arrived: make(chan struct{}, 1024)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
		s.mu.Lock()
		s.requests = append(s.requests, req)
		s.mu.Unlock()
		n := int(s.n.Add(1)) - 1
		select {
		case s.Arrived <- struct{}{}:
		default:
		}
		reply := s.Script(n, req)
		for k, v := range reply.Header {
			w.Header().Set(k, v)
		}
		if reply.Hang {
			<-r.Context().Done()
			s.Canceled <- struct{}{}
			return
		}
		if reply.Events != "" {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, reply.Events)
			w.(http.Flusher).Flush()
			if reply.Abort {
				panic(http.ErrAbortHandler) // net/http drops the connection mid-body
			}
			return
		}
		if reply.Raw != "" && (reply.Status == 0 || reply.Status == 200) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(reply.Raw))
			return
		}
		serve(s, w, r, req, reply)
	}))
	return s
}

func model(r Reply) string {
	if r.Model != "" {
		return r.Model
	}
	return "fake-model"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func errorBody(w http.ResponseWriter, r Reply, body any) bool {
	if r.Status == 0 || r.Status == 200 {
		return false
	}
	if r.Raw != "" {
		w.WriteHeader(r.Status)
		_, _ = w.Write([]byte(r.Raw))
		return true
	}
	writeJSON(w, r.Status, body)
	return true
}

func sse(w http.ResponseWriter, event string, v any) {
	data, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", data)
	w.(http.Flusher).Flush()
}

// OpenAI serves POST /chat/completions and /embeddings as OpenAI does.
func OpenAI(script func(n int, req Request) Reply) *Server {
	return newServer(script, func(s *Server, w http.ResponseWriter, r *http.Request, req Request, reply Reply) {
		if errorBody(w, reply, map[string]any{"error": map[string]any{"message": fmt.Sprintf("scripted %d", reply.Status), "type": "server_error", "code": nil, "param": nil}}) {
			return
		}
		switch r.URL.Path {
		case "/embeddings":
			data := []map[string]any{}
			for i, v := range reply.Vectors {
				data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": v})
			}
			writeJSON(w, 200, map[string]any{"object": "list", "data": data, "model": model(reply),
				"usage": map[string]any{"prompt_tokens": 3, "total_tokens": 3}})
			return
		case "/chat/completions":
		default:
			writeJSON(w, 404, map[string]any{"error": map[string]any{"message": "no route " + r.URL.Path}})
			return
		}
		finish := reply.Finish
		if finish == "" {
			finish = "stop"
		}
		if stream, _ := req.JSON()["stream"].(bool); stream {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			chunk := func(delta map[string]any, finish any) map[string]any {
				return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model(reply),
					"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
			}
			sse(w, "", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
			for _, t := range reply.Tokens {
				sse(w, "", chunk(map[string]any{"content": t}, nil))
			}
			sse(w, "", chunk(map[string]any{}, finish))
			sse(w, "", map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model(reply),
				"choices": []any{}, "usage": map[string]any{"prompt_tokens": 11, "completion_tokens": len(reply.Tokens), "total_tokens": 11 + len(reply.Tokens)}})
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		writeJSON(w, 200, map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model(reply),
			"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": strings.Join(reply.Tokens, ""), "refusal": nil}}},
			"usage": map[string]any{"prompt_tokens": 11, "completion_tokens": len(reply.Tokens), "total_tokens": 11 + len(reply.Tokens)},
		})
	})
}

// Anthropic serves POST /v1/messages as Anthropic does.
func Anthropic(script func(n int, req Request) Reply) *Server {
	return newServer(script, func(s *Server, w http.ResponseWriter, r *http.Request, req Request, reply Reply) {
		if errorBody(w, reply, map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": fmt.Sprintf("scripted %d", reply.Status)}}) {
			return
		}
		if r.URL.Path != "/v1/messages" {
			writeJSON(w, 404, map[string]any{"type": "error", "error": map[string]any{"type": "not_found_error", "message": r.URL.Path}})
			return
		}
		finish := reply.Finish
		if finish == "" {
			finish = "end_turn"
		}
		usage := map[string]any{"input_tokens": 13, "output_tokens": len(reply.Tokens)}
		if stream, _ := req.JSON()["stream"].(bool); stream {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
				"id": "msg_1", "type": "message", "role": "assistant", "model": model(reply), "content": []any{},
				"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 13, "output_tokens": 0}}})
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, t := range reply.Tokens {
				sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": t}})
			}
			sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
			sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": finish, "stop_sequence": nil},
				"usage": map[string]any{"output_tokens": len(reply.Tokens)}})
			sse(w, "message_stop", map[string]any{"type": "message_stop"})
			return
		}
		writeJSON(w, 200, map[string]any{
			"id": "msg_1", "type": "message", "role": "assistant", "model": model(reply),
			"content":     []any{map[string]any{"type": "text", "text": strings.Join(reply.Tokens, "")}},
			"stop_reason": finish, "stop_sequence": nil, "usage": usage,
		})
	})
}

// RerankDocs are a rerank request's query and documents (the Jina/Cohere
// "documents" or TEI's "texts").
func (r Request) RerankDocs() (query string, docs []string) {
	var body struct {
		Query     string   `json:"query"`
		Documents []string `json:"documents"`
		Texts     []string `json:"texts"`
	}
	_ = json.Unmarshal(r.Body, &body)
	return body.Query, append(body.Documents, body.Texts...)
}

// Rerank serves POST /rerank as vLLM, llama.cpp's server and Jina do
// (a body with "documents": {"model", "results": [{"index",
// "relevance_score"}]} best first, at most top_n of them), or as
// HuggingFace TEI does (a body with "texts": [{"index", "score"}] best
// first); an error status answers with TEI's or vLLM's error body.
func Rerank(script func(n int, req Request) Reply) *Server {
	return newServer(script, func(s *Server, w http.ResponseWriter, r *http.Request, req Request, reply Reply) {
		_, tei := req.JSON()["texts"]
		if tei && errorBody(w, reply, map[string]any{"error": fmt.Sprintf("scripted %d", reply.Status), "error_type": "Backend"}) ||
			!tei && errorBody(w, reply, map[string]any{"object": "error", "message": fmt.Sprintf("scripted %d", reply.Status), "type": "BadRequestError", "code": reply.Status}) {
			return
		}
		if r.URL.Path != "/rerank" {
			writeJSON(w, 404, map[string]any{"error": "no route " + r.URL.Path})
			return
		}
		order := []int{}
		for i, v := range reply.Scores {
			if !math.IsNaN(v) {
				order = append(order, i)
			}
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(reply.Scores[b], reply.Scores[a]) })
		if tei {
			out := []map[string]any{}
			for _, i := range order {
				out = append(out, map[string]any{"index": i, "score": reply.Scores[i]})
			}
			writeJSON(w, 200, out)
			return
		}
		if n, ok := req.JSON()["top_n"].(float64); ok && int(n) < len(order) {
			order = order[:int(n)]
		}
		results := []map[string]any{}
		for _, i := range order {
			results = append(results, map[string]any{"index": i, "relevance_score": reply.Scores[i]})
		}
		writeJSON(w, 200, map[string]any{"id": "rerank-1", "model": model(reply), "usage": map[string]any{"total_tokens": 42}, "results": results})
	})
}
