package tiers

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/memoria-ai/memoria/memory/base"
)

// fscore's cosine is base.Cosine's to within float32's rounding, for embeddings of every length mod four, and 0 wherever
// base.Cosine's is: a zero embedding on either side, lengths that differ,
// none at all.
func TestFscoreCosineIsTheCosine(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 383, 384, 385} {
		for range 200 {
			a, b := vec(n), vec(n)
			got, want := newFquery(b, nil).cosine(a), base.Cosine(a, b)
			if math.Abs(got-want) > 1e-5 {
				t.Fatalf("%d dimensions: cosine %v, base.Cosine %v", n, got, want)
			}
		}
		if got := newFquery(vec(n), nil).cosine(make([]float32, n)); got != 0 {
			t.Fatalf("%d dimensions: cosine with a zero embedding %v", n, got)
		}
		if got := newFquery(make([]float32, n), nil).cosine(vec(n)); got != 0 {
			t.Fatalf("%d dimensions: cosine of a zero query %v", n, got)
		}
		if got := newFquery(vec(n), nil).cosine(vec(n + 1)); got != 0 {
			t.Fatalf("%d dimensions: cosine with %d %v", n, n+1, got)
		}
	}
	if got := newFquery(nil, nil).cosine(nil); got != 0 {
		t.Fatalf("cosine of nothing %v", got)
	}
}

// BenchmarkPlace places a page among 200 segments (tiers.mtm_segments)
// of 384 dimensions and ten keywords each: what an MTM step does for each
// page, and a tier recall (TopSegments) for its query. The segments are
// made apart from one another, as a sona's are over time.
func BenchmarkPlace(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	vec := func() []float32 {
		v := make([]float32, 384)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	word := func() string { return fmt.Sprintf("word%d", rng.Intn(2000)) }
	segs := make([]*Segment, 200)
	for i := range segs {
		segs[i] = &Segment{ID: uint64(i), Embedding: vec()}
		for range 10 {
			segs[i].Keywords = append(segs[i].Keywords, word())
		}
		_ = make([]byte, 64<<10) // apart
	}
	keywords := make([]string, 8)
	for i := range keywords {
		keywords[i] = word()
	}
	q := vec()
	for b.Loop() {
		Place(segs, q, keywords, 0.6)
	}
}
