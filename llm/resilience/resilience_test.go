package resilience_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/fakeprovider"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/llm/openai"
	"github.com/memoria-ai/memoria/llm/resilience"
)

// clock is a fake clock; sleeping advances it and records the wait.
type clock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newClock() *clock { return &clock{now: time.Unix(1_700_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

// observer records what the guard reports.
type observer struct {
	mu      sync.Mutex
	calls   []string // error classes, "" for success
	retries int
	states  []resilience.State
	waits   []time.Duration
	tokens  [2]int
}

func (o *observer) LLMCall(_, _, _ string, _ time.Duration, class string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, class)
}
func (o *observer) LLMRetry(string, string) { o.mu.Lock(); o.retries++; o.mu.Unlock() }
func (o *observer) LLMTokens(_, _ string, p, c int) {
	o.mu.Lock()
	o.tokens[0] += p
	o.tokens[1] += c
	o.mu.Unlock()
}
func (o *observer) LLMBreaker(_, _ string, s resilience.State) {
	o.mu.Lock()
	o.states = append(o.states, s)
	o.mu.Unlock()
}
func (o *observer) LLMQueueWait(_, _ string, d time.Duration) {
	o.mu.Lock()
	o.waits = append(o.waits, d)
	o.mu.Unlock()
}

var req = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello"}}}

func guarded(t *testing.T, srv *fakeprovider.Server, o resilience.Options) (*resilience.LLM, *clock, *observer) {
	t.Helper()
	clk, obs := newClock(), &observer{}
	c, err := openai.NewChat(openai.Options{BaseURL: srv.URL, Model: "m", Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	o.Provider, o.Model = "openai", "m"
	o.Now, o.Sleep, o.Observer = clk.Now, clk.Sleep, obs
	o.Rand = func() float64 { return 1 } // the top of the jitter range
	return resilience.WrapLLM(c, resilience.New(o)), clk, obs
}

func TestRetryAfterThenSuccess(t *testing.T) {
	srv := fakeprovider.OpenAI(func(n int, _ fakeprovider.Request) fakeprovider.Reply {
		if n == 0 {
			return fakeprovider.Reply{Status: 429, Header: map[string]string{"Retry-After": "3"}}
		}
		return fakeprovider.Reply{Tokens: []string{"hi"}}
	})
	defer srv.Close()
	m, clk, obs := guarded(t, srv, resilience.Options{MaxRetries: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second})
	resp, err := m.Complete(context.Background(), req)
	if err != nil || resp.Content != "hi" {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	if len(clk.sleeps) != 1 || clk.sleeps[0] != 3*time.Second {
		t.Fatalf("waits %v, want the 3s Retry-After (longer than the 100ms backoff)", clk.sleeps)
	}
	if srv.Count() != 2 || obs.retries != 1 || len(obs.calls) != 1 || obs.calls[0] != "" || obs.tokens != [2]int{11, 1} {
		t.Fatalf("requests %d, observer %+v", srv.Count(), obs)
	}
}

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply { return fakeprovider.Reply{Status: 502} })
	defer srv.Close()
	m, clk, obs := guarded(t, srv, resilience.Options{MaxRetries: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: 300 * time.Millisecond})
	_, err := m.Complete(context.Background(), req)
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != 502 {
		t.Fatalf("err = %v", err)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}
	if len(clk.sleeps) != len(want) {
		t.Fatalf("waits %v, want %v", clk.sleeps, want)
	}
	for i := range want {
		if clk.sleeps[i] != want[i] {
			t.Fatalf("waits %v, want %v", clk.sleeps, want)
		}
	}
	if srv.Count() != 5 || obs.calls[0] != "server" {
		t.Fatalf("%d requests, classes %v", srv.Count(), obs.calls)
	}
}

func TestNoRetryOnClientError(t *testing.T) {
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply { return fakeprovider.Reply{Status: 400} })
	defer srv.Close()
	m, clk, obs := guarded(t, srv, resilience.Options{MaxRetries: 3, BaseDelay: time.Millisecond, BreakerFailures: 1, BreakerCooldown: time.Minute})
	if _, err := m.Complete(context.Background(), req); err == nil {
		t.Fatal("no error")
	}
	if srv.Count() != 1 || len(clk.sleeps) != 0 || obs.calls[0] != "client" {
		t.Fatalf("%d requests, waits %v, classes %v", srv.Count(), clk.sleeps, obs.calls)
	}
	if m.Available() != nil {
		t.Fatal("a client error opened the breaker")
	}
}

func TestBreakerOpensProbesAndCloses(t *testing.T) {
	var mu sync.Mutex
	healthy := false
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply {
		mu.Lock()
		defer mu.Unlock()
		if healthy {
			return fakeprovider.Reply{Tokens: []string{"ok"}}
		}
		return fakeprovider.Reply{Status: 500}
	})
	defer srv.Close()
	m, clk, obs := guarded(t, srv, resilience.Options{MaxRetries: 10, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond,
		BreakerFailures: 3, BreakerCooldown: 30 * time.Second})
	g := m.Guard()

	// 500 × 3 opens the breaker in the middle of the retries.
	if _, err := m.Complete(context.Background(), req); err == nil {
		t.Fatal("no error")
	}
	if srv.Count() != 3 || g.State() != resilience.Open {
		t.Fatalf("%d requests, state %s", srv.Count(), g.State())
	}
	// While open, calls fail at once without reaching the provider.
	_, err := m.Complete(context.Background(), req)
	if !errors.Is(err, llm.ErrCircuitOpen) || srv.Count() != 3 || !errors.Is(m.Available(), llm.ErrCircuitOpen) {
		t.Fatalf("open: err %v, %d requests", err, srv.Count())
	}
	// After the cooldown one probe goes through; it fails: open again.
	clk.advance(31 * time.Second)
	if _, err := m.Complete(context.Background(), req); err == nil || errors.Is(err, llm.ErrCircuitOpen) {
		t.Fatalf("probe: err %v", err)
	}
	if srv.Count() != 4 || g.State() != resilience.Open {
		t.Fatalf("failed probe: %d requests, state %s (a probe is one attempt)", srv.Count(), g.State())
	}
	// The provider recovers; the next probe closes the breaker.
	mu.Lock()
	healthy = true
	mu.Unlock()
	clk.advance(31 * time.Second)
	if resp, err := m.Complete(context.Background(), req); err != nil || resp.Content != "ok" {
		t.Fatalf("probe: %v", err)
	}
	if g.State() != resilience.Closed || m.Available() != nil {
		t.Fatalf("state %s after a good probe", g.State())
	}
	wantStates := []resilience.State{resilience.Closed, resilience.Open, resilience.HalfOpen, resilience.Open, resilience.HalfOpen, resilience.Closed}
	if len(obs.states) != len(wantStates) {
		t.Fatalf("states %v, want %v", obs.states, wantStates)
	}
	for i := range wantStates {
		if obs.states[i] != wantStates[i] {
			t.Fatalf("states %v, want %v", obs.states, wantStates)
		}
	}
	if obs.calls[1] != "circuit_open" {
		t.Fatalf("classes %v", obs.calls)
	}
}

func TestHangingServerHitsTheTimeout(t *testing.T) {
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply { return fakeprovider.Reply{Hang: true} })
	defer srv.Close()
	c, _ := openai.NewChat(openai.Options{BaseURL: srv.URL, Model: "m"})
	obs := &observer{}
	m := resilience.WrapLLM(c, resilience.New(resilience.Options{Provider: "openai", Model: "m", Timeout: 150 * time.Millisecond,
		MaxRetries: 3, BaseDelay: time.Second, Observer: obs}))
	start := time.Now()
	_, err := m.Complete(context.Background(), req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %s", took)
	}
	select {
	case <-srv.Canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the provider's request was not cancelled")
	}
	if srv.Count() != 1 || obs.calls[0] != "timeout" {
		t.Fatalf("%d requests (no time left for a retry), classes %v", srv.Count(), obs.calls)
	}
}

func TestCallerCancelStopsTheCall(t *testing.T) {
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply { return fakeprovider.Reply{Hang: true} })
	defer srv.Close()
	m, _, obs := guarded(t, srv, resilience.Options{MaxRetries: 3, BreakerFailures: 1, BreakerCooldown: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := m.Complete(ctx, req); done <- err }()
	<-srv.Arrived
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end")
	}
	<-srv.Canceled
	if m.Available() != nil || obs.calls[0] != "canceled" {
		t.Fatalf("a caller's cancel counted against the provider: %v", obs.calls)
	}
}

func TestConcurrencyLimitQueues(t *testing.T) {
	release := make(chan struct{})
	srv := fakeprovider.OpenAI(func(n int, _ fakeprovider.Request) fakeprovider.Reply {
		if n == 0 {
			<-release
		}
		return fakeprovider.Reply{Tokens: []string{"ok"}}
	})
	defer srv.Close()
	c, _ := openai.NewChat(openai.Options{BaseURL: srv.URL, Model: "m"})
	obs := &observer{}
	m := resilience.WrapLLM(c, resilience.New(resilience.Options{Provider: "openai", Model: "m", MaxConcurrency: 1, Observer: obs}))
	errs := make(chan error, 2)
	go func() { _, err := m.Complete(context.Background(), req); errs <- err }()
	<-srv.Arrived // the first call holds the only slot
	go func() { _, err := m.Complete(context.Background(), req); errs <- err }()
	// The second call must not reach the provider while the first runs.
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		if srv.Count() > 1 {
			t.Fatal("the second call passed the limit")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.waits) != 2 || max(obs.waits[0], obs.waits[1]) < 100*time.Millisecond {
		t.Fatalf("queue waits %v: the second call's wait is not visible", obs.waits)
	}
}

func TestStreamRetriesOnlyBeforeTheFirstToken(t *testing.T) {
	srv := fakeprovider.OpenAI(func(n int, _ fakeprovider.Request) fakeprovider.Reply {
		if n == 0 {
			return fakeprovider.Reply{Status: 503}
		}
		return fakeprovider.Reply{Tokens: []string{"a", "b"}}
	})
	defer srv.Close()
	m, _, _ := guarded(t, srv, resilience.Options{MaxRetries: 2, BaseDelay: time.Millisecond})
	var got string
	resp, err := m.Stream(context.Background(), req, func(s string) error { got += s; return nil })
	if err != nil || got != "ab" || resp.Content != "ab" || srv.Count() != 2 {
		t.Fatalf("got %q resp %+v err %v after %d requests", got, resp, err, srv.Count())
	}
	// A sink failing after tokens went out is not retried.
	sinkErr := errors.New("client gone")
	_, err = m.Stream(context.Background(), req, func(string) error { return sinkErr })
	if !errors.Is(err, sinkErr) || srv.Count() != 3 {
		t.Fatalf("err %v after %d requests", err, srv.Count())
	}
}
