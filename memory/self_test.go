package memory_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/recall"
)

func TestReopenKeepsSonasHeadsAndRecall(t *testing.T) {
	dir := t.TempDir()
	clock := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(dir), clock)
	o := memorytest.NewOwner(t, s, "gardener")
	for i, line := range []string{
		"I planted tomatoes in the east bed",
		"Basil keeps aphids away from tomatoes",
		"The compost needs turning every two weeks",
		"Slugs ate the lettuce",
	} {
		clock.Set(memorytest.Epoch.Add(time.Duration(i) * time.Minute))
		o.Text(line)
	}
	ctx := context.Background()
	q := recall.Query{Sona: o.Sona, Text: "what keeps aphids away?", Peek: true}
	before, err := memorytest.Recall(s, ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	recBefore, _ := s.Sonas.Get(o.Sona)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = memorytest.Open(t, memorytest.Config(dir), clock)
	defer s.Close()
	recAfter, err := s.Sonas.Get(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	if recAfter.GetHead() != recBefore.GetHead() || recAfter.Length != recBefore.Length || recAfter.Name != "gardener" {
		t.Fatalf("sona after reopen %v, before %v", recAfter, recBefore)
	}
	after, err := memorytest.Recall(s, ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("recall returned %d, before %d", len(after), len(before))
	}
	for i := range after {
		if after[i].CID != before[i].CID {
			t.Fatalf("recall %d: %s, before %s", i, after[i].CID, before[i].CID)
		}
	}
	if !strings.Contains(after[0].Memory.Text()+after[1].Memory.Text(), "Basil") {
		t.Fatalf("the aphid memory is not among the first results: %q, %q", after[0].Memory.Text(), after[1].Memory.Text())
	}
}

func TestOpenRefusesAnotherEmbedder(t *testing.T) {
	dir := t.TempDir()
	s := memorytest.Open(t, memorytest.Config(dir), nil)
	s.Close()
	_, err := memory.Open(context.Background(), memory.Options{Config: memorytest.Config(dir), Embedder: llm.NewHashedEmbedder(128)})
	if !errors.Is(err, base.ErrEmbedderMismatch) {
		t.Fatalf("err = %v, want base.ErrEmbedderMismatch", err)
	}
}
