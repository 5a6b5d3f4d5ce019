package llm

import (
	"slices"
	"testing"
	"unicode/utf8"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"only stop words", "I was the one, and you?", []string{"one"}},
		{"punctuation only", "... !!! ---", nil},
		{"lower-cases", "Lisbon LISBON lisbon", []string{"lisbon", "lisbon", "lisbon"}},
		{"keeps order and duplicates", "dogs chase cats; cats chase dogs", []string{"dog", "chas", "cat", "cat", "chas", "dog"}},
		{"contractions", "I don't remember, she's here", []string{"remember"}},
		{"digits", "Meeting at 10:30 on 2024-05-01", []string{"meet", "10", "30", "2024", "05", "01"}},
		{"unicode letters", "Café niños naïve Zürich", []string{"café", "niño", "naïv", "zürich"}},
		{"non-latin script", "Привет мир 東京", []string{"привет", "мир", "東京"}},
		{"combining marks stay in word", "नमस्ते दुनिया", []string{"नमस्ते", "दुनिया"}},
		{"decomposed accent", "cafe\u0301 noir", []string{"cafe\u0301", "noir"}},
		{"invalid utf-8 separates", "paint\xffbrush", []string{"paint", "brush"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Tokenize(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("Tokenize(%q) = %q, want %q", tt.in, got, tt.want)
			}
			// TokenizeWords yields the same tokens, each with its word.
			var tokens []string
			for _, w := range TokenizeWords(tt.in) {
				tokens = append(tokens, w.Token)
				if got := Tokenize(w.Text); len(got) != 1 || got[0] != w.Token {
					t.Errorf("the word %q of token %q tokenizes as %q", w.Text, w.Token, got)
				}
			}
			if !slices.Equal(tokens, tt.want) {
				t.Errorf("TokenizeWords(%q) tokens %q, want %q", tt.in, tokens, tt.want)
			}
		})
	}
}

func TestTokenizeWordsAsWritten(t *testing.T) {
	got := TokenizeWords("Maya lives in Lisbon; she's loving it, NAÏVELY.")
	want := []Word{{"maya", "Maya"}, {"liv", "lives"}, {"lisbon", "Lisbon"}, {"lov", "loving"}, {"naïv", "NAÏVELY"}}
	if !slices.Equal(got, want) {
		t.Fatalf("TokenizeWords = %q, want %q", got, want)
	}
}

func TestStemGroupsShareFeature(t *testing.T) {
	tests := []struct {
		stem  string
		words []string
	}{
		{"run", []string{"run", "runs", "running"}},
		{"paint", []string{"paint", "paints", "painted", "painting"}},
		{"lov", []string{"love", "loves", "loved", "loving"}},
		{"sunset", []string{"sunset", "sunsets"}},
		{"parti", []string{"party", "parties"}},
		{"studi", []string{"study", "studies", "studied", "studying"}},
		{"box", []string{"box", "boxes"}},
		{"watch", []string{"watch", "watches", "watched", "watching"}},
		{"class", []string{"class", "classes"}},
		{"stop", []string{"stop", "stops", "stopped", "stopping"}},
		{"fall", []string{"fall", "falls", "falling"}},
		{"quick", []string{"quick", "quickly"}},
		{"happi", []string{"happy", "happily"}},
		{"plai", []string{"play", "plays", "played", "playing"}},
	}
	for _, tt := range tests {
		t.Run(tt.stem, func(t *testing.T) {
			for _, w := range tt.words {
				if got := stem([]byte(w)); string(got) != tt.stem {
					t.Errorf("stem(%q) = %q, want %q", w, got, tt.stem)
				}
			}
		})
	}
}

func TestStemKeepsWords(t *testing.T) {
	// Words the stemmer must leave alone: too short to strip, no vowel
	// left, or endings that are not inflections.
	for _, w := range []string{
		"bus", "gas", "yes", "red", "bed", "sing", "thing", "string", "spring",
		"need", "speed", "free", "tree", "analysis", "status", "glass", "add",
		"fly", "try", "ate", "use", "2024", "東京",
	} {
		if got := stem([]byte(w)); string(got) != w {
			t.Errorf("stem(%q) = %q, want it unchanged", w, got)
		}
	}
}

func TestStemNeverBelowMinimum(t *testing.T) {
	for _, w := range []string{
		"ties", "ides", "uses", "used", "aged", "eyes", "ing", "eing", "ly",
		"ably", "ones", "ooed", "seeing", "adding", "tied", "lies", "dies",
	} {
		got := stem([]byte(w))
		if n := utf8.RuneCount(got); n < minStemLen && n < utf8.RuneCountInString(w) {
			t.Errorf("stem(%q) = %q, shorter than %d runes", w, got, minStemLen)
		}
	}
}
