package providers_test

import (
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/llm/providers"
)

func TestNew(t *testing.T) {
	noEnv := func(string) string { return "" }
	cfg := config.Default()
	m, e, err := providers.New(cfg, providers.Options{Getenv: noEnv})
	if err != nil || e.ID() != "hashed/v1/384" {
		t.Fatalf("defaults: %v", err)
	}
	if _, ok := m.(*llm.OfflineLLM); !ok {
		t.Fatalf("default model %T", m)
	}

	cfg.LLM.Provider, cfg.LLM.Model = "anthropic", "claude-test"
	if _, _, err := providers.New(cfg, providers.Options{Getenv: noEnv}); err == nil || !strings.Contains(err.Error(), "$ANTHROPIC_API_KEY") {
		t.Fatalf("no key for the provider's own endpoint: %v", err)
	}
	cfg.LLM.APIKeyEnv = "MY_KEY"
	m, _, err = providers.New(cfg, providers.Options{Getenv: func(k string) string { return map[string]string{"MY_KEY": "k"}[k] }})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.(llm.Availability); !ok {
		t.Fatalf("provider model %T is not behind a guard", m)
	}
	cfg.LLM.Provider, cfg.LLM.BaseURL, cfg.LLM.APIKeyEnv = "openai", "http://localhost:11434/v1", ""
	if _, _, err := providers.New(cfg, providers.Options{Getenv: noEnv}); err != nil {
		t.Fatalf("a local server needs no key: %v", err)
	}
	cfg.Embedder.Provider, cfg.Embedder.Model, cfg.Embedder.BaseURL, cfg.Embedder.Dims = "openai", "nomic-embed-text", "http://localhost:11434/v1", 768
	_, e, err = providers.New(cfg, providers.Options{Getenv: noEnv})
	if err != nil || e.ID() != "openai/nomic-embed-text/768" || e.Dims() != 768 {
		t.Fatalf("embedder %v: %v", e, err)
	}
	cfg.Embedder = config.Default().Embedder
	cfg.Embedder.Provider, cfg.Embedder.Dims = "glove", 100
	_, e, err = providers.New(cfg, providers.Options{Getenv: noEnv})
	if err != nil || e.ID() != "model2vec/glove-6b-100d-30k/100" || e.Dims() != 100 {
		t.Fatalf("built-in GloVe embedder %v: %v", e, err)
	}
}
