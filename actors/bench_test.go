package actors_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/messages"
)

// BenchmarkAdvance measures advances (input + recall + offline LLM +
// response, both memories durable) spread over 1,000 sonas, run in
// parallel. Report: advances/s.
func BenchmarkAdvance(b *testing.B) {
	self, sys := open(b, b.TempDir(), actors.TestingKnobs{})
	defer self.Close()
	defer sys.Stop()
	ctx := context.Background()
	const sonas = 1000
	ids := make([]string, sonas)
	for i := range ids {
		rec, err := self.CreateSona(ctx, fmt.Sprintf("sona-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = rec.Uuid
	}
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			_, err := sys.Advance(ctx, ids[i%sonas], &messages.ChatRequest{Content: fmt.Sprintf("note %d: the meeting about topic %d moved to room %d", i, i%97, i%13)})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "advances/s")
}
