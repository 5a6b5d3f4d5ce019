package store_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/memory/store"
)

// A buffer holding twice its bound refuses what recalls leave (below it,
// not); dropping it while its write is in flight, not failed, it says its
// writes fall behind — not that they cannot be written — and, once the
// write is done, that it is written again.
func TestBufferWriterSaysItFallsBehind(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	defer s.Close()
	var (
		mu   sync.Mutex
		logs bytes.Buffer
	)
	written := make(chan struct{}, 1)
	w := store.NewBufferWriter(&mu, s, func(store.Tx) error { return nil }, func() { written <- struct{}{} },
		store.BufferWriterOptions{Every: time.Hour, What: "test: the buffered things", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	release := make(chan struct{})
	blocker := s.Submit(func(store.Tx) error { <-release; return nil }) // the committer waits on it
	if w.Kick(func() bool { return true }) == nil {
		t.Fatal("nothing submitted")
	}
	mu.Lock()
	for _, held := range []int{4, 5} { // twice its bound of 2, and past it
		if !w.Refuses(held, 2) {
			t.Fatalf("a buffer holding %d, bounded at 2, takes more", held)
		}
	}
	if w.Refuses(3, 2) {
		t.Fatal("a buffer holding 3, bounded at 2, refuses")
	}
	mu.Unlock()
	close(release)
	if err := blocker.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-written:
	case <-time.After(time.Minute):
		t.Fatal("the write did not end")
	}
	mu.Lock() // the write's end logs under mu, before ended
	got := logs.String()
	mu.Unlock()
	if n := strings.Count(got, "writing test: the buffered things falls behind"); n != 1 {
		t.Errorf("%d warnings that the writes fall behind, want 1:\n%s", n, got)
	}
	if strings.Contains(got, "cannot be written") {
		t.Errorf("a write in flight, not failed, is said to be impossible:\n%s", got)
	}
	if !strings.Contains(got, "test: the buffered things is written again") || !strings.Contains(got, "recalls_dropped=2") {
		t.Errorf("no note that the writes caught up, with the recalls dropped:\n%s", got)
	}
}
