package actors_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/messages"
)

// Stop while chats, their evaluations and the tiers' steps run: the
// continuations that still run while the tree stops begin no more steps
// (a WaitGroup's Add racing Stop's Wait, which -race reported), and Stop
// returns.
func TestStopWhileStepsRun(t *testing.T) {
	for round := range 2 {
		cfg := testConfig(t.TempDir())
		// A chat the stop cut short waits for its step's answer until
		// this bound, 3 s (the offline model answers at once).
		cfg.LLM.Timeout = config.Duration(time.Second)
		cfg.Actors.AskTimeout = config.Duration(time.Second)
		e := start(t, cfg, nil, actors.TestingKnobs{})
		ctx := context.Background()
		sona, err := e.self.Sonas.Create(ctx, "busy")
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg      sync.WaitGroup
			done    atomic.Int64
			stopped atomic.Bool
			busy    = make(chan struct{})
			once    sync.Once
		)
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stopped.Load() {
					_, err := e.sys.Advance(ctx, sona.Uuid, &messages.ChatRequest{Content: "what did I plan for the trip?"})
					if err == nil && done.Add(1) == 12 {
						once.Do(func() { close(busy) })
					}
				}
			}()
		}
		select {
		case <-busy:
		case <-time.After(time.Minute):
			stopped.Store(true)
			t.Fatalf("round %d: %d chats answered in a minute, want 12", round, done.Load())
		}
		if !actors.Begins(e.sys) {
			t.Fatalf("round %d: a running system begins no step", round)
		}
		e.sys.Stop()
		stopped.Store(true)
		if actors.Begins(e.sys) {
			t.Fatalf("round %d: a stopped system begins a step", round)
		}
		wg.Wait()
		e.close()
	}
}
