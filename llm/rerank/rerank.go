// Package rerank holds the rerankers recall may use after fusion
// (recall.rerank, llm.Reranker), spoken over net/http in the servers'
// documented formats:
//
//   - API: POST {base_url}/rerank in the Jina/Cohere format —
//     {model, query, documents, top_n} → {results: [{index,
//     relevance_score}]} — served by vLLM, llama.cpp's server, Jina and
//     Cohere (v2);
//   - TEI: POST {base_url}/rerank in HuggingFace text-embeddings-inference's
//     format — {query, texts, truncate} → [{index, score}];
//   - Chat: a chat model (any llm.LLM, e.g. llm/openai) asked to score
//     every document 0–10, its reply parsed leniently (chat.go).
//
// Like the provider clients they never retry: the resilience guard the
// providers package puts around them bounds the call and opens a breaker.
// Errors are *llm.APIError (an HTTP error reply), llm.ErrMalformed (a
// reply that is not the format) or the context's error.
package rerank

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/llm/internal/wire"
)

// Options configure an HTTP reranker.
type Options struct {
	// BaseURL of the server: /rerank is appended (http://localhost:8080,
	// http://localhost:8000/v1, https://api.jina.ai/v1).
	BaseURL string
	// APIKey is sent as a bearer token (local servers need none).
	APIKey string
	// Model names the reranker model (TEI serves one and ignores it).
	Model string
	// HTTPClient replaces http.DefaultClient.
	HTTPClient *http.Client
	// Now is the clock Retry-After dates are read against.
	Now func() time.Time
}

func (o Options) client(provider string) *wire.Client {
	c := &wire.Client{Provider: provider, BaseURL: o.BaseURL, Header: http.Header{}, HTTP: o.HTTPClient, Now: o.Now}
	if o.APIKey != "" {
		c.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	return c
}

// API is a reranker speaking the Jina/Cohere /rerank format.
type API struct {
	c     *wire.Client
	model string
}

// TEI is a reranker speaking text-embeddings-inference's /rerank format.
type TEI struct{ c *wire.Client }

var (
	_ llm.Reranker = (*API)(nil)
	_ llm.Reranker = (*TEI)(nil)
)

// NewAPI returns a client of a Jina/Cohere-format /rerank endpoint.
func NewAPI(o Options) (*API, error) {
	if o.BaseURL == "" {
		return nil, errors.New("rerank: a base URL is needed (recall.rerank.base_url)")
	}
	if o.Model == "" {
		return nil, errors.New("rerank: a model is needed (recall.rerank.model)")
	}
	return &API{c: o.client("rerank"), model: o.Model}, nil
}

// NewTEI returns a client of text-embeddings-inference's /rerank.
func NewTEI(o Options) (*TEI, error) {
	if o.BaseURL == "" {
		return nil, errors.New("rerank: a base URL is needed (recall.rerank.base_url)")
	}
	return &TEI{c: o.client("tei")}, nil
}

// apiRequest is the body of the Jina/Cohere POST /rerank; top_n asks for
// every document's score.
type apiRequest struct {
	Model     string   `json:"model"`
	Query     string   `json:"query"`
	Documents []string `json:"documents"`
	TopN      int      `json:"top_n"`
}

type apiResponse struct {
	Results []struct {
		Index          int      `json:"index"`
		RelevanceScore *float64 `json:"relevance_score"`
	} `json:"results"`
}

// Rerank scores documents against query.
func (a *API) Rerank(ctx context.Context, query string, documents []string) ([]float64, error) {
	if err := ctx.Err(); err != nil || len(documents) == 0 {
		return nil, err
	}
	var res apiResponse
	if err := a.c.PostJSON(ctx, "/rerank", apiRequest{Model: a.model, Query: query, Documents: documents, TopN: len(documents)}, &res); err != nil {
		return nil, err
	}
	s := newScores(a.c.Provider, len(documents))
	for _, r := range res.Results {
		if r.RelevanceScore == nil {
			return nil, fmt.Errorf("%w: rerank: a result without relevance_score", llm.ErrMalformed)
		}
		if err := s.set(r.Index, *r.RelevanceScore); err != nil {
			return nil, err
		}
	}
	return s.done()
}

// teiRequest is the body of TEI's POST /rerank; truncate cuts a text
// longer than the model takes instead of refusing the call.
type teiRequest struct {
	Query    string   `json:"query"`
	Texts    []string `json:"texts"`
	Truncate bool     `json:"truncate"`
}

type teiResult struct {
	Index int      `json:"index"`
	Score *float64 `json:"score"`
}

// Rerank scores documents against query.
func (t *TEI) Rerank(ctx context.Context, query string, documents []string) ([]float64, error) {
	if err := ctx.Err(); err != nil || len(documents) == 0 {
		return nil, err
	}
	var res []teiResult
	if err := t.c.PostJSON(ctx, "/rerank", teiRequest{Query: query, Texts: documents, Truncate: true}, &res); err != nil {
		return nil, err
	}
	s := newScores(t.c.Provider, len(documents))
	for _, r := range res {
		if r.Score == nil {
			return nil, fmt.Errorf("%w: tei: a result without score", llm.ErrMalformed)
		}
		if err := s.set(r.Index, *r.Score); err != nil {
			return nil, err
		}
	}
	return s.done()
}

// scores collects a reply's scores by document index: each index in
// range at most once, each score finite; a document the reply leaves out
// stays NaN, a reply with none is malformed.
type scores struct {
	provider string
	v        []float64
	n        int
}

func newScores(provider string, n int) *scores {
	s := &scores{provider: provider, v: make([]float64, n)}
	for i := range s.v {
		s.v[i] = math.NaN()
	}
	return s
}

func (s *scores) set(i int, score float64) error {
	switch {
	case i < 0 || i >= len(s.v):
		return fmt.Errorf("%w: %s: document index %d of %d", llm.ErrMalformed, s.provider, i, len(s.v))
	case !math.IsNaN(s.v[i]):
		return fmt.Errorf("%w: %s: document %d scored twice", llm.ErrMalformed, s.provider, i)
	case math.IsNaN(score) || math.IsInf(score, 0):
		return fmt.Errorf("%w: %s: document %d scored %v", llm.ErrMalformed, s.provider, i, score)
	}
	s.v[i] = score
	s.n++
	return nil
}

func (s *scores) done() ([]float64, error) {
	if s.n == 0 {
		return nil, fmt.Errorf("%w: %s: no document scored", llm.ErrMalformed, s.provider)
	}
	return s.v, nil
}
