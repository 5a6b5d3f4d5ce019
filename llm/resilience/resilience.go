// Package resilience puts a model provider behind the guards a server that
// many sonas share needs: a per-call timeout, retries with exponential
// backoff and jitter on rate limits and server errors (honouring
// Retry-After, never on other 4xx), a concurrency limit with a visible
// queue, and a circuit breaker. It wraps any llm.LLM or llm.Embedder; the
// provider packages turn HTTP error replies into *llm.APIError so the
// guard can classify them, and never retry on their own.
//
// Time and chance are inputs: Options.Now, Options.Sleep and Options.Rand
// default to the wall clock, a timer and math/rand, and tests replace them.
package resilience

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/memoria-ai/memoria/llm"
)

// Observer hears what the guard does (internal/metrics implements it).
type Observer interface {
	// LLMCall is one call (all its attempts): op is complete, stream or
	// embed; class is "" on success, else the error class (see Classify).
	LLMCall(provider, model, op string, took time.Duration, class string)
	// LLMRetry is one retry of a call.
	LLMRetry(provider, model string)
	// LLMTokens are the tokens a call used.
	LLMTokens(provider, model string, prompt, completion int)
	// LLMBreaker is the breaker's new state.
	LLMBreaker(provider, model string, state State)
	// LLMQueueWait is how long a call waited for a concurrency slot.
	LLMQueueWait(provider, model string, waited time.Duration)
}

// State is a circuit breaker's state.
type State int

// Breaker states; the numbers are the breaker-state gauge's values.
const (
	Closed   State = 0
	HalfOpen State = 1
	Open     State = 2
)

func (s State) String() string {
	switch s {
	case HalfOpen:
		return "half-open"
	case Open:
		return "open"
	}
	return "closed"
}

// Options configure a Guard.
type Options struct {
	// Provider and Model label errors and metrics.
	Provider, Model string
	// Timeout bounds a whole call: queueing, every attempt and the waits
	// between them (0: only the caller's context).
	Timeout time.Duration
	// MaxRetries is how many times a failed attempt is repeated.
	MaxRetries int
	// BaseDelay is the first backoff; it doubles per retry up to MaxDelay.
	// A retry waits between half and all of it (jitter), or the
	// provider's Retry-After when that is longer.
	BaseDelay, MaxDelay time.Duration
	// MaxConcurrency bounds the calls in flight (0: unbounded); the rest
	// queue in arrival order of their wake-up.
	MaxConcurrency int
	// BreakerFailures consecutive failed attempts open the breaker (0:
	// never); after BreakerCooldown one probe call is let through
	// (half-open): its success closes the breaker, its failure opens it
	// again.
	BreakerFailures int
	BreakerCooldown time.Duration

	Observer Observer
	// Now, Sleep and Rand replace the clock, the backoff timer and the
	// jitter source (tests).
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	Rand  func() float64
}

// Guard guards one provider endpoint. It is safe for concurrent use.
type Guard struct {
	o   Options
	sem chan struct{}

	mu       sync.Mutex
	state    State
	failures int       // consecutive failed attempts
	openedAt time.Time // when the breaker last opened
	probing  bool      // a half-open probe is in flight
}

// New returns a Guard.
func New(o Options) *Guard {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	g := &Guard{o: o}
	if o.MaxConcurrency > 0 {
		g.sem = make(chan struct{}, o.MaxConcurrency)
	}
	o.Observer.LLMBreaker(o.Provider, o.Model, Closed)
	return g
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// State returns the breaker's state.
func (g *Guard) State() State {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state
}

// Available returns nil unless the breaker is open and its cooldown runs:
// then an error wrapping llm.ErrCircuitOpen that says when it probes.
func (g *Guard) Available() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == Open {
		if left := g.o.BreakerCooldown - g.o.Now().Sub(g.openedAt); left > 0 {
			return g.openError(left)
		}
	}
	return nil
}

func (g *Guard) openError(left time.Duration) error {
	return fmt.Errorf("%w: %s (%s) failed %d times in a row; next try in %s",
		llm.ErrCircuitOpen, g.o.Provider, g.o.Model, g.o.BreakerFailures, left.Round(time.Second))
}

// admit lets a call through the breaker; probe is true for the one call
// of a half-open breaker.
func (g *Guard) admit() (probe bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case Open:
		if left := g.o.BreakerCooldown - g.o.Now().Sub(g.openedAt); left > 0 {
			return false, g.openError(left)
		}
		g.setState(HalfOpen)
		g.probing = true
		return true, nil
	case HalfOpen:
		if g.probing {
			return false, fmt.Errorf("%w: %s (%s) is being probed after failures", llm.ErrCircuitOpen, g.o.Provider, g.o.Model)
		}
		g.probing = true
		return true, nil
	}
	return false, nil
}

func (g *Guard) setState(s State) {
	if g.state != s {
		g.state = s
		g.o.Observer.LLMBreaker(g.o.Provider, g.o.Model, s)
	}
}

// record notes an attempt's outcome and reports whether the breaker is
// open after it.
func (g *Guard) record(class string, probe bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if probe {
		g.probing = false
	}
	switch {
	case class == "":
		g.failures = 0
		g.setState(Closed)
	case countsAsFailure(class):
		g.failures++
		if probe || (g.o.BreakerFailures > 0 && g.failures >= g.o.BreakerFailures) {
			g.openedAt = g.o.Now()
			g.setState(Open)
		}
	case probe:
		// A probe that proved nothing (cancelled, client error): let the
		// next call probe.
	}
	return g.state == Open
}

// countsAsFailure: the provider's fault, not the caller's.
func countsAsFailure(class string) bool {
	switch class {
	case "rate_limit", "server", "timeout", "network", "malformed":
		return true
	}
	return false
}

// errSink marks an error of the caller's token sink: not the provider's.
type errSink struct{ err error }

func (e errSink) Error() string { return e.err.Error() }
func (e errSink) Unwrap() error { return e.err }

// Classify names an error's class: circuit_open, canceled, timeout,
// rate_limit (429), server (5xx, 408), client (other 4xx), unsupported,
// malformed or network.
func Classify(err error) string {
	var ae *llm.APIError
	var sink errSink
	switch {
	case err == nil:
		return ""
	case errors.Is(err, llm.ErrCircuitOpen):
		return "circuit_open"
	case errors.As(err, &sink), errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &ae):
		switch {
		case ae.Status == 429:
			return "rate_limit"
		case ae.Status >= 500 || ae.Status == 408:
			return "server"
		}
		return "client"
	case errors.Is(err, llm.ErrUnsupported):
		return "unsupported"
	case errors.Is(err, llm.ErrMalformed):
		return "malformed"
	}
	return "network"
}

// retryable: worth another attempt.
func retryable(class string) bool {
	switch class {
	case "rate_limit", "server", "network":
		return true
	}
	return false
}

// Do runs fn under the guard: breaker, timeout, queue, retries. canRetry,
// when set, is asked before each retry (a stream that already handed out
// tokens cannot be repeated).
func (g *Guard) Do(ctx context.Context, op string, fn func(context.Context) error, canRetry func() bool) error {
	start := g.o.Now()
	err := g.do(ctx, fn, canRetry)
	g.o.Observer.LLMCall(g.o.Provider, g.o.Model, op, g.o.Now().Sub(start), Classify(err))
	return err
}

func (g *Guard) do(ctx context.Context, fn func(context.Context) error, canRetry func() bool) error {
	probe, err := g.admit()
	if err != nil {
		return err
	}
	settled := false
	defer func() {
		if probe && !settled {
			g.record("canceled", true)
		}
	}()
	if g.o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, g.o.Timeout,
			fmt.Errorf("%w: %s call exceeded llm timeout %s", context.DeadlineExceeded, g.o.Provider, g.o.Timeout))
		defer cancel()
	}
	if g.sem != nil {
		waitStart := g.o.Now()
		select {
		case g.sem <- struct{}{}:
		case <-ctx.Done():
			return g.ctxErr(ctx)
		}
		defer func() { <-g.sem }()
		g.o.Observer.LLMQueueWait(g.o.Provider, g.o.Model, g.o.Now().Sub(waitStart))
	}
	for attempt := 0; ; attempt++ {
		err := fn(ctx)
		if err != nil && ctx.Err() != nil && !errors.As(err, new(errSink)) {
			err = errors.Join(g.ctxErr(ctx), err)
		}
		class := Classify(err)
		open := g.record(class, probe)
		settled, probe = true, false
		if err == nil {
			return nil
		}
		if !retryable(class) || attempt >= g.o.MaxRetries || open || (canRetry != nil && !canRetry()) {
			return tries(err, attempt)
		}
		delay := g.backoff(attempt, err)
		if dl, ok := ctx.Deadline(); ok && g.o.Now().Add(delay).After(dl) {
			return tries(fmt.Errorf("%w (no time left to wait %s for a retry)", err, delay.Round(time.Millisecond)), attempt)
		}
		if serr := g.o.Sleep(ctx, delay); serr != nil {
			return tries(errors.Join(g.ctxErr(ctx), err), attempt)
		}
		g.o.Observer.LLMRetry(g.o.Provider, g.o.Model)
	}
}

// ctxErr is the context's cause: the guard's own timeout says so.
func (g *Guard) ctxErr(ctx context.Context) error {
	if c := context.Cause(ctx); c != nil {
		return c
	}
	return ctx.Err()
}

func tries(err error, retries int) error {
	if retries == 0 {
		return err
	}
	return fmt.Errorf("%w (after %d attempts)", err, retries+1)
}

// backoff is the wait before retry number attempt+1: BaseDelay·2^attempt
// capped at MaxDelay, jittered to between half and all of it; or the
// provider's Retry-After when longer.
func (g *Guard) backoff(attempt int, err error) time.Duration {
	d := float64(g.o.BaseDelay) * math.Pow(2, float64(attempt))
	if g.o.MaxDelay > 0 && d > float64(g.o.MaxDelay) {
		d = float64(g.o.MaxDelay)
	}
	delay := time.Duration(d/2 + g.o.Rand()*d/2)
	var ae *llm.APIError
	if errors.As(err, &ae) && ae.RetryAfter > delay {
		delay = ae.RetryAfter
	}
	return delay
}

type nopObserver struct{}

func (nopObserver) LLMCall(string, string, string, time.Duration, string) {}
func (nopObserver) LLMRetry(string, string)                               {}
func (nopObserver) LLMTokens(string, string, int, int)                    {}
func (nopObserver) LLMBreaker(string, string, State)                      {}
func (nopObserver) LLMQueueWait(string, string, time.Duration)            {}

// LLM is a model behind a Guard. It streams when the model does.
type LLM struct {
	inner llm.LLM
	g     *Guard
}

var (
	_ llm.Streamer     = (*LLM)(nil)
	_ llm.Availability = (*LLM)(nil)
)

// WrapLLM puts m behind g.
func WrapLLM(m llm.LLM, g *Guard) *LLM { return &LLM{inner: m, g: g} }

// Guard returns the model's guard.
func (l *LLM) Guard() *Guard { return l.g }

// Available reports whether the breaker lets calls through.
func (l *LLM) Available() error { return l.g.Available() }

// Complete calls the model under the guard.
func (l *LLM) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	var resp llm.Response
	err := l.g.Do(ctx, "complete", func(ctx context.Context) error {
		var err error
		resp, err = l.inner.Complete(ctx, req)
		return err
	}, nil)
	if err == nil {
		l.g.o.Observer.LLMTokens(l.g.o.Provider, l.g.o.Model, resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
	}
	return resp, err
}

// Stream streams the model's reply under the guard; a failed attempt is
// retried only while no token was handed out.
func (l *LLM) Stream(ctx context.Context, req llm.Request, onToken func(string) error) (llm.Response, error) {
	var resp llm.Response
	emitted := false
	err := l.g.Do(ctx, "stream", func(ctx context.Context) error {
		var err error
		resp, err = llm.Stream(ctx, l.inner, req, func(t string) error {
			emitted = true
			if err := onToken(t); err != nil {
				return errSink{err}
			}
			return nil
		})
		return err
	}, func() bool { return !emitted })
	if err == nil {
		l.g.o.Observer.LLMTokens(l.g.o.Provider, l.g.o.Model, resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
	}
	return resp, err
}

// Embedder is an embedder behind a Guard.
type Embedder struct {
	inner llm.Embedder
	g     *Guard
}

var _ llm.Embedder = (*Embedder)(nil)

// WrapEmbedder puts e behind g.
func WrapEmbedder(e llm.Embedder, g *Guard) *Embedder { return &Embedder{inner: e, g: g} }

// Embed embeds under the guard.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	var out [][]float32
	err := e.g.Do(ctx, "embed", func(ctx context.Context) error {
		var err error
		out, err = e.inner.Embed(ctx, texts)
		return err
	}, nil)
	return out, err
}

// Dims is the inner embedder's.
func (e *Embedder) Dims() int { return e.inner.Dims() }

// ID is the inner embedder's.
func (e *Embedder) ID() string { return e.inner.ID() }

// Reranker is a reranker behind a Guard.
type Reranker struct {
	inner llm.Reranker
	g     *Guard
}

var _ llm.Reranker = (*Reranker)(nil)

// WrapReranker puts r behind g.
func WrapReranker(r llm.Reranker, g *Guard) *Reranker { return &Reranker{inner: r, g: g} }

// Rerank scores under the guard (op "rerank").
func (r *Reranker) Rerank(ctx context.Context, query string, documents []string) ([]float64, error) {
	var out []float64
	err := r.g.Do(ctx, "rerank", func(ctx context.Context) error {
		var err error
		out, err = r.inner.Rerank(ctx, query, documents)
		return err
	}, nil)
	return out, err
}
