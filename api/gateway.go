package api

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"

	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/gateway"
	"github.com/ipfs/go-cid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/memoria-ai/memoria/memory"
)

// The IPFS trustless gateway (GET and HEAD /ipfs/{cid}[/path]) is boxo's
// gateway handler over an offline block service on the store's blocks
// (Blockstore): application/vnd.ipld.raw and application/vnd.ipld.car
// (dag-scope, order=dfs, dups), by Accept or ?format=, path traversal
// through dag-cbor links, ETag, immutable caching, 406 for anything a
// trustless gateway does not serve. Deserialized responses are off; the
// only change to boxo's answers is that errors become this API's JSON
// errors.

// newGateway builds the trustless gateway over store. Its Prometheus
// metrics go to reg (a private registry when nil).
func newGateway(store *memory.Store, reg prometheus.Registerer) (http.Handler, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	bs := blockservice.New(NewBlockstore(store), nil) // nil exchange: offline, this store only
	backend, err := gateway.NewBlocksBackend(bs)
	if err != nil {
		return nil, err
	}
	h := gateway.NewHandler(gateway.Config{
		DeserializedResponses: false,
		DisableHTMLErrors:     true,
		NoDNSLink:             true,
		MetricsRegistry:       reg,
	}, backend)
	return gatewayErrors(h, store), nil
}

// gatewayErrors checks the CID before boxo sees the request — a
// malformed one is a 400, one this store does not hold a 404 (boxo,
// built for gateways that fetch from a network, would start a CAR
// answer and cut it short) — and turns boxo's text/plain errors into
// JSON errors.
func gatewayErrors(h http.Handler, store *memory.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/ipfs/"), "/")
		c, err := cid.Decode(first)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_cid", fmt.Sprintf("malformed CID %q: %v", first, err))
			return
		}
		if ok, err := store.HasBlock(c); err != nil {
			writeError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		} else if !ok {
			writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("block %s is not in this store", c))
			return
		}
		jw := &jsonErrorWriter{ResponseWriter: w}
		h.ServeHTTP(jw, r)
		jw.finish()
	})
}

// jsonErrorWriter holds back an error answer (status >= 400) and writes
// it as {"error":{"code","message"}} when the handler is done.
type jsonErrorWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (j *jsonErrorWriter) WriteHeader(code int) {
	if code >= 400 && j.status == 0 {
		j.status = code
		return
	}
	j.ResponseWriter.WriteHeader(code)
}

func (j *jsonErrorWriter) Write(b []byte) (int, error) {
	if j.status != 0 {
		return j.body.Write(b)
	}
	return j.ResponseWriter.Write(b)
}

// Flush passes through, except while an error is held back.
func (j *jsonErrorWriter) Flush() {
	if f, ok := j.ResponseWriter.(http.Flusher); ok && j.status == 0 {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (j *jsonErrorWriter) Unwrap() http.ResponseWriter { return j.ResponseWriter }

func (j *jsonErrorWriter) finish() {
	if j.status == 0 {
		return
	}
	h := j.Header()
	for _, k := range []string{"Content-Length", "Content-Type", "X-Content-Type-Options", "Etag", "Cache-Control", "Content-Disposition"} {
		h.Del(k)
	}
	msg := strings.TrimSpace(j.body.String())
	if msg == "" {
		msg = http.StatusText(j.status)
	}
	writeError(j.ResponseWriter, j.status, gatewayCode(j.status), msg)
}

func gatewayCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusNotAcceptable:
		return "not_acceptable"
	case http.StatusGone:
		return "gone"
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
