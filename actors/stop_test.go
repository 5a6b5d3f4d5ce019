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
		// this bound (the offline model answers at once).
		cfg.LLM.Timeout = config.Duration(500 * time.Millisecond)
		cfg.Actors.AskTimeout = config.Duration(500 * time.Millisecond)
		e := start(t, cfg, nil, actors.TestingKnobs{})
		ctx := context.Background()
		sona, err := e.self.Sonas.Create(ctx, "busy")
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg   sync.WaitGroup
			done atomic.Int64
			busy = make(chan struct{})
			once sync.Once
		)
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if _, err := e.sys.Advance(ctx, sona.Uuid, &messages.ChatRequest{Content: "what did I plan for the trip?"}); err != nil {
						return // stopped
					}
					if done.Add(1) == 12 {
						once.Do(func() { close(busy) })
					}
				}
			}()
		}
		<-busy
		if !actors.Begins(e.sys) {
			t.Fatalf("round %d: a running system begins no step", round)
		}
		e.sys.Stop()
		if actors.Begins(e.sys) {
			t.Fatalf("round %d: a stopped system begins a step", round)
		}
		wg.Wait()
		e.close()
	}
}
