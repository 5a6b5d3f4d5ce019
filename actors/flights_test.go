package actors

import (
	"context"
	"errors"
	"testing"
	"time"
)

// write is a Settling a test settles.
type write struct {
	done chan struct{}
	err  error
}

func newWrite() *write                   { return &write{done: make(chan struct{})} }
func (w *write) Done() <-chan struct{}   { return w.done }
func (w *write) Err() error              { return w.err }
func (w *write) settle(err error) *write { w.err = err; close(w.done); return w }

// TestFlightsWaitForTheirSonaOnly: a sona's reload waits for its own
// chain's writes in flight, not for another sona's, and forgets those
// that settled.
func TestFlightsWaitForTheirSonaOnly(t *testing.T) {
	var f flights
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.wait(ctx, "a"); err != nil {
		t.Fatalf("nothing in flight: %v", err)
	}
	other := newWrite()
	f.add("b", other) // never settles in this test
	mine := newWrite()
	id := f.add("a", mine)
	f.add("a", newWrite().settle(errors.New("failed"))) // settled (failed) already
	waited := make(chan error, 1)
	go func() { waited <- f.wait(ctx, "a") }()
	select {
	case err := <-waited:
		t.Fatalf("returned (%v) before the sona's write settled", err)
	default:
	}
	mine.settle(nil)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if n := len(f.by["a"]); n != 0 {
		t.Fatalf("%d settled writes of a still held", n)
	}
	f.done("a", id) // the actor's own report after wait forgot it: harmless
	short, stop := context.WithCancel(ctx)
	stop()
	if err := f.wait(short, "b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("b's write never settles: err %v", err)
	}
	if len(f.by["b"]) != 1 {
		t.Fatal("b's write in flight was forgotten")
	}
}
