package eumas

import (
	"context"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/messages"
)

// Input is what an evaluator sees of a memory (or of a query).
type Input struct {
	Text string
	// Kind is the memory's XmetaV kind; "" for a query.
	Kind string
}

// Evaluator evaluates memories. The error is only ever the context's: an
// archetype that cannot answer is recorded in Evaluation.Failures.
type Evaluator interface {
	Evaluate(ctx context.Context, in Input) (*messages.Evaluation, error)
}

// Metrics lists the metric names of the archetypes, sorted, each once:
// the dimensions of a metric profile.
func Metrics(as []config.Archetype) []string {
	var names []string
	for _, a := range as {
		for _, m := range a.Metrics {
			names = append(names, m.Name)
		}
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// Aggregate is the memory's summary of e: each metric's mean over the
// archetypes that measured it, the mean priority score and decay rate, and
// the factors named by any archetype (most often named first). With no
// archetype answering it is marked failed.
func Aggregate(e *messages.Evaluation) *messages.EvalSummary {
	if len(e.Archetypes) == 0 {
		return &messages.EvalSummary{Failed: true}
	}
	sum, n := map[string]float64{}, map[string]int{}
	factors := map[string]int{}
	p := &messages.Priority{}
	for _, a := range e.Archetypes {
		for k, v := range a.Metrics {
			sum[k] += v
			n[k]++
		}
		if a.Priority != nil {
			p.Score += a.Priority.Score
			p.DecayRate += a.Priority.DecayRate
			for _, f := range a.Priority.Factors {
				factors[f]++
			}
		}
	}
	out := &messages.EvalSummary{Metrics: make(map[string]float64, len(sum)), Priority: p}
	for k, v := range sum {
		out.Metrics[k] = round3(v / float64(n[k]))
	}
	p.Score = round3(p.Score / float64(len(e.Archetypes)))
	p.DecayRate = round3(p.DecayRate / float64(len(e.Archetypes)))
	for f := range factors {
		p.Factors = append(p.Factors, f)
	}
	slices.SortFunc(p.Factors, func(a, b string) int {
		if factors[a] != factors[b] {
			return factors[b] - factors[a]
		}
		return strings.Compare(a, b)
	})
	return out
}

// Profile is s's metrics as a unit vector over names (nil when none is
// above zero): metric profiles are compared by cosine, so a memory and a
// query are near when the same metrics stand out in both.
func Profile(s *messages.EvalSummary, names []string) []float32 {
	if s == nil || s.Failed {
		return nil
	}
	v := make([]float32, len(names))
	for i, name := range names {
		if x := s.Metrics[name]; x > 0 && !math.IsInf(x, 0) {
			v[i] = float32(x)
		}
	}
	if !llm.Normalize(v) {
		return nil
	}
	return v
}

// DecayMultiplier scales a memory's forgetting rate by its priority's
// decay_rate r (0..1): 2^(2r−1), from ½ (r = 0) to 2 (r = 1); 1 when the
// memory has not been evaluated.
func DecayMultiplier(s *messages.EvalSummary) float64 {
	if s == nil || s.Priority == nil || s.Failed {
		return 1
	}
	return RateMultiplier(s.Priority.DecayRate)
}

// RateMultiplier is DecayMultiplier of an evaluation, not failed, whose
// priority has decay rate rate.
func RateMultiplier(rate float64) float64 { return math.Exp2(2*rate - 1) }

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
