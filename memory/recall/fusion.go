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
	// Feedback is the full-text score of the pseudo-relevance feedback
	// search (scorer.feedback), FeedbackRank the rank there.
	Feedback     float64
	FeedbackRank int
	// Context is the best dense and full-text relevance (0..1) among the
	// memory's neighbours in its session (see scorer.context); Time how
	// near the memory's time is to those the query speaks of (0..1);
	// Speaker 1 when the query names the memory's speaker; Session how
	// relevant the rest of its session is (scorer.session).
	Context, Time, Speaker, Session float64
	// Reply is the relevance (0..1) of the question a memory replies to
	// (scorer.reply).
	Reply float64
}

// Fused is a candidate's fused relevance split by path; the parts add up
// to Relevance. Relevance is the match (the Dense and BM25 parts: 0..1)
// plus the support (every other part: 0..MaxSupport), so 0..2 — see
// FuseWeighted.
type Fused struct {
	Relevance                       float64
	Dense, BM25, Affinity, Metric   float64
	Context, Time, Speaker, Session float64
	Feedback, Reply                 float64
}

// MaxSupport bounds the support: what the evidence beside a memory's own
// match (affinity, metric, context, time, speaker, session, feedback,
// reply) adds to its relevance. That evidence alone lifts a memory the
// query does not match at most as high as a perfect match (1), not
// higher. (On LoCoMo, 1 costs 0.002 of recall@10 against no cap, 0.75
// costs 0.02, 0.5 costs 0.06: a turn that shares no word with the question
// but answers the question that does, by the speaker it names, in the
// time it names, is what the evidence is for. README, "LoCoMo
// evaluation".)
const MaxSupport = 1.0

// support scales the support parts of f, each already divided by the
// match's weights, so that they add up to at most MaxSupport, and sets
// f.Relevance.
func (f *Fused) support() {
	sum := f.Affinity + f.Metric + f.Context + f.Time + f.Speaker + f.Session + f.Feedback + f.Reply
	if sum > MaxSupport {
		c := MaxSupport / sum
		f.Affinity, f.Metric, f.Context, f.Time = c*f.Affinity, c*f.Metric, c*f.Context, c*f.Time
		f.Speaker, f.Session, f.Feedback, f.Reply = c*f.Speaker, c*f.Session, c*f.Feedback, c*f.Reply
	}
	f.Relevance = f.Dense + f.BM25 + f.Affinity + f.Metric + f.Context + f.Time + f.Speaker + f.Session + f.Feedback + f.Reply
}

// FuseRRF is reciprocal rank fusion: Σ w_p / (k + rank_p) over the paths,
// divided by the value the dense and full-text paths give a candidate
// both rank first, so that the match (their part) is 0..1, 1 for the
// query's best by both; the affinity and metric paths' parts are support,
// at most MaxSupport together (as in FuseWeighted).
func FuseRRF(e Evidence, w config.PathWeights, k float64) Fused {
	norm := (w.Dense + w.BM25) / (k + 1)
	if norm == 0 { // no match paths: the others over their own best
		norm = (w.Affinity + w.Metric) / (k + 1)
	}
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
	f.support()
	return f
}

// Calibration is a query's scale for each path's evidence, taken over
// its candidates, so that what a path contributes does not depend on how
// its raw scores happen to spread: a real embedder's cosines lie in a
// narrow band (0.7–0.85, say), the hashed one's in a wide one, and BM25's
// scale depends on the query's words and the collection.
type Calibration struct {
	// DenseFloor and DenseBest map a cosine to 0..1 (Dense); see
	// CalibrateDense. An affine change of the embedder's cosines
	// (a·cos + b, a > 0) leaves the calibrated value as it was.
	DenseFloor, DenseBest float64
	// BestBM25 is the query's best BM25 score (BM25 is calibrated by it);
	// BestFeedback the feedback search's.
	BestBM25, BestFeedback float64
}

// CalibrateDense is the calibration of a query's cosines, those of every
// candidate whichever path brought it: the lowest is the floor, the
// highest the best — min-max over the candidate set, no constant to tune.
// The candidates the other paths bring (BM25's, the affinity path's) are
// mostly not near the query in the embedder's space, so the floor sits at
// what the embedder gives unrelated text of this query, and the dense
// path's best is 1. (A floor four standard deviations below the mean of
// the dense path's own candidates, issue 17's first calibration, matched
// the raw cosine on these five LoCoMo conversations but lost held out:
// README, "Calibration".) Without candidates both are +Inf: no cosine
// calibrates above 0.
func CalibrateDense(cosines []float64) (floor, best float64) {
	if len(cosines) == 0 {
		return math.Inf(1), math.Inf(1)
	}
	floor, best = math.Inf(1), math.Inf(-1)
	for _, c := range cosines {
		floor, best = math.Min(floor, c), math.Max(best, c)
	}
	return floor, best
}

// Dense is a cosine calibrated: (cos − floor)/(best − floor), within 0..1
// — 1 for the best candidate, 0 for the lowest. When every candidate has
// the same cosine, those at it score 1.
func (c Calibration) Dense(cos float64) float64 {
	if c.DenseBest <= c.DenseFloor {
		if cos >= c.DenseBest {
			return 1
		}
		return 0
	}
	return math.Max(0, math.Min(1, (cos-c.DenseFloor)/(c.DenseBest-c.DenseFloor)))
}

// FuseWeighted is a calibrated sum in two parts, the match and the
// support. The match is the memory's own evidence against the query —
// the calibrated cosine (see Calibration.Dense) and BM25 divided by the
// query's best BM25 — weighted and divided by the sum of those two
// weights: 0..1, 1 for the query's best by both, whatever the other
// weights (an exact match of the query is the best by both, as a rule).
// The support is what the other evidence lends it: affinity,
// metric-profile cosine, context, time, speaker, session, feedback (its
// search's score over its best) and reply, each 0..1, weighted and divided
// by the same sum, so each keeps its weight beside the match; together
// capped at MaxSupport (scaled down alike). Relevance = match + support,
// 0..2. Adding evidence, or weighing it more, never lowers a match: the
// support adds to it. (Dividing by the sum of all the weights did: with
// the context, time, speaker and reply evidence a perfect match without
// other evidence had relevance 1.25/3.95 = 0.32, and memories the query
// did not match, with nothing but a high importance and recency,
// outranked it.) Below the cap, relevance is that sum of before times
// a constant of the configuration (the sum of all the weights over the
// two), so it orders the candidates as that did. Without dense and BM25
// weights there is no match, and the support is divided by its own
// weights' sum.
func FuseWeighted(e Evidence, w config.PathWeights, cal Calibration) Fused {
	total := w.Dense + w.BM25
	if total == 0 {
		total = w.Affinity + w.Metric + w.Context + w.Time + w.Speaker + w.Session + w.Feedback + w.Reply
	}
	if total == 0 {
		return Fused{}
	}
	bm25 := 0.0
	if cal.BestBM25 > 0 {
		bm25 = e.BM25 / cal.BestBM25
	}
	feedback := 0.0
	if cal.BestFeedback > 0 {
		feedback = e.Feedback / cal.BestFeedback
	}
	dense := 0.0
	if w.Dense > 0 {
		dense = cal.Dense(e.Dense)
	}
	f := Fused{
		Dense:    w.Dense * dense / total,
		BM25:     w.BM25 * bm25 / total,
		Affinity: w.Affinity * unit(e.Affinity) / total,
		Metric:   w.Metric * unit(e.Metric) / total,
		Context:  w.Context * unit(e.Context) / total,
		Time:     w.Time * unit(e.Time) / total,
		Speaker:  w.Speaker * unit(e.Speaker) / total,
		Session:  w.Session * unit(e.Session) / total,
		Feedback: w.Feedback * feedback / total,
		Reply:    w.Reply * unit(e.Reply) / total,
	}
	f.support()
	return f
}

// unit clamps x to 0..1.
func unit(x float64) float64 { return math.Max(0, math.Min(1, x)) }
