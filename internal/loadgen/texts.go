package loadgen

import (
	"math/rand/v2"
	"strings"
)

// Texts makes reproducible sentences of made-up, pronounceable words, so
// that texts share words (recall has work to do) without a word list.
type Texts struct {
	words []string
}

// NewTexts returns the generator of seed: a vocabulary of 4,000 words.
func NewTexts(seed int64) *Texts {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	cons := []string{"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "ch", "sh", "tr", "st"}
	vows := []string{"a", "e", "i", "o", "u", "ai", "ou", "ea"}
	seen := map[string]bool{}
	var words []string
	for len(words) < 4000 {
		var b strings.Builder
		for range 1 + rng.IntN(3) {
			b.WriteString(cons[rng.IntN(len(cons))])
			b.WriteString(vows[rng.IntN(len(vows))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	return &Texts{words: words}
}

// Word draws one word, Zipf-like: low indexes of the vocabulary are
// common words, high ones rare.
func (t *Texts) Word(rng *rand.Rand) string {
	return t.words[int(float64(len(t.words))*rng.Float64()*rng.Float64())]
}

// Sentence is between lo and hi words.
func (t *Texts) Sentence(rng *rand.Rand, lo, hi int) string {
	w := make([]string, lo+rng.IntN(hi-lo+1))
	for i := range w {
		w[i] = t.Word(rng)
	}
	return strings.Join(w, " ")
}
