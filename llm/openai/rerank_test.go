package openai_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/internal/fakeprovider"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/llm/openai"
)

var rerankDocs = []string{"The shed key hangs by the door.", "Maya's birthday is in May.", "The bicycle is in the blue shed."}

func scriptedRerank(reply fakeprovider.Reply) *fakeprovider.Server {
	return fakeprovider.Rerank(func(int, fakeprovider.Request) fakeprovider.Reply { return reply })
}

// sameScores compares score lists, NaN equal to NaN.
func sameScores(got, want []float64) bool {
	return slices.EqualFunc(got, want, func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) })
}

func TestAPISpeaksTheRerankFormat(t *testing.T) {
	srv := scriptedRerank(fakeprovider.Reply{Scores: []float64{0.1, 0.02, 0.93}})
	defer srv.Close()
	r, err := openai.NewReranker(openai.Options{BaseURL: srv.URL, APIKey: "sk-test", Model: "bge-reranker-v2-m3"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Rerank(context.Background(), "Where is the key?", rerankDocs)
	if err != nil {
		t.Fatal(err)
	}
	if !sameScores(got, []float64{0.1, 0.02, 0.93}) {
		t.Fatalf("scores %v", got)
	}
	req := srv.Requests()[0]
	if req.Path != "/rerank" || req.Header.Get("Authorization") != "Bearer sk-test" || req.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("request %s %v", req.Path, req.Header)
	}
	if err := req.JSONEquals(`{"model":"bge-reranker-v2-m3","query":"Where is the key?","documents":["The shed key hangs by the door.","Maya's birthday is in May.","The bicycle is in the blue shed."],"top_n":3}`); err != nil {
		t.Fatal(err)
	}
}

func TestTEISpeaksItsFormat(t *testing.T) {
	srv := scriptedRerank(fakeprovider.Reply{Scores: []float64{0.7, 0.9, 0.1}})
	defer srv.Close()
	r, err := openai.NewTEIReranker(openai.Options{BaseURL: srv.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Rerank(context.Background(), "Where is the key?", rerankDocs)
	if err != nil {
		t.Fatal(err)
	}
	if !sameScores(got, []float64{0.7, 0.9, 0.1}) {
		t.Fatalf("scores %v", got)
	}
	req := srv.Requests()[0]
	if req.Path != "/rerank" || req.Header.Get("Authorization") != "" {
		t.Fatalf("request %s %v (a local server needs no key)", req.Path, req.Header)
	}
	if err := req.JSONEquals(`{"query":"Where is the key?","texts":["The shed key hangs by the door.","Maya's birthday is in May.","The bicycle is in the blue shed."],"truncate":true}`); err != nil {
		t.Fatal(err)
	}
}

func TestRerankDocumentLeftOutIsNaN(t *testing.T) {
	srv := scriptedRerank(fakeprovider.Reply{Scores: []float64{0.4, math.NaN(), 0.8}})
	defer srv.Close()
	r, _ := openai.NewReranker(openai.Options{BaseURL: srv.URL, Model: "m"})
	got, err := r.Rerank(context.Background(), "q", rerankDocs)
	if err != nil || !sameScores(got, []float64{0.4, math.NaN(), 0.8}) {
		t.Fatalf("scores %v, %v", got, err)
	}
}

func TestRerankRepliesThatAreNotTheFormat(t *testing.T) {
	for _, tc := range []struct{ name, raw string }{
		{"index out of range", `{"results":[{"index":3,"relevance_score":0.5}]}`},
		{"negative index", `{"results":[{"index":-1,"relevance_score":0.5}]}`},
		{"index twice", `{"results":[{"index":0,"relevance_score":0.5},{"index":0,"relevance_score":0.4}]}`},
		{"no score", `{"results":[{"index":0,"score":0.5}]}`},
		{"no results", `{"results":[]}`},
		{"not JSON", `<html>hello</html>`},
		{"TEI's reply to the rerank format", `[{"index":0,"score":0.5}]`},
	} {
		srv := scriptedRerank(fakeprovider.Reply{Raw: tc.raw})
		r, _ := openai.NewReranker(openai.Options{BaseURL: srv.URL, Model: "m"})
		_, err := r.Rerank(context.Background(), "q", rerankDocs)
		if !errors.Is(err, llm.ErrMalformed) {
			t.Errorf("%s: err = %v, want malformed", tc.name, err)
		}
		srv.Close()
	}
}

func TestRerankErrorRepliesKeepTheirStatus(t *testing.T) {
	for _, tei := range []bool{false, true} {
		srv := scriptedRerank(fakeprovider.Reply{Status: 503})
		var r llm.Reranker
		if tei {
			r, _ = openai.NewTEIReranker(openai.Options{BaseURL: srv.URL})
		} else {
			r, _ = openai.NewReranker(openai.Options{BaseURL: srv.URL, Model: "m"})
		}
		_, err := r.Rerank(context.Background(), "q", rerankDocs)
		var ae *llm.APIError
		if !errors.As(err, &ae) || ae.Status != 503 || !strings.Contains(ae.Message, "scripted 503") {
			t.Errorf("tei=%v: err = %v", tei, err)
		}
		srv.Close()
	}
}

func TestNewRerankerNeedsItsSettings(t *testing.T) {
	if _, err := openai.NewReranker(openai.Options{Model: "m"}); err == nil {
		t.Error("NewReranker without a base URL")
	}
	if _, err := openai.NewReranker(openai.Options{BaseURL: "http://localhost:1"}); err == nil {
		t.Error("NewReranker without a model")
	}
	if _, err := openai.NewTEIReranker(openai.Options{}); err == nil {
		t.Error("NewTEIReranker without a base URL")
	}
}
