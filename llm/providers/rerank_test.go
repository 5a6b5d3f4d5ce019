package providers_test

import (
	"context"
	"errors"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/fakeprovider"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/llm/providers"
)

func TestReranker(t *testing.T) {
	noEnv := func(string) string { return "" }
	cfg := config.Default()
	if r, err := providers.Reranker(cfg, providers.Options{Getenv: noEnv}); r != nil || err != nil {
		t.Fatalf("off by default: %v, %v", r, err)
	}
	srv := fakeprovider.Rerank(func(int, fakeprovider.Request) fakeprovider.Reply { return fakeprovider.Reply{Status: 503} })
	defer srv.Close()
	cfg.Recall.Rerank = config.Rerank{Provider: config.RerankAPI, BaseURL: srv.URL, Model: "m", APIKeyEnv: "MY_KEY", TopN: 20, Timeout: cfg.Recall.Rerank.Timeout}
	cfg.LLM.MaxRetries = 3
	r, err := providers.Reranker(cfg, providers.Options{Getenv: func(k string) string { return map[string]string{"MY_KEY": "k"}[k] }})
	if err != nil {
		t.Fatal(err)
	}
	var ae *llm.APIError
	if _, err := r.Rerank(context.Background(), "q", []string{"a", "b"}); !errors.As(err, &ae) || ae.Status != 503 {
		t.Fatalf("err = %v", err)
	}
	// A recall does not wait for a retry: one request, though llm.max_retries is 3.
	if n := srv.Count(); n != 1 {
		t.Fatalf("%d requests", n)
	}
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer k" {
		t.Fatalf("Authorization %q", got)
	}
}
