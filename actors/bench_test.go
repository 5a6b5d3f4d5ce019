package actors_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/messages"
)

// BenchmarkAdvance measures advances (input + recall + offline LLM +
// response, both memories durable) spread over 1,000 sonas, run in
// parallel. Report: advances/s.
func BenchmarkAdvance(b *testing.B) {
	self, sys := open(b, b.TempDir(), actors.TestingKnobs{})
	ctx := context.Background()
	const sonas = 1000
	ids := createSonas(b, self, sonas)
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

// BenchmarkInsert measures durable inserts through the sona actors (the
// REST insert path without HTTP): embed and encode in the caller, append
// in the sona's actor, acknowledged after the group commit. 64 sonas, 64
// concurrent callers. Report: memories/s.
func BenchmarkInsert(b *testing.B) {
	self, sys := open(b, b.TempDir(), actors.TestingKnobs{})
	ctx := context.Background()
	const sonas = 64
	ids := createSonas(b, self, sonas)
	var n atomic.Int64
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			m := &memory.Memory{Data: memory.Data{Text: &memory.TextData{Content: fmt.Sprintf("fact %d: the delivery for order %d arrives on day %d", i, i*31, i%28)}}}
			vecs, err := self.Embed(ctx, m.Text())
			if err != nil {
				b.Fatal(err)
			}
			p, err := self.Chains.Prepare(m, vecs[0], nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sys.Append(ctx, ids[i%sonas], p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "memories/s")
}

// createSonas creates n sonas and returns their uuids.
func createSonas(b *testing.B, self *memory.Self, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		rec, err := self.Sonas.Create(context.Background(), fmt.Sprintf("sona-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = rec.Uuid
	}
	return ids
}
