package recall_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/recall"
)

// oneWorker is a self whose recalls take turns on one worker
// (recall.workers), reranked by rr when it is set, with a conversation to
// recall from, and a query of it.
func oneWorker(t *testing.T, rr llm.Reranker) (*memory.Self, recall.Query) {
	t.Helper()
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	cfg.Recall.Workers = 1
	s, err := memorytest.OpenWith(memory.Options{Config: cfg, Clock: clk, Reranker: rr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	o := memorytest.NewOwner(t, s, "a")
	o.Conversation(clk, 20, 3)
	return s, recall.Query{Sona: o.Sona, Text: "garden tomato basil", K: 4, Peek: true}
}

// A recall computes only with a worker (recall.workers): with the one
// worker held it waits, counted, until the worker is given back; one whose
// context ends while it waits fails with the context's error and takes no
// worker.
func TestRecallsTakeTurns(t *testing.T) {
	s, q := oneWorker(t, nil)
	if w := s.Recaller.Workers(); w.Workers != 1 || w.Busy != 0 || w.Waiting != 0 {
		t.Fatalf("at rest: %+v", w)
	}

	release, err := s.Recaller.HoldWorker(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := memorytest.Recall(s, context.Background(), q)
		done <- err
	}()
	testutil.Eventually(t, "the recall waits for the worker", func() bool { return s.Recaller.Workers().Waiting == 1 })
	select {
	case err := <-done:
		t.Fatalf("a recall ran without a worker (err %v)", err)
	default:
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w := s.Recaller.Workers(); w.Busy != 0 || w.Waiting != 0 || w.Waits != 1 {
		t.Fatalf("after the wait: %+v", w)
	}

	// Given up while waiting: the context's error, no worker kept.
	release, err = s.Recaller.HoldWorker(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := memorytest.Recall(s, ctx, q)
		done <- err
	}()
	testutil.Eventually(t, "the second recall waits", func() bool { return s.Recaller.Workers().Waiting == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a recall given up while waiting: %v, want context.Canceled", err)
	}
	release()
	if w := s.Recaller.Workers(); w.Busy != 0 || w.Waiting != 0 {
		t.Fatalf("after a recall gave up: %+v", w)
	}
	if _, err := memorytest.Recall(s, context.Background(), q); err != nil {
		t.Fatal(err)
	}
}

// blocking is a reranker that waits to be let go, telling when it is
// called.
type blocking struct{ called, release chan struct{} }

func (b *blocking) Rerank(_ context.Context, _ string, docs []string) ([]float64, error) {
	b.called <- struct{}{}
	<-b.release
	return make([]float64, len(docs)), nil
}

// A reranker's call waits on another machine: the recall gives its worker
// back meanwhile, and takes one again to finish.
func TestRerankGivesTheWorkerBack(t *testing.T) {
	rr := &blocking{called: make(chan struct{}), release: make(chan struct{})}
	s, q := oneWorker(t, rr)
	done := make(chan error, 1)
	go func() {
		_, err := memorytest.Recall(s, context.Background(), q)
		done <- err
	}()
	<-rr.called
	held, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	release, err := s.Recaller.HoldWorker(held)
	if err != nil {
		t.Fatalf("the worker, while the recall waits on its reranker: %v", err)
	}
	close(rr.release)
	testutil.Eventually(t, "the reranked recall waits for a worker to finish", func() bool { return s.Recaller.Workers().Waiting == 1 })
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w := s.Recaller.Workers(); w.Busy != 0 || w.Waiting != 0 {
		t.Fatalf("after: %+v", w)
	}
}
