package llm

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/memoria-ai/memoria/memory/base"
)

// benchText is a ~200-character sentence used by the known-answer test and
// the benchmark.
const benchText = "On Saturday morning Ada walked her two dogs along the harbour in Lisbon, " +
	"then spent the whole afternoon painting sunsets and talking with her sister " +
	"about the looming quarterly tax filing deadline."

func embedOne(t *testing.T, e *HashedEmbedder, text string) []float32 {
	t.Helper()
	vs, err := e.Embed(context.Background(), []string{text})
	if err != nil {
		t.Fatalf("Embed(%q): %v", text, err)
	}
	if len(vs) != 1 {
		t.Fatalf("Embed(%q) returned %d vectors, want 1", text, len(vs))
	}
	return vs[0]
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

var embedTexts = []string{
	"",
	"   ",
	"the and of to",
	"!!! ???",
	"I love painting sunsets",
	"she paints a sunset",
	"the quarterly tax filing deadline",
	"Привет мир 東京 नमस्ते",
	"word word word word word other",
	benchText,
}

func TestHashedEmbedderDeterministic(t *testing.T) {
	e1, e2 := NewHashedEmbedder(DefaultDims), NewHashedEmbedder(DefaultDims)
	for _, text := range embedTexts {
		t.Run(text, func(t *testing.T) {
			a, b, c := embedOne(t, e1, text), embedOne(t, e1, text), embedOne(t, e2, text)
			if !sameBits(a, b) {
				t.Error("two calls on one embedder differ")
			}
			if !sameBits(a, c) {
				t.Error("two embedder instances differ")
			}
		})
	}
}

func TestHashedEmbedderBatchMatchesSingle(t *testing.T) {
	e := NewHashedEmbedder(DefaultDims)
	batch, err := e.Embed(context.Background(), embedTexts)
	if err != nil {
		t.Fatal(err)
	}
	if len(batch) != len(embedTexts) {
		t.Fatalf("got %d vectors for %d texts", len(batch), len(embedTexts))
	}
	for i, text := range embedTexts {
		if !sameBits(batch[i], embedOne(t, e, text)) {
			t.Errorf("batch vector %d (%q) differs from single embedding", i, text)
		}
	}
}

func TestHashedEmbedderUnitNormAndDims(t *testing.T) {
	for _, dims := range []int{1, 2, 8, 64, DefaultDims, 1536} {
		e := NewHashedEmbedder(dims)
		if e.Dims() != dims {
			t.Fatalf("Dims() = %d, want %d", e.Dims(), dims)
		}
		for _, text := range embedTexts {
			v := embedOne(t, e, text)
			if len(v) != dims {
				t.Errorf("dims %d, %q: len = %d", dims, text, len(v))
			}
			if n := math.Sqrt(base.Dot(v, v)); math.Abs(n-1) > 1e-5 {
				t.Errorf("dims %d, %q: norm = %v, want 1", dims, text, n)
			}
		}
	}
}

func TestNewHashedEmbedderDefaults(t *testing.T) {
	tests := []struct {
		dims     int
		wantDims int
		wantID   string
	}{
		{0, DefaultDims, "hashed/v1/384"},
		{-7, DefaultDims, "hashed/v1/384"},
		{384, 384, "hashed/v1/384"},
		{1024, 1024, "hashed/v1/1024"},
	}
	for _, tt := range tests {
		e := NewHashedEmbedder(tt.dims)
		if e.Dims() != tt.wantDims || e.ID() != tt.wantID {
			t.Errorf("NewHashedEmbedder(%d): Dims()=%d ID()=%q, want %d %q",
				tt.dims, e.Dims(), e.ID(), tt.wantDims, tt.wantID)
		}
	}
}

func TestHashedEmbedderSimilarity(t *testing.T) {
	tests := []struct {
		anchor, related, unrelated string
	}{
		{"I love painting sunsets", "she paints a sunset", "the quarterly tax filing deadline"},
		{"my sister lives in Lisbon", "her sister moved to Lisbon last year", "I love painting sunsets"},
		{"running every morning", "she runs in the morning", "the database migration failed"},
		{"allergic to peanuts", "peanut allergy", "favourite colour is blue"},
	}
	e := NewHashedEmbedder(DefaultDims)
	for _, tt := range tests {
		t.Run(tt.anchor, func(t *testing.T) {
			a := embedOne(t, e, tt.anchor)
			rel := base.Dot(a, embedOne(t, e, tt.related))
			unrel := base.Dot(a, embedOne(t, e, tt.unrelated))
			if rel <= unrel {
				t.Errorf("cos(related)=%.3f <= cos(unrelated)=%.3f", rel, unrel)
			}
		})
	}
}

func TestHashedEmbedderInflectionsAlign(t *testing.T) {
	// Texts that differ only by inflection or stop words tokenize the same,
	// so their vectors are identical.
	e := NewHashedEmbedder(DefaultDims)
	tests := [][2]string{
		{"running", "runs"},
		{"painted", "painting"},
		{"The Sunsets", "a sunset"},
		{"she loved dogs", "loving the dog"},
	}
	for _, tt := range tests {
		if !sameBits(embedOne(t, e, tt[0]), embedOne(t, e, tt[1])) {
			t.Errorf("%q and %q embed differently", tt[0], tt[1])
		}
	}
}

func TestHashedEmbedderFallback(t *testing.T) {
	// Texts without content words fall back to hashing the raw text.
	e := NewHashedEmbedder(DefaultDims)
	tests := []struct {
		a, b string
		same bool
	}{
		{"", "", true},
		{"", "   ", true},
		{"The", "the", true},
		{"the", "a", false},
		{"...", "!!!", false},
		{"", "the", false},
	}
	for _, tt := range tests {
		if got := sameBits(embedOne(t, e, tt.a), embedOne(t, e, tt.b)); got != tt.same {
			t.Errorf("same(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.same)
		}
	}
}

func TestHashedEmbedderContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	vs, err := NewHashedEmbedder(DefaultDims).Embed(ctx, []string{"hello"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if vs != nil {
		t.Errorf("vectors = %v, want nil", vs)
	}
}

func TestHashedEmbedderEmptyBatch(t *testing.T) {
	vs, err := NewHashedEmbedder(DefaultDims).Embed(context.Background(), nil)
	if err != nil || len(vs) != 0 {
		t.Errorf("Embed(nil) = %v, %v; want empty, nil", vs, err)
	}
}

// TestHashedEmbedderKnownAnswer pins the output of the algorithm. If it
// fails, the embedding space changed: bump the version in ID ("hashed/v2")
// so stored vectors are not compared with new ones, then update the values.
func TestHashedEmbedderKnownAnswer(t *testing.T) {
	tests := []struct {
		dims int
		text string
		want [8]float32
	}{
		{DefaultDims, benchText, [8]float32{
			0, 0, 0.0266242288, 0, 0, 0.0212993827, 0, -0.0266242288,
		}},
		{16, "I love painting sunsets; painting is calm", [8]float32{
			-0.463053495, -0.627214134, 0, -0.0784017667, 0, 0.03858779, 0.0784017667, 0.347290099,
		}},
	}
	for _, tt := range tests {
		got := embedOne(t, NewHashedEmbedder(tt.dims), tt.text)
		for i, w := range tt.want {
			// A tolerance instead of bit equality: math.Log may differ in
			// the last ulp between architectures.
			if math.Abs(float64(got[i]-w)) > 1e-6 {
				t.Errorf("dims %d, %q: component %d = %.9g, want %.9g", tt.dims, tt.text, i, got[i], w)
			}
		}
	}
}

func TestHashedEmbedderConcurrent(t *testing.T) {
	e := NewHashedEmbedder(DefaultDims)
	want, err := e.Embed(context.Background(), embedTexts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			got, err := e.Embed(context.Background(), embedTexts)
			if err != nil {
				errs <- err.Error()
				return
			}
			for i := range got {
				if !sameBits(got[i], want[i]) {
					errs <- "concurrent result differs for " + embedTexts[i]
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
}

func BenchmarkHashedEmbed(b *testing.B) {
	e := NewHashedEmbedder(DefaultDims)
	ctx := context.Background()
	texts := []string{benchText}
	b.SetBytes(int64(len(benchText)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
}

func TestNormalize(t *testing.T) {
	v := []float32{3, 4}
	if !Normalize(v) || v[0] != 0.6 || v[1] != 0.8 {
		t.Fatalf("Normalize(3,4) = %v", v)
	}
	again := append([]float32(nil), v...)
	if !Normalize(again) || again[0] != v[0] || again[1] != v[1] {
		t.Fatalf("normalising a unit vector changed it: %v → %v", v, again)
	}
	for _, bad := range [][]float32{{0, 0}, {float32(math.NaN()), 1}, {float32(math.Inf(1)), 0}} {
		keep := append([]float32(nil), bad...)
		if Normalize(bad) {
			t.Errorf("Normalize(%v) = true, want false", keep)
		}
	}
}
