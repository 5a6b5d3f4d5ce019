package glove_test

import (
	"context"
	"testing"

	"github.com/memoria-ai/memoria/memory/base"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/llm/model2vec/glove"
)

func embed(t testing.TB, texts ...string) [][]float32 {
	t.Helper()
	e, err := glove.New()
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestTable(t *testing.T) {
	e, err := glove.New()
	if err != nil {
		t.Fatal(err)
	}
	if e.Dims() != glove.Dims || e.ID() != "model2vec/glove-6b-100d-30k/100" {
		t.Fatalf("dims %d, id %s", e.Dims(), e.ID())
	}
	if again, _ := glove.New(); again != e {
		t.Fatal("the table is decoded again")
	}
	// Frequent words are known (the package has no numbers); punctuation
	// is not a token.
	for _, w := range []string{"dog", "puppy", "lisbon", "summer", "violin"} {
		if ids := e.Tokenize(w); len(ids) != 1 {
			t.Errorf("%q → %v", w, ids)
		}
	}
	if ids := e.Tokenize("Dog, puppy!"); len(ids) != 2 {
		t.Errorf("punctuation tokenized: %v", ids)
	}
}

// The table has word semantics the hashed embedder lacks: synonyms and
// paraphrases without a shared word are near.
func TestParaphrase(t *testing.T) {
	v := embed(t, "puppy", "dog", "invoice",
		"I adopted a puppy last week", "we got a new dog", "the tax return is due",
		"the dog", "dog")
	if near, far := base.Cosine(v[0], v[1]), base.Cosine(v[0], v[2]); near <= far+0.3 {
		t.Errorf("cos(puppy, dog) %.3f, cos(puppy, invoice) %.3f", near, far)
	}
	if near, far := base.Cosine(v[3], v[4]), base.Cosine(v[3], v[5]); near <= far {
		t.Errorf("paraphrase %.3f, unrelated %.3f", near, far)
	}
	// SIF: a stop word barely moves a text.
	if c := base.Cosine(v[6], v[7]); c < 0.99 {
		t.Errorf("cos(the dog, dog) %.4f", c)
	}
}

// BenchmarkEmbed reports texts/s for LoCoMo-sized turns, for the table
// and for the hashed embedder beside it.
func BenchmarkEmbed(b *testing.B) {
	table, err := glove.New()
	if err != nil {
		b.Fatal(err)
	}
	texts := []string{
		"Hey Mel! Good to see you! How have you been?",
		"I went to a LGBTQ support group yesterday and it was so powerful.",
		"That's great to hear! I've been painting a lot lately, a sunset over the lake [shares an image: a painting of a sunset]",
		"What are your plans for the summer? We are thinking about going camping in the mountains with the kids.",
	}
	ctx := context.Background()
	for _, e := range []llm.Embedder{table, llm.NewHashedEmbedder(llm.DefaultDims)} {
		b.Run(e.ID(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Embed(ctx, texts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(texts))/b.Elapsed().Seconds(), "texts/s")
		})
	}
}
