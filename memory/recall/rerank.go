package recall

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/memoria-ai/memoria/internal/trace"
	"github.com/memoria-ai/memoria/llm"
)

// rerankWarnEvery bounds how often a failing reranker is logged at warn
// level (the rest at debug): while it is down, every recall falls back.
const rerankWarnEvery = time.Minute

// rerank is the optional stage after fusion (recall.rerank): the
// recall.rerank.top_n best candidates by score are scored against the
// query by the reranker and reordered by its scores. The candidate the
// reranker puts first takes the best of their fused scores, the second
// the second best, and so on (a document it left unscored comes after
// those it scored, in fused order), so the scores keep fusion's scale —
// what lies past the n keeps its place, and the budget, MMR and expansion
// work as without it. Explain.Rerank and RerankRank are what the reranker
// said (0 for a document it left unscored), Contrib.Rerank the shift of
// the score. A reranker that fails or times out leaves the fused order:
// the recall goes on, the stage's span records the error
// (memoria.recall.rerank.fallback), the Recaller counts it
// (RerankFallbacks) and logs it. Only a failure to read the store fails
// the recall. It does nothing without a reranker or a query text.
func (sc *scorer) rerank(ctx context.Context, cands []*Recalled) error {
	s := sc.self
	if s.reranker == nil || sc.q.Text == "" || len(cands) < 2 {
		return nil
	}
	ctx, span := trace.Start(ctx, "recall.rerank")
	defer span.End()
	slices.SortFunc(cands, byScore)
	top := cands[:min(len(cands), s.cfg.Recall.Rerank.TopN)]
	docs := make([]string, len(top))
	for i, r := range top {
		m, err := s.memories.MemoryIn(sc.txn, r.CID)
		if err != nil {
			trace.Fail(span, err)
			return err
		}
		r.Memory = m
		docs[i] = m.Text()
	}
	span.SetAttributes(attribute.Int("memoria.recall.candidates", len(top)))
	// The call waits on another machine: the worker serves another
	// recall meanwhile.
	sc.worker.give()
	scores, err := s.reranker.Rerank(ctx, sc.q.Text, docs)
	if werr := sc.worker.take(ctx); werr != nil {
		trace.Fail(span, werr)
		return werr
	}
	if err == nil && len(scores) != len(top) {
		err = fmt.Errorf("%w: %d scores for %d documents", llm.ErrMalformed, len(scores), len(top))
	}
	span.SetAttributes(attribute.Bool("memoria.recall.rerank.fallback", err != nil))
	if err != nil {
		s.rerankFallbacks.Add(1)
		trace.Fail(span, err)
		level, now := slog.LevelDebug, s.clock.Now()
		if last := s.rerankWarned.Load(); now.Sub(time.Unix(0, last)) >= rerankWarnEvery && s.rerankWarned.CompareAndSwap(last, now.UnixNano()) {
			level = slog.LevelWarn
		}
		s.log.Log(ctx, level, "recall: the reranker failed; the fused order is kept", "err", err, "fallbacks", s.rerankFallbacks.Load())
		return nil
	}
	fused := make([]float64, len(top))
	for i, r := range top {
		fused[i] = r.Score
	}
	order := make([]int, len(top))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { // unscored (NaN) last; ties keep the fused order
		if na, nb := math.IsNaN(scores[a]), math.IsNaN(scores[b]); na || nb {
			return cmp.Compare(b2i(na), b2i(nb))
		}
		return cmp.Compare(scores[b], scores[a])
	})
	moved := 0
	for rank, i := range order {
		r := top[i]
		score := fused[rank]
		if rank > 0 && score >= top[order[rank-1]].Score { // equal fused scores: the reranker's order still holds
			score = math.Nextafter(top[order[rank-1]].Score, math.Inf(-1))
		}
		r.Explain.Rerank, r.Explain.RerankRank = scores[i], rank+1
		if math.IsNaN(scores[i]) {
			r.Explain.Rerank = 0 // left unscored (ranked after the scored ones)
		}
		r.Explain.Contrib.Rerank = score - r.Score
		r.Score = score
		if rank != i {
			moved++
		}
	}
	span.SetAttributes(attribute.Int("memoria.recall.rerank.moved", moved))
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// RerankFallbacks counts the recalls whose reranker failed and that kept
// the fused order (memoria_recall_rerank_fallbacks_total).
func (s *Recaller) RerankFallbacks() int64 { return s.rerankFallbacks.Load() }
