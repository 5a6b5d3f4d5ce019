package recall

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/memoria-ai/memoria/memory/model"
)

// Near-identical texts compare by their lower-cased word sets.
func TestJaccardOfWordSets(t *testing.T) {
	if got := jaccard(wordSet("Which bed, did I plant the TOMATOES in?"), wordSet("which bed did i plant the tomatoes in")); got != 1 {
		t.Fatalf("case and punctuation: jaccard %v", got)
	}
	if got := jaccard(wordSet("a b c d e f g h i"), wordSet("a b c d e f g h i j")); got != 0.9 {
		t.Fatalf("one word more in ten: jaccard %v", got)
	}
}

// The hashed word sets give the Jaccard similarity of the word sets as
// strings (lower-cased, split at what is neither a letter nor a digit),
// non-ASCII letters and digits included.
// mayReach's false is never wrong: jaccard is then below the threshold
// (random sets of 1–40 of 60 words, and the subset cases at the edge).
func TestMayReachNeverHidesAJaccard(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	set := func() []uint64 {
		var out []uint64
		for w := range uint64(60) {
			if rng.IntN(3) == 0 {
				out = append(out, w)
			}
		}
		if len(out) == 0 {
			out = append(out, 0)
		}
		return out
	}
	for range 20_000 {
		a, b := set(), set()
		for _, least := range []float64{0.5, 0.8, 0.9, 1} {
			if !mayReach(len(a), len(b), least) && jaccard(a, b) >= least {
				t.Fatalf("%v, %v: jaccard %v ≥ %v, mayReach false", a, b, jaccard(a, b), least)
			}
		}
	}
	nine, ten := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if !mayReach(len(nine), len(ten), 0.9) || jaccard(nine, ten) < 0.9 {
		t.Fatalf("a set of 9 within one of 10: mayReach %v, jaccard %v", mayReach(9, 10, 0.9), jaccard(nine, ten))
	}
	if mayReach(8, 10, 0.9) {
		t.Fatal("8 of 10 may reach 0.9")
	}
}

func TestWordSetHashesTheWords(t *testing.T) {
	strs := func(text string) []string {
		w := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		slices.Sort(w)
		return slices.Compact(w)
	}
	exact := func(a, b []string) float64 {
		common := 0
		for _, w := range a {
			if _, ok := slices.BinarySearch(b, w); ok {
				common++
			}
		}
		return float64(common) / float64(len(a)+len(b)-common)
	}
	vocab := []string{"Émile", "école", "ÉCOLE", "Straße", "STRASSE", "東京", "١٢٣", "tomato", "Tomato", "TOMATOES", "a", "I", "ı", "Ωmega", "ωMEGA", "x1", "X1"}
	seps := []string{" ", ", ", "—", "?", "\t", "'", "-"}
	rng := rand.New(rand.NewPCG(1, 2))
	text := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			b.WriteString(vocab[rng.IntN(len(vocab))])
			b.WriteString(seps[rng.IntN(len(seps))])
		}
		return b.String()
	}
	for range 2000 {
		a, b := text(), text()
		if got, want := jaccard(wordSet(a), wordSet(b)), exact(strs(a), strs(b)); got != want {
			t.Fatalf("%q and %q: jaccard %v, of the words as strings %v", a, b, got, want)
		}
		if len(wordSet(a)) != len(strs(a)) {
			t.Fatalf("%q: %d hashed words, %d words", a, len(wordSet(a)), len(strs(a)))
		}
	}
}

func BenchmarkCollapseKey(b *testing.B) {
	text := "I planted the tomatoes in the raised bed by the fence last Tuesday, and the basil next to them — the aphids are back though."
	other := wordSet("which bed did I plant the tomatoes in, the raised one by the fence?")
	for b.Loop() {
		jaccard(wordSet(text), other)
	}
}

// A memory asks a question when what it says holds a question mark, ASCII
// or full-width, in any of its parts; its speaker's name does not count.
func TestAsksQuestion(t *testing.T) {
	name := "Who?"
	for _, c := range []struct {
		m    *model.Memory
		want bool
	}{
		{&model.Memory{Data: model.Data{Self: &model.SelfData{Parts: []model.Part{{Content: "I see."}, {Content: "Which bed was it?"}}}}}, true},
		{&model.Memory{Data: model.Data{Self: &model.SelfData{Parts: []model.Part{{Content: "I see."}, {Content: "The raised one."}}}}}, false},
		{&model.Memory{Data: model.Data{Other: &model.OtherData{Name: &name, Content: "你在哪里？"}}}, true},
		{&model.Memory{Data: model.Data{Other: &model.OtherData{Name: &name, Content: "Here."}}}, false},
		{&model.Memory{Data: model.Data{Text: &model.TextData{Content: "is it"}}}, false},
	} {
		if got := asksQuestion(c.m); got != c.want {
			t.Errorf("%q: asks a question %v, want %v", c.m.Text(), got, c.want)
		}
	}
}
