package openai

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/llm/internal/wire"
)

// Reranker is an llm.Reranker over POST {base_url}/rerank in the
// Jina/Cohere format — {model, query, documents, top_n} → {results:
// [{index, relevance_score}]} — which the servers this package talks to
// also serve for reranker models: vLLM, llama.cpp's server; and Jina,
// Cohere (v2).
type Reranker struct {
	c     *wire.Client
	model string
}

// TEIReranker is an llm.Reranker over HuggingFace
// text-embeddings-inference's POST {base_url}/rerank: {query, texts,
// truncate} → [{index, score}].
type TEIReranker struct{ c *wire.Client }

var (
	_ llm.Reranker = (*Reranker)(nil)
	_ llm.Reranker = (*TEIReranker)(nil)
)

// NewReranker returns a client of a Jina/Cohere-format /rerank endpoint
// (a base URL is needed: OpenAI has none).
func NewReranker(o Options) (*Reranker, error) {
	if o.BaseURL == "" {
		return nil, errors.New("openai: a reranker needs a base URL (recall.rerank.base_url)")
	}
	if o.Model == "" {
		return nil, errors.New("openai: a reranker model is needed (recall.rerank.model)")
	}
	return &Reranker{c: o.client(), model: o.Model}, nil
}

// NewTEIReranker returns a client of text-embeddings-inference's /rerank
// (its errors name the provider "tei").
func NewTEIReranker(o Options) (*TEIReranker, error) {
	if o.BaseURL == "" {
		return nil, errors.New("openai: a reranker needs a base URL (recall.rerank.base_url)")
	}
	c := o.client()
	c.Provider = "tei"
	return &TEIReranker{c: c}, nil
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
func (a *Reranker) Rerank(ctx context.Context, query string, documents []string) ([]float64, error) {
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
			return nil, fmt.Errorf("%w: openai: a rerank result without relevance_score", llm.ErrMalformed)
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
func (t *TEIReranker) Rerank(ctx context.Context, query string, documents []string) ([]float64, error) {
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
			return nil, fmt.Errorf("%w: tei: a rerank result without score", llm.ErrMalformed)
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
