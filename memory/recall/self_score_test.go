package recall_test

import (
	"context"
	"math"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/recall"
)

// recall.Paths.Score replaces recall.weights for one recall (the LoCoMo
// evaluation tunes them over one ingested store).
func TestPathsScoreOverridesWeights(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	o.Text("the lake house party")
	o.Text("a quiet evening at the lake")
	recallWith := func(w *config.Weights) []*recall.Recalled {
		t.Helper()
		rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "lake party", Peek: true,
			Paths: &recall.Paths{Weights: config.PathWeights{Dense: 0.5, BM25: 1}, Fusion: "weighted", Score: w}})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 2 {
			t.Fatalf("recalled %v", memorytest.Describe(rs))
		}
		return rs
	}
	for _, r := range recallWith(nil) {
		if r.Explain.Contrib.Recency == 0 || r.Explain.Contrib.SonaSimilarity == 0 {
			t.Fatalf("configured weights: %+v", r.Explain.Contrib)
		}
	}
	for _, r := range recallWith(&config.Weights{Relevance: 2}) {
		c := r.Explain.Contrib
		if c.Recency != 0 || c.Importance != 0 || c.SonaSimilarity != 0 {
			t.Fatalf("recall.Paths.Score ignored: %+v", c)
		}
		want := 2 * r.Explain.KindWeight * r.Explain.Fused.Relevance
		if math.Abs(r.Score-want) > 1e-9 {
			t.Fatalf("score %v, want 2 × kind weight × relevance = %v", r.Score, want)
		}
	}
}
