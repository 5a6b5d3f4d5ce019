package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/memoria-ai/memoria/internal/eval"
	"github.com/memoria-ai/memoria/internal/loadgen"
)

// Corpus is the texts of a run: the i-th memory's text and a query that
// should recall it, both reproducible from the seed alone, so a store
// built by one run can be queried by the next.
type Corpus interface {
	// Name says where the texts come from ("synthetic", "locomo").
	Name() string
	// Text is the content of the i-th memory.
	Text(i int) string
}

// Synthetic is the default corpus: sentences of 6 to 20 made-up words
// drawn Zipf-like from a seeded vocabulary of 4,000 (loadgen.Texts), the
// i-th from its own random source.
type Synthetic struct {
	seed  int64
	texts *loadgen.Texts
}

// NewSynthetic returns the synthetic corpus of seed.
func NewSynthetic(seed int64) *Synthetic {
	return &Synthetic{seed: seed, texts: loadgen.NewTexts(seed)}
}

func (s *Synthetic) Name() string { return "synthetic" }

func (s *Synthetic) Text(i int) string {
	return s.texts.Sentence(rand.New(rand.NewPCG(uint64(s.seed), uint64(i))), 6, 20)
}

// LoCoMo is the turns of the LoCoMo conversations ("Speaker: text", with
// an image's caption), read from their directory and never copied: the
// i-th text is turn i mod n; the repetitions past the first (i ≥ n) have a
// quarter of their words replaced by words of the synthetic vocabulary,
// so that they are new memories rather than duplicates.
type LoCoMo struct {
	seed  int64
	turns []string
	texts *loadgen.Texts
}

// LoadLoCoMo reads the conversations in dir (e.g. ../shared/data/locomo).
func LoadLoCoMo(dir string, seed int64) (*LoCoMo, error) {
	convs, err := eval.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("bench: LoCoMo: %w", err)
	}
	var turns []string
	for _, c := range convs {
		for _, s := range c.Sessions {
			for _, t := range s.Turns {
				if text := strings.TrimSpace(t.Content()); text != "" {
					turns = append(turns, t.Speaker+": "+text)
				}
			}
		}
	}
	if len(turns) == 0 {
		return nil, fmt.Errorf("bench: LoCoMo: no turns in %s", dir)
	}
	return &LoCoMo{seed: seed, turns: turns, texts: loadgen.NewTexts(seed)}, nil
}

func (l *LoCoMo) Name() string { return "locomo" }

func (l *LoCoMo) Text(i int) string {
	t := l.turns[i%len(l.turns)]
	if i < len(l.turns) {
		return t
	}
	rng := rand.New(rand.NewPCG(uint64(l.seed), uint64(i)))
	words := strings.Fields(t)
	for j := range words {
		if rng.IntN(4) == 0 {
			words[j] = l.texts.Word(rng)
		}
	}
	return strings.Join(words, " ")
}

// queryWords is how many words of a memory's text make a query for it.
const queryWords = 4

// Query is a query that should recall text: queryWords of its words,
// drawn by rng, in the order the text has them.
func Query(text string, rng *rand.Rand) string {
	words := strings.Fields(text)
	if len(words) <= queryWords {
		return text
	}
	picked := rng.Perm(len(words))[:queryWords]
	slices.Sort(picked)
	q := make([]string, len(picked))
	for i, j := range picked {
		q[i] = words[j]
	}
	return strings.Join(q, " ")
}
