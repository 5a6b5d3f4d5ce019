package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memoria-ai/memoria/llm/resilience"
)

// llmMetrics are the model providers' metrics, labelled by provider and
// model (resilience.Observer).
type llmMetrics struct {
	calls     *prometheus.CounterVec
	errors    *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	tokens    *prometheus.CounterVec
	retries   *prometheus.CounterVec
	breaker   *prometheus.GaugeVec
	queueWait *prometheus.HistogramVec
}

func newLLMMetrics(r *prometheus.Registry) *llmMetrics {
	m := &llmMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoria_llm_calls_total",
			Help: "Model provider calls (all attempts of one call count once), by provider, model and op (complete, stream, embed).",
		}, []string{"provider", "model", "op"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoria_llm_errors_total",
			Help: "Failed model provider calls, by provider, model and class (rate_limit, server, client, timeout, network, malformed, canceled, circuit_open, unsupported).",
		}, []string{"provider", "model", "class"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "memoria_llm_latency_seconds",
			Help:    "Duration of model provider calls, retries and queueing included, by provider, model and op.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"provider", "model", "op"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoria_llm_tokens_total",
			Help: "Tokens the providers reported, by provider, model and kind (prompt, completion).",
		}, []string{"provider", "model", "kind"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoria_llm_retries_total",
			Help: "Retried model provider attempts, by provider and model.",
		}, []string{"provider", "model"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "memoria_llm_breaker_state",
			Help: "Circuit breaker state per provider and model: 0 closed, 1 half-open, 2 open.",
		}, []string{"provider", "model"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "memoria_llm_queue_wait_seconds",
			Help:    "Time calls waited for a free slot under the provider's concurrency limit, by provider and model.",
			Buckets: []float64{0.0001, 0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 30},
		}, []string{"provider", "model"}),
	}
	r.MustRegister(m.calls, m.errors, m.latency, m.tokens, m.retries, m.breaker, m.queueWait)
	return m
}

var _ resilience.Observer = (*Set)(nil)

// LLMCall records a provider call.
func (s *Set) LLMCall(provider, model, op string, took time.Duration, class string) {
	if s == nil {
		return
	}
	s.llm.calls.WithLabelValues(provider, model, op).Inc()
	s.llm.latency.WithLabelValues(provider, model, op).Observe(took.Seconds())
	if class != "" {
		s.llm.errors.WithLabelValues(provider, model, class).Inc()
	}
}

// LLMRetry records a retry.
func (s *Set) LLMRetry(provider, model string) {
	if s != nil {
		s.llm.retries.WithLabelValues(provider, model).Inc()
	}
}

// LLMTokens records the tokens of a call.
func (s *Set) LLMTokens(provider, model string, prompt, completion int) {
	if s != nil {
		s.llm.tokens.WithLabelValues(provider, model, "prompt").Add(float64(prompt))
		s.llm.tokens.WithLabelValues(provider, model, "completion").Add(float64(completion))
	}
}

// LLMBreaker records a breaker's state.
func (s *Set) LLMBreaker(provider, model string, state resilience.State) {
	if s != nil {
		s.llm.breaker.WithLabelValues(provider, model).Set(float64(state))
	}
}

// LLMQueueWait records a call's wait for a concurrency slot.
func (s *Set) LLMQueueWait(provider, model string, waited time.Duration) {
	if s != nil {
		s.llm.queueWait.WithLabelValues(provider, model).Observe(waited.Seconds())
	}
}
