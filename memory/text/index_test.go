package text

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIndexPersistsAndReopens(t *testing.T) {
	dir := t.TempDir() + "/idx"
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	docs := []Doc{
		{ID: "a", Text: "Painting sunsets by the lake", Sonas: []string{"s1"}},
		{ID: "b", Text: "She paints sunrises", Sonas: []string{"s2"}},
		{ID: "c", Text: "The quarterly tax deadline", Sonas: []string{"s1", "s2"}},
	}
	if err := x.Apply(docs, 3); err != nil {
		t.Fatal(err)
	}
	// Stemming: "painted" finds "painting" and "paints"; the sona filter
	// keeps one sona's documents.
	hits, err := x.Search("painted sunset", SearchOptions{K: 10})
	if err != nil || len(hits) != 2 || hits[0].ID != "a" {
		t.Fatalf("hits %v %v", hits, err)
	}
	if hits, _ := x.Search("painted", SearchOptions{K: 10, Sonas: []string{"s2"}}); len(hits) != 1 || hits[0].ID != "b" {
		t.Fatalf("sona filter: %v", hits)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}

	x, err = Open(dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if wm, _ := x.Watermark(); wm != 3 {
		t.Fatalf("watermark %d after reopen, want 3", wm)
	}
	if n, _ := x.Len(); n != 3 {
		t.Fatalf("%d documents after reopen", n)
	}
	if err := x.Delete([]Doc{{ID: "a"}}, 2); err != nil {
		t.Fatal(err)
	}
	if hits, _ := x.Search("sunset", SearchOptions{K: 10}); len(hits) != 0 {
		t.Fatalf("deleted document found: %v", hits)
	}
	if wm, _ := x.Watermark(); wm != 2 {
		t.Fatalf("watermark %d", wm)
	}
	// An index written by another version is refused.
	done := make(chan error, 1)
	b := x.idx.NewBatch()
	b.SetInternal([]byte(keyVersion), []byte("0"))
	b.SetPersistedCallback(func(err error) { done <- err })
	if err := x.idx.Batch(b); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := x.idx.Close(); err != nil { // not x.Close, which stamps the current version
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrStale) {
		t.Fatalf("stale index: err = %v, want ErrStale", err)
	}
}

// The second pass scores candidates from the forward index exactly as
// bleve scores the whole query: every candidate's score and the order
// match an exhaustive search, before priming (bleve's intersection),
// after it, and across a reopen.
func TestForwardScoresAsBleve(t *testing.T) {
	dir := t.TempDir() + "/idx"
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the garden tomato basil river train lisbon novel lighthouse painting sister dog concert recipe hiking sunset lake city job guitar")
	var docs []Doc
	var ids []string
	for i := range 3000 {
		var b strings.Builder
		for range 4 + rng.IntN(20) {
			// Zipf-like: early words are common, late ones rare.
			b.WriteString(words[int(float64(len(words))*rng.Float64()*rng.Float64())] + " ")
		}
		id := fmt.Sprintf("d%04d", i)
		docs = append(docs, Doc{ID: id, Text: b.String(), Sonas: []string{"s"}})
		ids = append(ids, id)
	}
	if err := x.Apply(docs, 1); err != nil {
		t.Fatal(err)
	}
	queries := []string{"painting the sunset by the lake", "guitar concert", "my sister's dog went hiking", "a recipe with tomato and basil from the garden", "unknownword"}
	check := func(stage string, x *Index, primed bool) {
		t.Helper()
		x.pruneFrom = 0 // two passes at any size
		for _, q := range queries {
			terms, err := x.terms(q)
			if err != nil {
				t.Fatal(err)
			}
			want, err := x.run(disjunction(terms), nil, 25)
			if err != nil {
				t.Fatal(err)
			}
			got, err := x.Search(q, SearchOptions{K: 25, Also: func() []string { return ids }})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := x.Forward(); ok != primed {
				t.Fatalf("%s: forward index primed = %v, want %v", stage, ok, primed)
			}
			if len(got) != len(want) {
				t.Fatalf("%s %q: %d hits, want %d", stage, q, len(got), len(want))
			}
			for i := range want {
				if math.Abs(got[i].Score-want[i].Score) > 1e-6*want[i].Score {
					t.Fatalf("%s %q: hit %d = %v, want %v", stage, q, i, got[i], want[i])
				}
			}
		}
	}
	check("new", x, true)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if x, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	check("reopened", x, false)
	if err := x.Prime(docs); err != nil {
		t.Fatal(err)
	}
	x.MarkPrimed()
	check("primed", x, true)

	// A deleted document leaves the forward index too.
	if err := x.Delete(docs[:1], 1); err != nil {
		t.Fatal(err)
	}
	hits, err := x.Search(docs[0].Text, SearchOptions{K: 10, Also: func() []string { return ids[:1] }})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if h.ID == docs[0].ID {
			t.Fatalf("deleted document scored: %v", h)
		}
	}
}

// A damaged segment is refused at open (ErrCorrupt), before bleve reads
// it: however it is damaged, Open reports, never panics.
func TestDamagedSegmentIsRefused(t *testing.T) {
	for _, at := range []float64{0, 0.3, 0.6, 0.99} {
		dir := t.TempDir() + "/idx"
		x, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		var docs []Doc
		for i := range 300 {
			docs = append(docs, Doc{ID: fmt.Sprintf("d%d", i), Text: fmt.Sprintf("word%d about the lake %d", i, i%7)})
		}
		if err := x.Apply(docs, 300); err != nil {
			t.Fatal(err)
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		zaps, _ := filepath.Glob(filepath.Join(dir, "store", "*.zap"))
		if len(zaps) == 0 {
			t.Fatal("no segment")
		}
		for _, z := range zaps {
			b, err := os.ReadFile(z)
			if err != nil {
				t.Fatal(err)
			}
			b[int(float64(len(b)-1)*at)] ^= 0xff
			if err := os.WriteFile(z, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if x, err := Open(dir); !errors.Is(err, ErrCorrupt) {
			if err == nil {
				x.Close()
			}
			t.Fatalf("damage at %v: err = %v, want ErrCorrupt", at, err)
		}
	}
}
