package api

import (
	"bytes"
	"mime"
	"net/http"
	"strings"
)

// jsonErrors passes h's answers through, except its plain-text errors
// (status >= 400 with a body that is not JSON), which it writes as this
// API's JSON errors with the same status: handlers of libraries (the MCP
// SDK's) answer some errors with http.Error.
func jsonErrors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		jw := &plainErrorWriter{ResponseWriter: w}
		h.ServeHTTP(jw, r)
		jw.finish()
	})
}

// plainErrorWriter holds back a plain-text error answer and rewrites it
// as JSON when the handler is done.
type plainErrorWriter struct {
	http.ResponseWriter
	status int // a held-back error's status
	body   bytes.Buffer
}

func (j *plainErrorWriter) WriteHeader(code int) {
	if code >= 400 && j.status == 0 && !isJSON(j.Header().Get("Content-Type")) {
		j.status = code
		return
	}
	j.ResponseWriter.WriteHeader(code)
}

func (j *plainErrorWriter) Write(b []byte) (int, error) {
	if j.status != 0 {
		return j.body.Write(b)
	}
	return j.ResponseWriter.Write(b)
}

// Flush passes through, except while an error is held back.
func (j *plainErrorWriter) Flush() {
	if f, ok := j.ResponseWriter.(http.Flusher); ok && j.status == 0 {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (j *plainErrorWriter) Unwrap() http.ResponseWriter { return j.ResponseWriter }

func (j *plainErrorWriter) finish() {
	if j.status == 0 {
		return
	}
	h := j.Header()
	for _, k := range []string{"Content-Length", "Content-Type", "X-Content-Type-Options"} {
		h.Del(k)
	}
	msg := strings.TrimSpace(j.body.String())
	if msg == "" {
		msg = http.StatusText(j.status)
	}
	writeError(j.ResponseWriter, j.status, errorCode(j.status), msg)
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// errorCode is the code of an error answer that has only its status.
func errorCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusNotAcceptable:
		return "not_acceptable"
	case http.StatusGone:
		return "gone"
	case http.StatusUnsupportedMediaType:
		return "unsupported_media_type"
	case http.StatusTooManyRequests:
		return "too_many_requests"
	case http.StatusNotImplemented:
		return "not_implemented"
	case http.StatusGatewayTimeout:
		return "timeout"
	case http.StatusServiceUnavailable:
		return "unavailable"
	case http.StatusRequestedRangeNotSatisfiable:
		return "range_not_satisfiable"
	}
	if status >= 500 {
		return "internal"
	}
	return strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_")
}
