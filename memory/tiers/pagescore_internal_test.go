package tiers

import (
	"errors"
	"math"
	"math/rand"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/messages"
)

// pageScore reads from a page record the seq and the score that decoding
// it and TopPages give, to the bit: records with the packed embedding,
// with the floats of an older build, with both (the floats win), with
// neither, of other dimensions than the query's; and it finds the
// records decodePage finds corrupt.
func TestPageScoreAsTheDecodedPage(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	q := vec(384)
	for i := range 2000 {
		p := &messages.Page{Seq: rng.Uint64() >> rng.Intn(64), Q: "bafyq", R: "bafyr", T: rng.Int63(),
			MetaChain: &messages.MetaChain{Summary: "a summary", Start: 3}, Keywords: []string{"garden", "violin"}}
		dims := 384
		if i%10 == 9 {
			dims = 1 + rng.Intn(500)
		}
		switch i % 4 {
		case 0:
			p.Embedding8 = PackEmbedding(vec(dims))
		case 1:
			p.Embedding = vec(dims)
		case 2:
			p.Embedding, p.Embedding8 = vec(dims), PackEmbedding(vec(dims))
		}
		if i%50 == 49 {
			p.Embedding8 = PackEmbedding(make([]float32, dims)) // all zero
		}
		v, err := proto.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		seq, score, err := pageScore(v, q)
		if err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		d, err := decodePage(v, "a")
		if err != nil {
			t.Fatal(err)
		}
		if want := TopPages([]*messages.Page{d}, q, 1)[0].Score; seq != p.Seq || math.Float64bits(score) != math.Float64bits(want) {
			t.Fatalf("page %d: seq %d, score %v; decoded: seq %d, score %v", i, seq, score, p.Seq, want)
		}
	}
	for _, rec := range [][]byte{
		{0x52, 0x03, 1, 2, 3},                // embedding8 shorter than its scale and a dimension
		{0x52, 0x05, 0, 0, 0xc0, 0x7f, 1},    // a NaN scale
		{0x3a, 0x03, 1, 2, 3},                // floats of 3 bytes
		{0x08},                               // a seq cut short
		{0x52, 0x09, 0, 0, 0x80, 0x3f, 1, 2}, // bytes cut short
	} {
		_, derr := decodePage(rec, "a")
		if _, _, err := pageScore(rec, q); !errors.Is(err, base.ErrCorrupt) || !errors.Is(derr, base.ErrCorrupt) {
			t.Fatalf("record %x: pageScore %v, decodePage %v", rec, err, derr)
		}
	}
}
