package recall

import (
	"math"

	"github.com/memoria-ai/memoria/config"
)

// Evidence is what the retrieval paths found for one candidate: the raw
// score of each path and its rank there (0 = the path did not find it).
type Evidence struct {
	Dense, BM25, Affinity, Metric                 float64
	DenseRank, BM25Rank, AffinityRank, MetricRank int
}

// Fused is a candidate's fused relevance (0..1) split by path; the parts
// add up to Relevance.
type Fused struct {
	Relevance                     float64
	Dense, BM25, Affinity, Metric float64
}

// FuseRRF is reciprocal rank fusion: Σ w_p / (k + rank_p), divided by
// its value for a candidate ranked first by every path, so it is 0..1.
func FuseRRF(e Evidence, w config.PathWeights, k float64) Fused {
	norm := (w.Dense + w.BM25 + w.Affinity + w.Metric) / (k + 1)
	if norm == 0 {
		return Fused{}
	}
	part := func(weight float64, rank int) float64 {
		if rank <= 0 || weight == 0 {
			return 0
		}
		return weight / (k + float64(rank)) / norm
	}
	f := Fused{Dense: part(w.Dense, e.DenseRank), BM25: part(w.BM25, e.BM25Rank), Affinity: part(w.Affinity, e.AffinityRank),
		Metric: part(w.Metric, e.MetricRank)}
	f.Relevance = f.Dense + f.BM25 + f.Affinity + f.Metric
	return f
}

// FuseWeighted is a calibrated sum: cosine (at least 0), BM25 divided by
// the best BM25 score of the query, affinity (0..1) and metric-profile
// cosine (0..1), weighted and divided by the sum of the weights, so it is
// 0..1.
func FuseWeighted(e Evidence, w config.PathWeights, bestBM25 float64) Fused {
	total := w.Dense + w.BM25 + w.Affinity + w.Metric
	if total == 0 {
		return Fused{}
	}
	bm25 := 0.0
	if bestBM25 > 0 {
		bm25 = e.BM25 / bestBM25
	}
	f := Fused{
		Dense:    w.Dense * math.Max(0, e.Dense) / total,
		BM25:     w.BM25 * bm25 / total,
		Affinity: w.Affinity * math.Max(0, math.Min(1, e.Affinity)) / total,
		Metric:   w.Metric * math.Max(0, math.Min(1, e.Metric)) / total,
	}
	f.Relevance = f.Dense + f.BM25 + f.Affinity + f.Metric
	return f
}
