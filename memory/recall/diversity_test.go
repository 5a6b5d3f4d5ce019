package recall

import "testing"

// Near-identical texts compare by their lower-cased word sets.
func TestJaccardOfWordSets(t *testing.T) {
	if got := jaccard(wordSet("Which bed, did I plant the TOMATOES in?"), wordSet("which bed did i plant the tomatoes in")); got != 1 {
		t.Fatalf("case and punctuation: jaccard %v", got)
	}
	if got := jaccard(wordSet("a b c d e f g h i"), wordSet("a b c d e f g h i j")); got != 0.9 {
		t.Fatalf("one word more in ten: jaccard %v", got)
	}
}
