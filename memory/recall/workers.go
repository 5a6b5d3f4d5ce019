package recall

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/memoria-ai/memoria/internal/clock"
)

// workers bounds the recalls that compute at once (recall.workers); more
// wait their turn, in order. With as many recalls computing as clients
// ask (16 over two cores), every runnable goroutine shares the cores
// alike, and the store's committer — one goroutine, which every write
// goes through, woken many times a commit — waited its turn for a core
// behind them each time: an insert beside 16 clients' recalls at 100,000
// memories took 0.4 s (p50) to 1.3 s; with 4 computing, 40 ms to 0.36 s,
// and the recalls were no fewer (README, "Recalls take turns").
type workers struct {
	slots   chan struct{}
	clock   clock.Clock
	waiting atomic.Int64
	waits   atomic.Uint64
	waited  atomic.Int64 // nanoseconds, summed
}

// newWorkers lets n recalls compute at once; n 0: the cores the Go
// runtime uses. (Twice the cores until stop 88: once a recall at 1M read
// little from the store, four computing on two cores kept more
// goroutines runnable than the cores ran, and the clients' p99 was
// 147–181 ms where with two it was 95–117, at the same rate.)
func newWorkers(n int, clk clock.Clock) *workers {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	return &workers{slots: make(chan struct{}, n), clock: clk}
}

// enter takes a slot, waiting for one in order; ctx's error when it ends
// first (no slot taken).
func (w *workers) enter(ctx context.Context) error {
	select {
	case w.slots <- struct{}{}:
		return nil
	default:
	}
	w.waiting.Add(1)
	start := w.clock.Now()
	defer func() {
		w.waiting.Add(-1)
		w.waits.Add(1)
		w.waited.Add(int64(w.clock.Since(start)))
	}()
	select {
	case w.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leave gives back a slot enter took.
func (w *workers) leave() { <-w.slots }

// slot is one recall's hold on a worker.
type slot struct {
	w    *workers
	held bool
}

// take waits for a worker (enter).
func (s *slot) take(ctx context.Context) error {
	if err := s.w.enter(ctx); err != nil {
		return err
	}
	s.held = true
	return nil
}

// give gives the worker back, if held.
func (s *slot) give() {
	if s.held {
		s.w.leave()
		s.held = false
	}
}

// WorkerStats are the recalls computing and waiting now (recall.workers)
// and the waits so far.
type WorkerStats struct {
	Workers, Busy, Waiting int
	Waits                  uint64        // recalls that waited for a worker
	Waited                 time.Duration // their waits, summed
}

// Workers are the recalls computing and waiting now, and the waits so far.
func (s *Recaller) Workers() WorkerStats {
	w := s.workers
	return WorkerStats{Workers: cap(w.slots), Busy: len(w.slots), Waiting: int(w.waiting.Load()),
		Waits: w.waits.Load(), Waited: time.Duration(w.waited.Load())}
}
