package recall_test

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/recall"
)

// The query log keeps the latest recall.query_log_keep records: older
// ones are deleted once a committed recall finds them over, across a
// restart with a smaller bound too; 0 keeps every one.
func TestQueryLogKeepsTheLatest(t *testing.T) {
	dir := t.TempDir()
	fake := clock.NewFake(memorytest.Epoch)
	ctx := context.Background()
	open := func(keep int) *memory.Self {
		cfg := memorytest.Config(dir)
		cfg.Recall.QueryLogKeep = keep
		return memorytest.Open(t, cfg, fake)
	}
	recalls := func(s *memory.Self, sona string, n int) []int64 {
		var times []int64
		for range n {
			fake.Advance(time.Second) // each record its own key (time, sona)
			if _, err := memorytest.Recall(s, ctx, recall.Query{Sona: sona, Text: "tomato basil garden"}); err != nil {
				t.Fatal(err)
			}
			times = append(times, fake.Now().UnixNano())
		}
		if err := s.Store().Barrier(ctx); err != nil {
			t.Fatal(err)
		}
		return times
	}
	held := func(s *memory.Self) []int64 {
		t.Helper()
		log, err := s.Recaller.QueryLog(1000)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, e := range log {
			got = append(got, e.Time)
		}
		slices.Reverse(got)
		return got
	}
	// logged checks what the log holds once the background's deletions
	// are done (polled), or after PruneQueryLog (now).
	logged := func(s *memory.Self, when string, want []int64, now bool) {
		t.Helper()
		if now {
			if err := s.Recaller.PruneQueryLog(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			got := held(s)
			if slices.Equal(got, want) {
				return
			}
			if now || time.Now().After(deadline) {
				t.Fatalf("%s: the query log holds the recalls of %v, want %v", when, got, want)
			}
			runtime.Gosched() // polling the background's deletions, with a deadline
		}
	}

	s := open(10)
	o := memorytest.NewOwner(t, s, "gardener")
	o.Conversation(fake, 10, 3)
	times := recalls(s, o.Sona, 25)
	logged(s, "25 recalls, keep 10", times[15:], false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(4)
	if got := held(s); !slices.Equal(got, times[15:]) {
		t.Fatalf("reopened to keep 4: deleted before a recall: %v", got)
	}
	logged(s, "reopened to keep 4, pruned", times[21:], true)
	times = append(times, recalls(s, o.Sona, 3)...)
	logged(s, "3 recalls more", times[len(times)-4:], false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(0)
	defer s.Close()
	more := recalls(s, o.Sona, 30)
	logged(s, "keep 0", append(slices.Clone(times[len(times)-4:]), more...), true)
}
