package index_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/text"
)

func TestTextIndexRebuiltAndCaughtUp(t *testing.T) {
	dir := t.TempDir()
	clock := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(dir)
	s := memorytest.Open(t, cfg, clock)
	o := memorytest.NewOwner(t, s, "a")
	mems := o.Conversation(clock, 40, 11)
	bm25 := func(s *memory.Self, q string) map[string]bool {
		if err := s.Text.Settle(context.Background()); err != nil {
			t.Fatal(err)
		}
		hits, err := s.Text.Raw().Search(q, text.SearchOptions{K: 100})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, h := range hits {
			out[h.ID] = true
		}
		return out
	}
	want := bm25(s, "tomato lisbon sunset")
	if len(want) == 0 {
		t.Fatal("nothing indexed")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Deleted: rebuilt from the store at the next open.
	if err := os.RemoveAll(filepath.Join(dir, "text")); err != nil {
		t.Fatal(err)
	}
	s = memorytest.Open(t, cfg, clock)
	if got := bm25(s, "tomato lisbon sunset"); !maps.Equal(got, want) {
		t.Fatalf("rebuilt index finds %d, before %d", len(got), len(want))
	}
	if n, _ := s.Text.Raw().Len(); n != uint64(len(mems)) {
		t.Fatalf("rebuilt index holds %d documents, want %d", n, len(mems))
	}
	s.Close()

	// A crash lost the last batches: the index is behind its store.
	// Simulate it by removing the newest documents and winding the
	// watermark back; the next open replays the insertion log.
	idx, err := text.Open(filepath.Join(dir, "text"))
	if err != nil {
		t.Fatal(err)
	}
	var lost []text.Doc
	for _, c := range mems[25:] {
		lost = append(lost, text.Doc{ID: c.String()})
	}
	if err := idx.Delete(lost, 25); err != nil { // memory i has log seq i+1
		t.Fatal(err)
	}
	if n, _ := idx.Len(); n != 25 {
		t.Fatalf("index holds %d docs after the simulated loss, want 25", n)
	}
	idx.Close()
	s = memorytest.Open(t, cfg, clock)
	defer s.Close()
	if got := bm25(s, "tomato lisbon sunset"); !maps.Equal(got, want) {
		t.Fatalf("caught-up index finds %d, before %d", len(got), len(want))
	}
	if n, _ := s.Text.Raw().Len(); n != uint64(len(mems)) {
		t.Fatalf("index holds %d docs, store %d memories", n, len(mems))
	}
}
