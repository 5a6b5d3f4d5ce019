package text

import (
	"slices"
	"testing"
)

// Pseudo-relevance feedback: the search's terms are the words typical of
// the feedback documents, weighted by them, without the query's own words
// or words no other document holds; it finds what shares those words and
// none of the query's.
func TestSearchFeedback(t *testing.T) {
	x, err := Open(t.TempDir() + "/idx")
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	docs := []Doc{
		{ID: "moved", Text: "I moved from my home country four years ago"},
		{ID: "sweden", Text: "A necklace from my grandma in my home country, Sweden"},
		{ID: "zebra", Text: "zebra zebra stripes"},
		{ID: "stripes", Text: "the flag has stripes"},
		{ID: "other", Text: "We baked bread on Sunday"},
		{ID: "other2", Text: "Bread again, and soup"},
	}
	if err := x.Apply(docs, uint64(len(docs))); err != nil {
		t.Fatal(err)
	}
	// The query's own words find "moved" only.
	hits, err := x.Search("where did she move from", SearchOptions{K: 10})
	if err != nil || len(hits) != 1 || hits[0].ID != "moved" {
		t.Fatalf("plain search: %v %v", hits, err)
	}
	fb := Feedback{Docs: []string{"moved"}, Weights: []float64{1}, Terms: 2}
	x.mu.RLock()
	terms := x.expansion(unique(analyze("where did she move from")), fb)
	x.mu.RUnlock()
	// "move" is the query's, "year", "four", "ago" no other document's:
	// "home" and "countri" (stemmed) are left, tied, by name.
	if want := []string{"countri", "home"}; !slices.Equal(terms, want) {
		t.Errorf("expansion terms %v, want %v", terms, want)
	}
	hits, err = x.Search("where did she move from", SearchOptions{K: 10, Feedback: &fb})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.ID)
	}
	if !slices.Equal(ids, []string{"moved", "sweden"}) && !slices.Equal(ids, []string{"sweden", "moved"}) {
		t.Errorf("feedback search found %v, want moved and sweden", ids)
	}
	// The weights: "zebra" weighted over "moved" lends its word "stripes"
	// (not "zebra": no other document holds it).
	fb = Feedback{Docs: []string{"moved", "zebra"}, Weights: []float64{0.1, 1}, Terms: 1}
	x.mu.RLock()
	terms = x.expansion(nil, fb)
	x.mu.RUnlock()
	if !slices.Equal(terms, []string{"stripe"}) {
		t.Errorf("weighted expansion %v, want [stripe]", terms)
	}
	// No weight, no feedback documents: nothing.
	if hits, _ := x.Search("anything", SearchOptions{K: 10, Feedback: &Feedback{Terms: 3}}); len(hits) != 0 {
		t.Errorf("empty feedback found %v", hits)
	}
}
