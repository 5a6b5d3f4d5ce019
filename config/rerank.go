package config

import (
	"strings"
	"time"
)

// Reranker providers (recall.rerank.provider).
const (
	RerankOff  = "off"    // no reranking (the default)
	RerankAPI  = "rerank" // POST {base_url}/rerank, the Jina/Cohere format (vLLM, llama.cpp's server, Jina, Cohere)
	RerankTEI  = "tei"    // POST {base_url}/rerank, HuggingFace text-embeddings-inference's format
	RerankChat = "chat"   // an OpenAI-compatible chat model scores each candidate 0–10
)

// Rerank is the optional reranker of recall (issue 17): after fusion, the
// TopN best candidates are scored against the query by a model of the
// user's and reordered by it. A reranker that fails or times out leaves
// the fused order (the recall does not fail).
type Rerank struct {
	// Provider: off (default), rerank, tei or chat (RerankOff …).
	Provider string `yaml:"provider"`
	// BaseURL of the server; /rerank or /chat/completions is appended
	// (e.g. http://localhost:8080 for llama.cpp's server or TEI,
	// http://localhost:8000/v1 for vLLM). Required but for chat, whose
	// default is OpenAI's own API.
	BaseURL string `yaml:"base_url"`
	// Model names the reranker (or chat) model; TEI serves one model and
	// needs none.
	Model string `yaml:"model"`
	// APIKeyEnv names the environment variable holding the API key (sent
	// as a bearer token; default MEMORIA_RERANK_API_KEY, empty for a local
	// server). The key itself never sits in the configuration.
	APIKeyEnv string `yaml:"api_key_env"`
	// TopN is how many of the fused candidates, best first, are reranked
	// (default 20).
	TopN int `yaml:"top_n"`
	// Timeout bounds one reranking call; past it the recall keeps the
	// fused order (default 2s). A failed call is not retried.
	Timeout Duration `yaml:"timeout"`
}

// DefaultRerankKeyEnv is the variable read for the reranker's key when
// recall.rerank.api_key_env is empty.
const DefaultRerankKeyEnv = "MEMORIA_RERANK_API_KEY"

// Enabled reports whether a reranker is configured.
func (r Rerank) Enabled() bool { return r.Provider != RerankOff }

func defaultRerank() Rerank {
	return Rerank{Provider: RerankOff, TopN: 20, Timeout: Duration(2 * time.Second)}
}

// validate checks recall.rerank.*.
func (r Rerank) validate(v *validation) {
	switch r.Provider {
	case RerankOff:
		return
	case RerankAPI, RerankTEI, RerankChat:
	default:
		v.bad("recall.rerank.provider", "unknown provider %q (available: %s, %s, %s, %s)", r.Provider, RerankOff, RerankAPI, RerankTEI, RerankChat)
		return
	}
	if r.BaseURL == "" && r.Provider != RerankChat {
		v.bad("recall.rerank.base_url", "must name the %s server, e.g. http://localhost:8080", r.Provider)
	}
	validURL("recall.rerank.base_url", r.BaseURL, v.bad)
	if strings.TrimSpace(r.Model) == "" && r.Provider != RerankTEI {
		v.bad("recall.rerank.model", "must name the model for provider %s", r.Provider)
	}
	if r.TopN < 2 || r.TopN > 1000 {
		v.bad("recall.rerank.top_n", "must be within 2..1000, got %d", r.TopN)
	}
	v.posDur("recall.rerank.timeout", r.Timeout)
}
