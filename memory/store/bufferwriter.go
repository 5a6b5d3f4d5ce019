package store

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
)

// BufferWriter writes what a buffer keeps in memory for a while — what a
// recall leaves behind that nobody waits for: the co-access
// strengthening, the touches of the memories it returned — through a
// committer, one write at a time, and notes when they fail: meanwhile the
// buffer tries again now and then and bounds what it keeps. It shares the
// buffer's lock, under which the buffer keeps what waits, and keeps the
// timer of the buffer's next write.
type BufferWriter struct {
	mu    sync.Locker // the buffer's
	c     Committer
	write Op
	log   *slog.Logger
	what  string // for the log: "co-access: the buffered strengthening"
	ended func()
	every time.Duration
	clock clock.Clock

	inFlight *BufferWrite // the write submitted, nil when none
	timer    clock.Timer  // armed while what waits is not due
	failing  bool
	dropped  int
	closed   bool
}

// BufferWrite is a write a BufferWriter submitted.
type BufferWrite struct {
	done chan struct{}
	err  error
}

// BufferWriterOptions configure a BufferWriter.
type BufferWriterOptions struct {
	// Every is how long what a buffer keeps waits before its write (Arm).
	Every  time.Duration
	Clock  clock.Clock
	Logger *slog.Logger
	// What names what is written, for the log: "touches: the buffered
	// touches".
	What string
}

// NewBufferWriter writes through c with write, which takes from the
// buffer under mu what it writes. ended is called under mu once a write
// has ended (the buffer schedules what waits).
func NewBufferWriter(mu sync.Locker, c Committer, write Op, ended func(), o BufferWriterOptions) *BufferWriter {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &BufferWriter{mu: mu, c: c, write: write, log: log, what: o.What, ended: ended, every: o.Every, clock: clock.Or(o.Clock)}
}

// Arm has fire called (without mu) Every from now, unless the timer is
// armed already (mu held).
func (w *BufferWriter) Arm(fire func()) {
	if w.timer != nil {
		return
	}
	w.timer = w.clock.AfterFunc(w.every, func() {
		w.mu.Lock()
		w.timer = nil
		w.mu.Unlock()
		fire()
	})
}

// disarm stops the timer (mu held).
func (w *BufferWriter) disarm() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

// Close stops the timer for good (mu held): the buffer, closing, arms and
// kicks nothing more (Closed).
func (w *BufferWriter) Close() {
	w.closed = true
	w.disarm()
}

// Closed reports whether Close was called (mu held).
func (w *BufferWriter) Closed() bool { return w.closed }

// Busy reports whether a write is in flight (mu held).
func (w *BufferWriter) Busy() bool { return w.inFlight != nil }

// Failing reports whether the last write failed (mu held): the buffer then
// tries again only now and then, and bounds what it keeps.
func (w *BufferWriter) Failing() bool { return w.failing }

// Refuses reports whether a buffer holding held, bounded at max, takes
// nothing more from a recall (mu held). Past max a write is submitted at
// once; what waits may still reach twice max while writes fail or fall
// behind, and past that the recall's leavings are dropped — memory is
// not let grow without bound —, counted, and said so the first time.
func (w *BufferWriter) Refuses(held, max int) bool {
	if held < 2*max {
		return false
	}
	if w.dropped++; w.dropped > 1 {
		return true
	}
	if w.failing {
		w.log.Warn(w.what+" cannot be written; what recalls leave is dropped until it can", "held", held)
	} else {
		w.log.Warn("writing "+w.what+" falls behind; what recalls leave is dropped until it catches up", "held", held)
	}
	return true
}

// Kick submits a write, and disarms the timer, unless one is in flight,
// or unless ready, called under mu, reports that nothing waits; it
// returns the write in flight (nil: none). Call it without mu.
func (w *BufferWriter) Kick(ready func() bool) *BufferWrite {
	w.mu.Lock()
	if f := w.inFlight; f != nil {
		w.mu.Unlock()
		return f
	}
	if !ready() {
		w.mu.Unlock()
		return nil
	}
	w.disarm()
	f := &BufferWrite{done: make(chan struct{})}
	w.inFlight = f
	w.mu.Unlock()
	// Not under mu: the committer takes it (a commit's hook adds to the
	// buffer).
	p := w.c.Submit(w.write)
	go func() {
		<-p.Done()
		f.err = p.Err()
		if f.err != nil && !errors.Is(f.err, base.ErrClosed) {
			w.log.Warn("writing "+w.what+" failed; it is tried again", "err", f.err)
		}
		w.mu.Lock()
		w.inFlight = nil
		if w.failing = f.err != nil; !w.failing && w.dropped > 0 {
			w.log.Warn(w.what+" is written again", "recalls_dropped", w.dropped)
			w.dropped = 0
		}
		w.ended()
		w.mu.Unlock()
		close(f.done)
	}()
	return f
}

// Flush submits writes (kick) until left, called under mu, reports that
// what it waits for is written, or returns the first failure.
func (w *BufferWriter) Flush(ctx context.Context, kick func() *BufferWrite, left func() bool) error {
	for {
		f := kick()
		if f == nil {
			return nil
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if f.err != nil {
			return f.err
		}
		w.mu.Lock()
		more := left()
		w.mu.Unlock()
		if !more {
			return nil
		}
	}
}
