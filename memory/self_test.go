package memory_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// A store whose vectors outgrow index.heap_vectors_mb keeps the older ones
// in a file beside the vector snapshot that no name reaches (spilled), and
// recalls as a store that keeps them all in the heap, before a restart and
// after it.
func TestVectorsBeyondTheHeapBound(t *testing.T) {
	const n = 1100 // 5 chunks of 256 vectors
	q := "quokka on rottnest island"
	var want []string
	for _, mb := range []int{0, 1} { // all in the heap; 1 MiB: 2.7 chunks of 384 dimensions
		dir := t.TempDir()
		cfg := memorytest.Config(dir)
		cfg.Index.HeapVectorsMB = mb
		clock := clock.NewFake(memorytest.Epoch)
		s := memorytest.Open(t, cfg, clock)
		o := memorytest.NewOwner(t, s, "counter")
		first := o.Text("the zeroth memory mentions a " + q)
		for i := 1; i < n; i++ {
			o.Text(fmt.Sprintf("memory number %d of the counter, about nothing in particular", i))
		}
		s.Index().WaitBuilt()
		const chunk = 256 * 384 * 4
		wantHeap, wantSpilled := int64(5*chunk), int64(0)
		if mb == 1 {
			wantHeap, wantSpilled = 2*chunk, 3*chunk
		}
		if heap, spilled, err := s.Index().FloatBytes(); heap != wantHeap || spilled != wantSpilled || err != nil {
			t.Fatalf("heap_vectors_mb %d: %d bytes of vectors in the heap, %d spilled (%v); want %d and %d", mb, heap, spilled, err, wantHeap, wantSpilled)
		}
		names, err := os.ReadDir(filepath.Join(dir, "vector"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		for _, e := range names {
			if e.Name() != "index.snap" {
				t.Fatalf("%s in the vector directory: the spill has a name", e.Name())
			}
		}
		for round := range 2 {
			hits, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: q, Peek: true})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hits {
				got = append(got, h.CID.String())
			}
			if !slices.Contains(got, first.String()) {
				t.Fatalf("heap_vectors_mb %d, round %d: the quokka is not recalled: %v", mb, round, got)
			}
			if want == nil {
				want = got
			} else if !slices.Equal(got, want) {
				t.Fatalf("heap_vectors_mb %d, round %d: recalled %v, with every vector in the heap %v", mb, round, got, want)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = memorytest.Open(t, cfg, clock)
		}
		s.Close()
	}
}
