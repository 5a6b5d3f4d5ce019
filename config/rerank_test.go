package config_test

import (
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/config"
)

func TestRerankSettingsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		tweak func(*config.Rerank)
		want  string
	}{
		{func(r *config.Rerank) { r.Provider = "cohere" }, `recall.rerank.provider: unknown provider "cohere"`},
		{func(r *config.Rerank) { r.Provider, r.Model = config.RerankAPI, "m" }, "recall.rerank.base_url: must name the rerank server"},
		{func(r *config.Rerank) { r.Provider, r.BaseURL = config.RerankAPI, "http://localhost:8080" }, "recall.rerank.model: must name the model"},
		{func(r *config.Rerank) { r.Provider, r.BaseURL, r.Model = config.RerankAPI, "localhost:8080", "m" }, "recall.rerank.base_url: want an http(s) URL"},
		{func(r *config.Rerank) { r.Provider, r.BaseURL, r.TopN = config.RerankTEI, "http://localhost:8080", 1 }, "recall.rerank.top_n: must be within 2..1000, got 1"},
		{func(r *config.Rerank) {
			r.Provider, r.BaseURL, r.Timeout = config.RerankTEI, "http://localhost:8080", 0
		}, "recall.rerank.timeout: must be a positive duration"},
	} {
		cfg := config.Default()
		cfg.DataDir = t.TempDir()
		tc.tweak(&cfg.Recall.Rerank)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", cfg.Recall.Rerank, err, tc.want)
		}
	}
	for _, p := range []string{config.RerankAPI, config.RerankTEI, config.RerankChat} {
		cfg := config.Default()
		cfg.DataDir = t.TempDir()
		cfg.Recall.Rerank.Provider, cfg.Recall.Rerank.BaseURL, cfg.Recall.Rerank.Model = p, "http://localhost:8080", "m"
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if d := config.Default().Recall.Rerank; d.Enabled() || d.TopN != 20 || d.Timeout.D().Seconds() != 2 {
		t.Errorf("default %+v", d)
	}
}
