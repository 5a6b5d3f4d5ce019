package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/messages"
)

// acceptsEventStream: the client asked for server-sent events.
func acceptsEventStream(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
			return true
		}
	}
	return false
}

// chatStream runs a chat step and streams the reply as server-sent
// events:
//
//	event: token   data: {"content":"…"}            a piece of the reply, as generated
//	event: done    data: {"input",…,"response",…}   the stored step, as chat answers it
//	event: error   data: {"error":{"code","message"}}
//
// The stream starts with the first token: a step that fails before one
// (a bad sona, an open circuit breaker, a provider that refused) answers
// with a plain JSON error and its status, like chat. A failure after it
// ends the stream with an error event; the input memory is kept and no
// response memory is written. A client that goes away cancels the model
// call.
func (s *Server) chatStream(w http.ResponseWriter, r *http.Request, rec *messages.Sona, req *messages.ChatRequest) {
	if err := s.chatAllowed(r.Context(), rec, req); err != nil {
		s.fail(w, err)
		return
	}
	ctx, unanswered := actors.CollectUnanswered(r.Context())
	sink := &sseSink{w: w, unanswered: unanswered}
	if _, ok := w.(http.Flusher); !ok {
		s.fail(w, errors.New("api: the connection cannot stream"))
		return
	}
	resp, err := s.sys.AdvanceStream(ctx, rec.Uuid, req, sink.token)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	sink.closed = true
	if err != nil {
		status, code, msg := s.classify(r.Context(), err)
		if !sink.started {
			writeError(w, status, code, msg)
			return
		}
		body, _ := MarshalJSON(&messages.ErrorResponse{Error: &messages.ErrorBody{Code: code, Message: msg}})
		sink.event("error", body)
		return
	}
	body, err := MarshalJSON(resp)
	if err != nil {
		body = []byte(`{"error":{"code":"internal","message":"response cannot be rendered"}}`)
	}
	sink.start()
	sink.event("done", body)
}

// sseSink writes server-sent events; token is called from the step's
// goroutine, the final event from the handler's.
type sseSink struct {
	w       http.ResponseWriter
	mu      sync.Mutex
	started bool
	closed  bool // the handler has returned or is writing the last event
	failed  error
	// unanswered lists the members the step's recall left out (set in
	// the header: the recall is over before the first token).
	unanswered func() []string
}

func (k *sseSink) start() {
	if k.started {
		return
	}
	k.started = true
	h := k.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	setUnanswered(k.w, k.unanswered())
	k.w.WriteHeader(http.StatusOK)
}

func (k *sseSink) event(name string, data []byte) {
	if k.failed != nil {
		return
	}
	if _, err := fmt.Fprintf(k.w, "event: %s\ndata: %s\n\n", name, data); err != nil {
		k.failed = err
		return
	}
	k.w.(http.Flusher).Flush()
}

func (k *sseSink) token(t string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return errors.New("api: the stream is closed")
	}
	k.start()
	data, _ := json.Marshal(struct {
		Content string `json:"content"`
	}{t})
	k.event("token", data)
	return k.failed
}
