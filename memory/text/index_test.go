package text

import (
	"errors"
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
