package app

import (
	"context"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
)

// echo answers every request with a fixed reply and keeps the last one.
type echo struct {
	reply llm.Response
	last  llm.Request
}

func (e *echo) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	e.last = req
	return e.reply, nil
}

func TestSummarizer(t *testing.T) {
	cfg := config.Default()
	if Summarizer(cfg, llm.NewOffline()) != nil {
		t.Fatal("the offline model summarises merges; it only quotes")
	}
	cfg.LLM.Provider = "remote"
	model := &echo{reply: llm.Response{Content: "Bob planted tomatoes.", StopReason: llm.StopEndTurn}}
	sum := Summarizer(cfg, model)
	got, err := sum(context.Background(), []string{"Bob planted tomatoes.", "In May."})
	if err != nil || got != "Bob planted tomatoes." {
		t.Fatalf("summary %q, %v", got, err)
	}
	if user := model.last.Messages[1].Content; user != "[1] Bob planted tomatoes.\n[2] In May.\n" {
		t.Errorf("prompt %q", user)
	}
	model.reply.StopReason = llm.StopMaxTokens
	if _, err := sum(context.Background(), []string{"x"}); err == nil || !strings.Contains(err.Error(), "max tokens") {
		t.Errorf("a cut summary was accepted: %v", err)
	}
}
