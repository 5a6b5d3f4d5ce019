package recall_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/recall"
)

// scripted stands for a remote reranker model (api/api_rerank_test.go
// runs the real clients against a fake server): it scores the documents
// it is given by fn, or fails when fn is nil.
type scripted struct {
	fn    atomic.Pointer[func([]string) []float64]
	calls atomic.Int64
}

func (s *scripted) Rerank(_ context.Context, _ string, docs []string) ([]float64, error) {
	s.calls.Add(1)
	fn := s.fn.Load()
	if fn == nil {
		return nil, errors.New("rerank: connection refused")
	}
	return (*fn)(docs), nil
}

func (s *scripted) set(fn func([]string) []float64) { s.fn.Store(&fn) }

func hitOrder(rs []*recall.Recalled) []string {
	var out []string
	for _, r := range recall.Ranked(rs) {
		out = append(out, r.Memory.Text())
	}
	return out
}

// The reranker's order within the top n: what it leaves unscored goes
// after what it scored, ties keep the fused order, the contributions add
// up to the score; a failure keeps the fused order, logged at warn level
// at most once a minute and counted.
func TestRerankStage(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	cfg.Recall.Rerank.TopN = 4
	cfg.Recall.Weights.Recency, cfg.Recall.Weights.Importance = 0, 0
	cfg.Recall.MMRLambda = 1
	rr := &scripted{}
	logs := &memorytest.LogBuffer{}
	s, err := memorytest.OpenWith(memory.Options{Config: cfg, Clock: clk, Reranker: rr, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	o.Conversation(clk, 30, 7)
	q := recall.Query{Sona: o.Sona, Text: "garden tomato basil", K: 6, Peek: true}

	fused, err := memorytest.Recall(s, context.Background(), q) // fails: the fused order
	if err != nil {
		t.Fatalf("a failing reranker failed the recall: %v", err)
	}
	want := hitOrder(fused)
	if len(want) != 6 {
		t.Fatalf("%d hits", len(want))
	}
	for _, r := range fused {
		if r.Explain.RerankRank != 0 || r.Explain.Contrib.Rerank != 0 {
			t.Fatalf("a fallback reranked %v", r.Explain)
		}
	}

	// The first document unscored, the rest alike: the fused 2nd, 3rd and
	// 4th, then the 1st, then the rest.
	rr.set(func(docs []string) []float64 {
		out := make([]float64, len(docs))
		for i := range out {
			out[i] = 1
		}
		out[0] = math.NaN()
		return out
	})
	got, err := memorytest.Recall(s, context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	order := hitOrder(got)
	reordered := []string{want[1], want[2], want[3], want[0], want[4], want[5]}
	if strings.Join(order, "\n") != strings.Join(reordered, "\n") {
		t.Fatalf("order\n%s\nwant\n%s", strings.Join(order, "\n"), strings.Join(reordered, "\n"))
	}
	for i, r := range recall.Ranked(got) {
		if math.Abs(r.Explain.Contrib.Sum()-r.Score) > 1e-12 {
			t.Errorf("hit %d: contributions %v, score %v", i+1, r.Explain.Contrib.Sum(), r.Score)
		}
		if wantRank, wantScore := []int{1, 2, 3, 4, 0, 0}[i], []float64{1, 1, 1, 0, 0, 0}[i]; r.Explain.RerankRank != wantRank || r.Explain.Rerank != wantScore {
			t.Errorf("hit %d: rerank rank %d and score %v, want %d and %v", i+1, r.Explain.RerankRank, r.Explain.Rerank, wantRank, wantScore)
		}
	}

	// Failures: warned once a minute, every one counted.
	rr.fn.Store(nil)
	for range 2 {
		if _, err := memorytest.Recall(s, context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute)
	if _, err := memorytest.Recall(s, context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if n := s.Recaller.RerankFallbacks(); n != 4 {
		t.Fatalf("%d fallbacks counted, want 4", n)
	}
	text := logs.String()
	if warns, debugs := strings.Count(text, "level=WARN msg=\"recall: the reranker failed"), strings.Count(text, "level=DEBUG msg=\"recall: the reranker failed"); warns != 2 || debugs != 2 {
		t.Fatalf("%d warnings and %d debug lines, want 2 and 2:\n%s", warns, debugs, text)
	}
	if rr.calls.Load() != 5 {
		t.Fatalf("%d calls", rr.calls.Load())
	}
}
