package actors_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/messages"
)

func open(t testing.TB, dir string, knobs actors.TestingKnobs) (*memory.Self, *actors.System) {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = dir
	cfg.Actors.AskTimeout = config.Duration(5 * time.Second)
	self, err := memory.Open(context.Background(), memory.Options{Config: cfg, Embedder: llm.NewHashedEmbedder(384)})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := actors.Start(actors.Options{Self: self, LLM: llm.NewOffline(), Config: cfg, Knobs: knobs})
	if err != nil {
		t.Fatal(err)
	}
	return self, sys
}

func TestConcurrentChatsOneSona(t *testing.T) {
	dir := t.TempDir()
	self, sys := open(t, dir, actors.TestingKnobs{})
	ctx := context.Background()
	sona, err := self.CreateSona(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := sys.Advance(ctx, sona.Uuid, &messages.ChatRequest{Content: fmt.Sprintf("message number %d about painting", i)})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rec, _ := self.Sona(sona.Uuid)
	t.Log(rec)
	sys.Stop()
	self.Close()
}
