// Package providers builds the configured model and embedder (config.LLM,
// config.Embedder): the built-in offline ones, or a provider package's
// client behind a resilience guard.
package providers

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/llm/anthropic"
	"github.com/memoria-ai/memoria/llm/model2vec"
	"github.com/memoria-ai/memoria/llm/model2vec/glove"
	"github.com/memoria-ai/memoria/llm/openai"
	"github.com/memoria-ai/memoria/llm/rerank"
	"github.com/memoria-ai/memoria/llm/resilience"
)

// Options adjust New.
type Options struct {
	// Observer hears the guards (the process's metrics).
	Observer resilience.Observer
	// Getenv reads the API keys (default os.Getenv).
	Getenv func(string) string
	// HTTPClient replaces http.DefaultClient for the providers.
	HTTPClient *http.Client
	// Now and Sleep replace the guards' clock and backoff timer (tests).
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// New returns the configured model and embedder.
func New(cfg config.Config, o Options) (llm.LLM, llm.Embedder, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	model, err := Model(cfg, o)
	if err != nil {
		return nil, nil, err
	}
	emb, err := Embedder(cfg, o)
	if err != nil {
		return nil, nil, err
	}
	return model, emb, nil
}

// Model returns the configured language model.
func Model(cfg config.Config, o Options) (llm.LLM, error) {
	c := cfg.LLM
	var m llm.LLM
	var err error
	switch c.Provider {
	case "offline":
		return llm.NewOffline(), nil
	case "openai":
		key, kerr := apiKey(o, c.APIKeyEnv, "OPENAI_API_KEY", "llm", c.BaseURL)
		if kerr != nil {
			return nil, kerr
		}
		m, err = openai.NewChat(openai.Options{BaseURL: c.BaseURL, APIKey: key, Model: c.Model, HTTPClient: o.HTTPClient, Now: o.Now})
	case "anthropic":
		key, kerr := apiKey(o, c.APIKeyEnv, "ANTHROPIC_API_KEY", "llm", c.BaseURL)
		if kerr != nil {
			return nil, kerr
		}
		m, err = anthropic.NewChat(anthropic.Options{BaseURL: c.BaseURL, APIKey: key, Model: c.Model, HTTPClient: o.HTTPClient, Now: o.Now})
	default:
		return nil, fmt.Errorf("config: llm.provider %q is not available", c.Provider)
	}
	if err != nil {
		return nil, err
	}
	return resilience.WrapLLM(m, resilience.New(guardOptions(cfg, c.Provider, c.Model, c.Timeout.D(), c.MaxConcurrency, o))), nil
}

// Embedder returns the configured embedder.
func Embedder(cfg config.Config, o Options) (llm.Embedder, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	c := cfg.Embedder
	switch c.Provider {
	case "hashed":
		return llm.NewHashedEmbedder(c.Dims), nil
	case "model2vec":
		return model2vec.Load(c.Path, c.Model, c.Dims)
	case glove.Provider:
		return glove.New()
	case "openai":
		key, err := apiKey(o, c.APIKeyEnv, "OPENAI_API_KEY", "embedder", c.BaseURL)
		if err != nil {
			return nil, err
		}
		e, err := openai.NewEmbedder(openai.Options{BaseURL: c.BaseURL, APIKey: key, Model: c.Model, HTTPClient: o.HTTPClient, Now: o.Now}, c.Dims, c.BatchSize)
		if err != nil {
			return nil, err
		}
		return resilience.WrapEmbedder(e, resilience.New(guardOptions(cfg, "openai-embeddings", c.Model, c.Timeout.D(), c.MaxConcurrency, o))), nil
	}
	return nil, fmt.Errorf("config: embedder.provider %q is not available", c.Provider)
}

// Reranker returns the configured reranker (recall.rerank), nil when it
// is off. It sits behind its own guard ("rerank-" and the provider in the
// metrics): bounded by recall.rerank.timeout, never retried (a recall does
// not wait for a second try: it keeps the fused order), with the breaker
// of llm.breaker_*.
func Reranker(cfg config.Config, o Options) (llm.Reranker, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	c := cfg.Recall.Rerank
	if !c.Enabled() {
		return nil, nil
	}
	key, err := apiKey(o, c.APIKeyEnv, config.DefaultRerankKeyEnv, "recall.rerank", c.BaseURL)
	if err != nil {
		return nil, err
	}
	ro := openai.Options{BaseURL: c.BaseURL, APIKey: key, Model: c.Model, HTTPClient: o.HTTPClient, Now: o.Now}
	var r llm.Reranker
	switch c.Provider {
	case config.RerankAPI:
		r, err = openai.NewReranker(ro)
	case config.RerankTEI:
		r, err = openai.NewTEIReranker(ro)
	case config.RerankChat:
		var chat *openai.Chat
		chat, err = openai.NewChat(ro)
		r = rerank.NewChat(chat)
	default:
		return nil, fmt.Errorf("config: recall.rerank.provider %q is not available", c.Provider)
	}
	if err != nil {
		return nil, err
	}
	g := guardOptions(cfg, "rerank-"+c.Provider, c.Model, c.Timeout.D(), cfg.LLM.MaxConcurrency, o)
	g.MaxRetries = 0
	return resilience.WrapReranker(r, resilience.New(g)), nil
}

func guardOptions(cfg config.Config, provider, model string, timeout time.Duration, concurrency int, o Options) resilience.Options {
	return resilience.Options{
		Provider: provider, Model: model, Timeout: timeout,
		MaxRetries: cfg.LLM.MaxRetries, BaseDelay: cfg.LLM.RetryBase.D(), MaxDelay: cfg.LLM.RetryMax.D(),
		MaxConcurrency:  concurrency,
		BreakerFailures: cfg.LLM.BreakerFailures, BreakerCooldown: cfg.LLM.BreakerCooldown.D(),
		Observer: o.Observer, Now: o.Now, Sleep: o.Sleep,
	}
}

// apiKey reads the key from the configured variable (or the provider's
// usual one). The provider's own endpoint needs one; a server of one's own
// (a base URL) may not.
func apiKey(o Options, env, def, section, baseURL string) (string, error) {
	if env == "" {
		env = def
	}
	key := strings.TrimSpace(o.Getenv(env))
	if key == "" && baseURL == "" {
		return "", fmt.Errorf("config: %s: set the API key in $%s (or %s.api_key_env), or %s.base_url for a local server", section, env, section, section)
	}
	return key, nil
}
