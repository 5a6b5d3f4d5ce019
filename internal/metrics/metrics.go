// Package metrics holds the process's Prometheus metrics, served at
// GET /metrics. Every metric is registered on the Set's own registry (not
// the global one), so several processes' worth can live in one test.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Set is the process's metrics. A nil *Set records nothing.
type Set struct {
	registry *prometheus.Registry

	// TierTransitions counts MemoryOS tier transitions by kind
	// (page_added, page_moved, segment_created, …; see memory.TierEvent).
	TierTransitions *prometheus.CounterVec
	// TierFallbacks counts tier decisions the offline heuristic made
	// because the language model could not, by operation.
	TierFallbacks *prometheus.CounterVec
	// TierFailures counts tier steps that failed (and were retried by a
	// restart of the tier actor), by tier.
	TierFailures *prometheus.CounterVec
	// Evaluations counts memories the EUMAS evaluator stored, by result
	// (evaluated, failed: every archetype failed).
	Evaluations *prometheus.CounterVec
	// EvaluationFailures counts archetype answers that were invalid
	// twice (recorded, not stored), by archetype.
	EvaluationFailures *prometheus.CounterVec

	llm *llmMetrics // model providers (llm.go)
}

// New registers the metrics, with Go runtime and process collectors.
func New() *Set {
	r := prometheus.NewRegistry()
	s := &Set{
		registry: r,
		TierTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoria_tier_transitions_total",
			Help: "MemoryOS tier transitions, by kind.",
		}, []string{"kind"}),
		TierFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoria_tier_model_fallbacks_total",
			Help: "Tier decisions made by the offline heuristic because the language model gave no valid structured reply, by operation.",
		}, []string{"op"}),
		TierFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoria_tier_step_failures_total",
			Help: "Tier steps that failed and were retried, by tier.",
		}, []string{"tier"}),
		Evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoria_evaluations_total",
			Help: "Memories evaluated by the EUMAS evaluator, by result (evaluated, failed).",
		}, []string{"result"}),
		EvaluationFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoria_evaluation_failures_total",
			Help: "Archetype evaluations whose answer was invalid twice and was recorded as failed, by archetype.",
		}, []string{"archetype"}),
	}
	r.MustRegister(s.TierTransitions, s.TierFallbacks, s.TierFailures, s.Evaluations, s.EvaluationFailures,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.llm = newLLMMetrics(r)
	return s
}

// Handler serves the metrics in the Prometheus text format.
func (s *Set) Handler() http.Handler {
	return promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{})
}

// Registry is the registry the metrics live in.
func (s *Set) Registry() *prometheus.Registry { return s.registry }

// TierTransition counts a tier transition of kind.
func (s *Set) TierTransition(kind string) {
	if s != nil {
		s.TierTransitions.WithLabelValues(kind).Inc()
	}
}

// TierFallback counts a tier decision the heuristic made for the model.
func (s *Set) TierFallback(op string) {
	if s != nil {
		s.TierFallbacks.WithLabelValues(op).Inc()
	}
}

// TierFailure counts a failed tier step.
func (s *Set) TierFailure(tier string) {
	if s != nil {
		s.TierFailures.WithLabelValues(tier).Inc()
	}
}

// Evaluated counts an evaluator step's memories.
func (s *Set) Evaluated(evaluated, failed int) {
	if s != nil {
		s.Evaluations.WithLabelValues("evaluated").Add(float64(evaluated - failed))
		s.Evaluations.WithLabelValues("failed").Add(float64(failed))
	}
}

// EvaluationFailure counts an archetype that failed twice.
func (s *Set) EvaluationFailure(archetype string) {
	if s != nil {
		s.EvaluationFailures.WithLabelValues(archetype).Inc()
	}
}
