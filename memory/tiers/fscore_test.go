package tiers

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/memoria-ai/memoria/memory/base"
)

// fscore's cosine is base.Cosine's to within float32's rounding, for
// embeddings of every length mod four, and 0 wherever base.Cosine's is: a
// zero embedding on either side, lengths that differ, none at all.
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
			got, want := newFquery(b, nil).cosine(a, squaredNorm(a)), base.Cosine(a, b)
			if math.Abs(got-want) > 1e-5 {
				t.Fatalf("%d dimensions: cosine %v, base.Cosine %v", n, got, want)
			}
		}
		if got := newFquery(vec(n), nil).cosine(make([]float32, n), 0); got != 0 {
			t.Fatalf("%d dimensions: cosine with a zero embedding %v", n, got)
		}
		if got := newFquery(make([]float32, n), nil).cosine(vec(n), 1); got != 0 {
			t.Fatalf("%d dimensions: cosine of a zero query %v", n, got)
		}
		if got := newFquery(vec(n), nil).cosine(vec(n+1), 1); got != 0 {
			t.Fatalf("%d dimensions: cosine with %d %v", n, n+1, got)
		}
	}
	if got := newFquery(nil, nil).cosine(nil, 0); got != 0 {
		t.Fatalf("cosine of nothing %v", got)
	}
}

// A segment scores the same with the scoring the cache made of it (its
// norm, its keywords' hashes) as from its fields, to the bit, for keywords
// repeated on either side, none, and the same words; a clone has none.
func TestScoringScoresAsTheSegment(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	words := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint("w", rng.Intn(12))
		}
		return out
	}
	vec := func() []float32 {
		v := make([]float32, 1+rng.Intn(8))
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for i := range 5000 {
		seg := &Segment{ID: 1, Keywords: words(rng.Intn(2 * maxKeywords)), Embedding: vec()}
		q := newFquery(vec(), words(rng.Intn(10)))
		if i%7 == 0 {
			q = newFquery(seg.Embedding, seg.Keywords)
		}
		want := fscore(seg, q)
		seg.scoring = scoringOf(seg)
		if got := fscore(seg, q); got != want {
			t.Fatalf("case %d: %v scores %v with its scoring, %v without", i, seg, got, want)
		}
		if seg.clone().scoring != nil {
			t.Fatal("a clone kept the scoring of what it was cloned from")
		}
	}
}

// BenchmarkPlace places a page among 200 segments (tiers.mtm_segments)
// of 384 dimensions and ten keywords each, as an MTM step places each page
// and a tier recall (TopSegments) ranks for its query: segments as the
// cache holds them (scored), and as a step's own copies are (fields).
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
	}
	keywords := make([]string, 8)
	for i := range keywords {
		keywords[i] = word()
	}
	q := vec()
	b.Run("fields", func(b *testing.B) {
		for b.Loop() {
			Place(segs, q, keywords, 0.6)
		}
	})
	for _, seg := range segs {
		seg.scoring = scoringOf(seg)
	}
	b.Run("scored", func(b *testing.B) {
		for b.Loop() {
			Place(segs, q, keywords, 0.6)
		}
	})
}
