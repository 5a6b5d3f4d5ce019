package text

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
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
	// A document indexed again with another sona: found there too.
	if err := x.Apply([]Doc{{ID: "a", Text: docs[0].Text, Sonas: []string{"s1", "s3"}}}, 4); err != nil {
		t.Fatal(err)
	}
	if hits, _ := x.Search("painted", SearchOptions{K: 10, Sonas: []string{"s3"}}); len(hits) != 1 || hits[0].ID != "a" {
		t.Fatalf("joined sona: %v", hits)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}

	x, err = Open(dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if wm, _ := x.Watermark(); wm != 4 {
		t.Fatalf("watermark %d after reopen, want 4", wm)
	}
	if n, _ := x.Len(); n != 3 {
		t.Fatalf("%d documents after reopen", n)
	}
	if hits, _ := x.Search("painted", SearchOptions{K: 10, Sonas: []string{"s3"}}); len(hits) != 1 || hits[0].ID != "a" {
		t.Fatalf("joined sona after reopen: %v", hits)
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
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	// An index written by another version is refused.
	path := filepath.Join(dir, snapshotFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(snapMagic)+1] = '0' // the version's one byte
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrStale) {
		t.Fatalf("stale index: err = %v, want ErrStale", err)
	}
	// So is a directory without an index of this layout (bleve's).
	bleveDir := t.TempDir()
	os.WriteFile(filepath.Join(bleveDir, "index_meta.json"), []byte(`{"storage":"scorch","index_type":"scorch"}`), 0o644)
	if _, err := Open(bleveDir); !errors.Is(err, ErrStale) {
		t.Fatalf("bleve's index: err = %v, want ErrStale", err)
	}
}

// bm25 is BM25 as bleve scored a disjunction of term queries (but with
// the mean document length: issue 17), written out over every document:
// the reference Search must match exactly.
func bm25(docs map[string][]string, q string, k int) []Hit {
	return bm25In(docs, q, k, func(string) bool { return true })
}

// bm25In is bm25 ranking only the documents in reports, with the
// statistics of all.
func bm25In(docs map[string][]string, q string, k int, in func(id string) bool) []Hit {
	terms := unique(analyze(q))
	df := map[string]int{}
	for _, toks := range docs {
		seen := map[string]bool{}
		for _, t := range toks {
			if !seen[t] {
				seen[t] = true
				df[t]++
			}
		}
	}
	n := float64(len(docs))
	tokens := 0
	for _, toks := range docs {
		tokens += len(toks)
	}
	avgLen := float64(tokens) / n // the mean length (not bleve's vocabulary over the count)
	idf := map[string]float64{}
	var sq float64
	for _, t := range terms {
		d := float64(df[t])
		idf[t] = math.Log(1 + (n-d+0.5)/(d+0.5))
		sq += idf[t] * idf[t]
	}
	norm := 1 / math.Sqrt(sq)
	var hits []Hit
	for id, toks := range docs {
		var sum float64
		matched := 0
		for _, t := range terms {
			f := 0
			for _, u := range toks {
				if u == t {
					f++
				}
			}
			if f == 0 {
				continue
			}
			tf := math.Sqrt(float64(f))
			sum += idf[t] * tf * bm25K1 / (tf + bm25K1*(1-bm25B+bm25B*float64(len(toks))/avgLen)) * idf[t] * norm
			matched++
		}
		if matched > 0 && in(id) {
			hits = append(hits, Hit{ID: id, Score: sum * float64(matched) / float64(len(terms))})
		}
	}
	slices.SortFunc(hits, byScore)
	return hits[:min(k, len(hits))]
}

// sameHits fails t unless got are want: the same documents in the same
// order, each score within a billionth.
func sameHits(t *testing.T, what string, got, want []Hit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hits %v, want %d %v", what, len(got), got, len(want), want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || math.Abs(got[i].Score-want[i].Score) > 1e-9*want[i].Score {
			t.Fatalf("%s: hit %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// Search ranks as an exhaustive BM25: on one pass (a small collection),
// on two with every document named by Also, after a reopen and after
// deletes.
func TestScoresAreExhaustiveBM25(t *testing.T) {
	t.Run("term ids of 16 bits", func(t *testing.T) { testScores(t, 0) })
	// A first document of that many terms: the words' ids are 65,536 or
	// more but for the first few, and documents' runs of either width.
	t.Run("term ids past 16 bits", func(t *testing.T) { testScores(t, 1<<16-6) })
}

// testScores runs TestScoresAreExhaustiveBM25 in an index whose first
// document holds filler terms of no query.
func testScores(t *testing.T, filler int) {
	dir := t.TempDir() + "/idx"
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the garden tomato basil river train lisbon novel lighthouse painting sister dog concert recipe hiking sunset lake city job guitar")
	var docs []Doc
	var ids []string
	ref := map[string][]string{}
	if filler > 0 {
		d := fillerDoc(filler, "s")
		if err := x.Apply([]Doc{d}, 1); err != nil {
			t.Fatal(err)
		}
		ref[d.ID] = analyze(d.Text)
	}
	for i := range 3000 {
		var b strings.Builder
		for range 4 + rng.IntN(20) {
			// Zipf-like: early words are common, late ones rare.
			b.WriteString(words[int(float64(len(words))*rng.Float64()*rng.Float64())] + " ")
		}
		id := fmt.Sprintf("d%04d", i)
		docs = append(docs, Doc{ID: id, Text: b.String(), Sonas: []string{"s"}})
		ids = append(ids, id)
		ref[id] = analyze(b.String())
	}
	for lo := 0; lo < len(docs); lo += 500 {
		if err := x.Apply(docs[lo:lo+500], uint64(lo+500)); err != nil {
			t.Fatal(err)
		}
	}
	queries := []string{"painting the sunset by the lake", "guitar concert", "my sister's dog went hiking", "a recipe with tomato and basil from the garden", "unknownword"}
	check := func(stage string, x *Index) {
		t.Helper()
		for _, twoPass := range []bool{false, true} {
			x.pruneFrom = pruneFrom
			if twoPass {
				x.pruneFrom = 0
			}
			for _, q := range queries {
				want := bm25(ref, q, 25)
				got, err := x.Search(q, SearchOptions{K: 25, Also: func() []string { return ids }})
				if err != nil {
					t.Fatal(err)
				}
				sameHits(t, fmt.Sprintf("%s (two passes %v) %q", stage, twoPass, q), got, want)
			}
		}
	}
	check("new", x)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if x, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	check("reopened", x)

	// Deleted documents leave the postings, the statistics and the
	// second pass; enough of them to compact the slots.
	if err := x.Delete(docs[:1500], 1); err != nil {
		t.Fatal(err)
	}
	for _, d := range docs[:1500] {
		delete(ref, d.ID)
	}
	ids = ids[1500:]
	check("after deletes", x)
	if x.dead != 0 || len(x.slots) != 1500+min(filler, 1) {
		t.Fatalf("%d dead slots of %d after compaction", x.dead, len(x.slots))
	}
	if filler > 0 {
		wide := 0
		for i := range x.slots {
			if x.slots[i].wide {
				wide++
			}
		}
		if wide == 0 || wide >= len(x.slots)-1 { // the filler's own are under 65,536
			t.Fatalf("%d of %d documents' runs have ids of 32 bits", wide, len(x.slots))
		}
	}
	// The compaction left the deleted documents' runs behind.
	terms, sonas, idBytes := 0, 0, 0
	for i := range x.slots {
		terms += int(x.slots[i].termsLen())
		sonas, idBytes = sonas+len(x.sonasOf(&x.slots[i])), idBytes+len(x.idOf(&x.slots[i]))
	}
	if held := used(&x.narrowTerms) + used(&x.wideTerms); held != terms || used(&x.sonaRuns) != sonas || used(&x.strs) != idBytes {
		t.Fatalf("the pools hold %d terms and frequencies, %d sonas, %d bytes of ids; the live documents %d, %d, %d",
			held, used(&x.sonaRuns), used(&x.strs), terms, sonas, idBytes)
	}
}

// fillerDoc is a document of sona holding terms terms of no query: the
// first applied to an index, it has the ids under terms, and later terms
// theirs past it.
func fillerDoc(terms int, sona string) Doc {
	var b strings.Builder
	seen := map[string]bool{}
	for i := 0; len(seen) < terms; i++ {
		w := "zz" + strings.Map(func(r rune) rune { // base 26 in letters: no digits to analyse
			if r <= '9' {
				return 'a' + r - '0'
			}
			return r + 10
		}, strconv.FormatInt(int64(i), 26))
		for _, term := range analyze(w) {
			seen[term] = true
		}
		b.WriteString(w + " ")
	}
	return Doc{ID: "filler", Text: b.String(), Sonas: []string{sona}}
}

// A search within a sona holding few of the collection's documents
// scores every one of theirs by the whole query — an exhaustive BM25 with
// the collection's statistics, restricted to the sona — on one pass or
// two (where the rare terms' candidates alone miss its documents that
// hold only common ones), as documents join and leave it, are deleted
// (the slots compacted) and the index is reopened.
func TestSonaSearchesAreExhaustiveBM25(t *testing.T) {
	t.Run("sona ids of 16 bits", func(t *testing.T) { testSonaSearches(t, 0, 0) })
	// Every sona's id past what a posting holds (postOwner): the walk
	// reads the slots' owners.
	t.Run("sona ids past 16 bits", func(t *testing.T) { testSonaSearches(t, postMany, 0) })
	// The documents' terms' ids past 16 bits but for the first few (a
	// filler document of another sona holds the ids under them).
	t.Run("term ids past 16 bits", func(t *testing.T) { testSonaSearches(t, 0, 1<<16-6) })
}

// testSonaSearches runs TestSonaSearchesAreExhaustiveBM25 in an index
// that knew others sonas before its own, and whose first document holds
// filler terms.
func testSonaSearches(t *testing.T, others, filler int) {
	dir := t.TempDir() + "/idx"
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range others {
		name := fmt.Sprintf("other%d", i)
		x.sonaIDs[name] = uint32(len(x.sonaNames))
		x.sonaNames = append(x.sonaNames, name)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("garden tomato basil river train lisbon novel lighthouse painting sister dog concert recipe hiking sunset lake city job guitar")
	ref, sonas := map[string][]string{}, map[string][]string{}
	if filler > 0 {
		d := fillerDoc(filler, "filler")
		if err := x.Apply([]Doc{d}, 1); err != nil {
			t.Fatal(err)
		}
		ref[d.ID], sonas[d.ID] = analyze(d.Text), d.Sonas
	}
	var docs []Doc
	for i := range 3000 {
		var b strings.Builder
		for range 4 + rng.IntN(20) {
			b.WriteString(words[int(float64(len(words))*rng.Float64()*rng.Float64())] + " ")
		}
		d := Doc{ID: fmt.Sprintf("d%04d", i), Text: b.String(), Sonas: []string{fmt.Sprintf("s%d", i%10)}}
		if i < 6 {
			d.Text, d.Sonas = []string{"garden river", "tomato garden train", "guitar lake", "garden basil tomato river", "sister dog", "hiking"}[i], []string{"tiny"}
		}
		docs = append(docs, d)
		ref[d.ID], sonas[d.ID] = analyze(d.Text), d.Sonas
	}
	apply := func(ds ...Doc) {
		t.Helper()
		if err := x.Apply(ds, 1); err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			sonas[d.ID] = d.Sonas
		}
	}
	apply(docs...)
	queries := []string{"garden river", "tomato and basil from the garden", "a guitar by the lake", "my sister's dog went hiking", "unknownword"}
	check := func(stage string) {
		t.Helper()
		for term, ps := range x.post {
			for _, p := range ps {
				if want := postOwner(x.owner[p.slot]); p.owner != want {
					t.Fatalf("%s: %q's posting of slot %d has owner %d, its slot %d (%d)", stage, x.names[term], p.slot, p.owner, want, x.owner[p.slot])
				}
			}
		}
		for _, twoPass := range []bool{false, true} {
			x.pruneFrom = pruneFrom
			filters := [][]string{{"tiny"}, {"s3"}, {"s3", "tiny"}} // on one pass, every search is exhaustive
			if twoPass {
				x.pruneFrom, filters = 0, filters[:1]
			}
			for _, q := range queries {
				for _, f := range filters {
					want := bm25In(ref, q, 10, func(id string) bool {
						return slices.ContainsFunc(f, func(s string) bool { return slices.Contains(sonas[id], s) })
					})
					got, err := x.Search(q, SearchOptions{K: 10, Sonas: f})
					if err != nil {
						t.Fatal(err)
					}
					sameHits(t, fmt.Sprintf("%s (two passes %v) %q in %v", stage, twoPass, q, f), got, want)
				}
			}
		}
	}
	check("new")
	apply(Doc{ID: "d0100", Text: docs[100].Text, Sonas: []string{"s0", "tiny"}}, Doc{ID: "d0207", Text: docs[207].Text, Sonas: []string{"tiny", "s7"}})
	check("joined")
	apply(Doc{ID: "d0100", Text: docs[100].Text, Sonas: []string{"s0"}})
	check("left")
	// A few deleted: dead slots stay in the postings until there are many.
	if err := x.Delete([]Doc{docs[3], docs[301], docs[302], docs[1700]}, 1); err != nil { // d0003 of tiny
		t.Fatal(err)
	}
	for _, d := range []Doc{docs[3], docs[301], docs[302], docs[1700]} {
		delete(ref, d.ID)
	}
	if x.dead != 4 {
		t.Fatalf("%d dead slots after 4 deletes, want 4 (not compacted)", x.dead)
	}
	check("a few deleted")
	if err := x.Delete(docs[1:1501], 1); err != nil { // d0001 of tiny among them (d0003 again)
		t.Fatal(err)
	}
	for _, d := range docs[1:1501] {
		delete(ref, d.ID)
	}
	if x.dead != 0 {
		t.Fatalf("%d dead slots after the deletes: not compacted", x.dead)
	}
	check("after deletes")
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if x, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	check("reopened")
}

// A damaged snapshot is refused at open (ErrCorrupt): however it is
// damaged, Open reports, never panics.
func TestDamagedSnapshotIsRefused(t *testing.T) {
	for _, at := range []float64{0, 0.3, 0.6, 0.99} {
		var docs []Doc
		for i := range 300 {
			docs = append(docs, Doc{ID: fmt.Sprintf("d%d", i), Text: fmt.Sprintf("word%d about the lake %d", i, i%7)})
		}
		dir, b := snapshotOf(t, docs)
		b[int(float64(len(b)-1)*at)] ^= 0xff
		refused(t, dir, b, fmt.Sprintf("damage at %v", at))
	}
}

// A crash leaves the log with a torn last record (or a damaged one):
// Open keeps the batches before it, with their watermark, cuts the rest,
// and appends after it.
func TestLogIsCutAtItsFirstBadRecord(t *testing.T) {
	for _, damage := range []string{"torn", "flipped"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir() + "/idx"
			x, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if err := x.Apply([]Doc{{ID: fmt.Sprint(i), Text: fmt.Sprintf("batch%d about the orchard", i)}}, uint64(i+1)); err != nil {
					t.Fatal(err)
				}
			}
			if err := x.Flush(); err != nil {
				t.Fatal(err)
			}
			log := x.log.Name()
			x.Discard() // as a crash: no snapshot
			b, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			if damage == "torn" {
				b = b[:len(b)-3]
			} else {
				b[len(b)-2] ^= 0xff
			}
			if err := os.WriteFile(log, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if x, err = Open(dir); err != nil {
				t.Fatal(err)
			}
			if wm, _ := x.Watermark(); wm != 2 {
				t.Fatalf("watermark %d, want 2", wm)
			}
			if hits, _ := x.Search("orchard", SearchOptions{K: 10}); len(hits) != 2 {
				t.Fatalf("hits %v, want the first two batches'", hits)
			}
			if err := x.Apply([]Doc{{ID: "2", Text: "batch2 about the orchard"}}, 3); err != nil {
				t.Fatal(err)
			}
			if err := x.Flush(); err != nil {
				t.Fatal(err)
			}
			x.Discard()
			if x, err = Open(dir); err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			if hits, _ := x.Search("orchard", SearchOptions{K: 10}); len(hits) != 3 {
				t.Fatalf("after the cut log was appended to: %v", hits)
			}
		})
	}
}

// A log that cannot be written (here: its file closed under it, as a
// full disk fails writes) does not fail batches; searches see them, and
// Flush writes them in a snapshot.
func TestFailedLogWriteIsCaughtBySnapshot(t *testing.T) {
	dir := t.TempDir() + "/idx"
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	x.log.Close()
	if err := x.Apply([]Doc{{ID: "a", Text: "a note about marmalade"}}, 1); err != nil {
		t.Fatalf("a batch failed with its log: %v", err)
	}
	if x.logErr == nil {
		t.Fatal("the write did not fail")
	}
	if hits, _ := x.Search("marmalade", SearchOptions{K: 1}); len(hits) != 1 {
		t.Fatalf("hits %v", hits)
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	x.Discard()
	if x, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if wm, _ := x.Watermark(); wm != 1 {
		t.Fatalf("watermark %d, want 1", wm)
	}
	if hits, _ := x.Search("marmalade", SearchOptions{K: 1}); len(hits) != 1 {
		t.Fatalf("hits after reopen %v", hits)
	}
}

// When the log outgrows the snapshot, a new generation replaces both:
// one snapshot, one log, the same index.
func TestLogIsCompactedIntoSnapshot(t *testing.T) {
	dir := t.TempDir() + "/idx"
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	x.logMin = 64 << 10
	gen := x.gen
	for i := range 40 {
		var docs []Doc
		for k := range 200 {
			docs = append(docs, Doc{ID: fmt.Sprintf("d%d-%d", i, k), Text: fmt.Sprintf("note %d of batch %d, word%d and word%d", k, i, k, i), Sonas: []string{"s"}})
		}
		if err := x.Apply(docs, uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if x.gen == gen {
		t.Fatal("no new generation")
	}
	want, _ := x.Search("word7 batch", SearchOptions{K: 50})
	x.Discard()
	logs, _ := filepath.Glob(filepath.Join(dir, logPrefix+"*"))
	if len(logs) != 1 {
		t.Fatalf("logs %v", logs)
	}
	if x, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	got, _ := x.Search("word7 batch", SearchOptions{K: 50})
	if n, _ := x.Len(); n != 8000 || !slices.Equal(got, want) {
		t.Fatalf("%d documents; hits %v, want %v", n, got, want)
	}
}

// Compact leaves no file of the index holding what a deleted document
// said (the forget's purge relies on it), keeps what the others said, and
// the index reopens to the same.
func TestCompactLeavesNoTraceOfDeletedDocuments(t *testing.T) {
	dir := t.TempDir() + "/idx"
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "zqvxjtkqw"
	if err := x.Apply([]Doc{{ID: "kept", Text: "pears ripen after apples", Sonas: []string{"s1"}}}, 1); err != nil {
		t.Fatal(err)
	}
	// Into the snapshot (a close writes one), then into the log.
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if x, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	if err := x.Apply([]Doc{{ID: "doomed-" + marker, Text: "the hint is " + marker, Sonas: []string{"s1"}}}, 2); err != nil {
		t.Fatal(err)
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	holding := func() []string {
		var hits []string
		names, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, n := range names {
			if b, err := os.ReadFile(n); err == nil && strings.Contains(string(b), marker) {
				hits = append(hits, filepath.Base(n))
			}
		}
		return hits
	}
	if h := holding(); len(h) == 0 {
		t.Fatal("no file holds the marker before the delete: the test shows nothing")
	}
	if ok, _ := x.HasTerm(marker); !ok {
		t.Fatal("the marker's term is not indexed")
	}
	if err := x.Delete([]Doc{{ID: "doomed-" + marker}}, 3); err != nil {
		t.Fatal(err)
	}
	if ok, _ := x.HasTerm(marker); ok {
		t.Fatal("the marker's term is still held after the delete")
	}
	if h := holding(); len(h) == 0 {
		t.Fatal("the log no longer holds the marker before Compact: the test shows nothing")
	}
	if err := x.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h := holding(); len(h) != 0 {
		t.Fatalf("after Compact, %v hold the deleted document's marker", h)
	}
	if hits, _ := x.Search("pears", SearchOptions{K: 10}); len(hits) != 1 || hits[0].ID != "kept" {
		t.Fatalf("after Compact: %v", hits)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if x, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if h := holding(); len(h) != 0 {
		t.Fatalf("after a reopen, %v hold the deleted document's marker", h)
	}
	if ok, _ := x.Has("doomed-" + marker); ok {
		t.Fatal("the deleted document is back after a reopen")
	}
	if wm, _ := x.Watermark(); wm != 3 {
		t.Fatalf("watermark %d, want 3", wm)
	}
	if hits, _ := x.Search("pears", SearchOptions{K: 10}); len(hits) != 1 || hits[0].ID != "kept" {
		t.Fatalf("after a reopen: %v", hits)
	}
}

// An index reopened from its snapshot scores exactly as the one that
// wrote it: many documents, some deleted (dead slots), some re-indexed
// with other sonas, searched with and without a sona filter.
func TestReopenedSnapshotScoresAlike(t *testing.T) {
	dir := t.TempDir() + "/idx"
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Fields("orchard pear rain shed apple august river train novel lighthouse queue latency painting sister dog concert recipe hiking")
	var docs []Doc
	for i := range 3000 {
		docs = append(docs, Doc{ID: fmt.Sprintf("m%d", i),
			Text:  fmt.Sprintf("%s %s and %s, note %d", words[i%len(words)], words[(i*7)%len(words)], words[(i*13)%len(words)], i%97),
			Sonas: []string{fmt.Sprintf("s%d", i%5)}})
	}
	if err := x.Apply(docs, 3000); err != nil {
		t.Fatal(err)
	}
	var gone []Doc
	for i := 0; i < 3000; i += 3 {
		gone = append(gone, Doc{ID: docs[i].ID})
	}
	if err := x.Delete(gone, 3000); err != nil {
		t.Fatal(err)
	}
	var joined []Doc
	for i := 1; i < 3000; i += 10 {
		joined = append(joined, Doc{ID: docs[i].ID, Text: docs[i].Text, Sonas: []string{docs[i].Sonas[0], "s9"}})
	}
	if err := x.Apply(joined, 3001); err != nil {
		t.Fatal(err)
	}
	queries := []SearchOptions{{K: 50}, {K: 20, Sonas: []string{"s9"}}, {K: 20, Sonas: []string{"s2", "s4"}}}
	search := func(x *Index) [][]Hit {
		var out [][]Hit
		for _, q := range []string{"pear rain", "lighthouse note 5", "sister dog concert", "august"} {
			for _, o := range queries {
				hits, err := x.Search(q, o)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, hits)
			}
		}
		return out
	}
	before := search(x)
	if err := x.Close(); err != nil { // the log written into a snapshot
		t.Fatal(err)
	}
	if x, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if n, _ := x.Len(); n != 2100 { // a third deleted, a tenth of those indexed again
		t.Fatalf("%d documents after reopening, want 2100", n)
	}
	if after := search(x); !reflect.DeepEqual(after, before) {
		t.Fatalf("reopened, the searches differ:\n got %v\nwant %v", after, before)
	}
}

// A growing index gains a slot a document: the scores' arrays keep room
// for it, not made again for each search, and stay zero past the slots
// a search touches.
func TestScoresKeepRoomAsTheIndexGrows(t *testing.T) {
	var sc scores
	sc.fit(1000)
	if len(sc.sum) < 1000 || len(sc.matched) != len(sc.sum) {
		t.Fatalf("fit(1000): %d sums, %d counts", len(sc.sum), len(sc.matched))
	}
	sum, matched := &sc.sum[0], &sc.matched[0]
	for n := 1001; n <= 1200; n++ {
		sc.fit(n)
		if &sc.sum[0] != sum || &sc.matched[0] != matched {
			t.Fatalf("fit(%d) made the arrays again (a quarter's room expected)", n)
		}
	}
	sc.fit(len(sc.sum) + 1)
	if &sc.sum[0] == sum || slices.ContainsFunc(sc.sum, func(v float64) bool { return v != 0 }) || slices.ContainsFunc(sc.matched, func(v uint16) bool { return v != 0 }) {
		t.Fatal("past its room, fit must make zeroed arrays")
	}
}

// A snapshot that holds a document twice, its checksum right, is refused
// at open (ErrCorrupt): the index would number one id twice.
func TestSnapshotWithADocumentTwiceIsRefused(t *testing.T) {
	dir, b := snapshotOf(t, []Doc{{ID: "docAAAA", Text: "the lake"}, {ID: "docBBBB", Text: "the river"}})
	if n := bytes.Count(b, []byte("docBBBB")); n != 1 {
		t.Fatalf("the snapshot holds docBBBB %d times", n)
	}
	b = bytes.Replace(b, []byte("docBBBB"), []byte("docAAAA"), 1)
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	refused(t, dir, b, "a document twice")
}

// snapshotOf is the snapshot of an index of docs, and its directory.
func snapshotOf(t *testing.T, docs []Doc) (dir string, snap []byte) {
	t.Helper()
	dir = t.TempDir() + "/idx"
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Apply(docs, uint64(len(docs))); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err = os.ReadFile(filepath.Join(dir, snapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	return dir, snap
}

// refused writes snap as dir's snapshot and checks that Open refuses it
// (ErrCorrupt).
func refused(t *testing.T, dir string, snap []byte, what string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, snapshotFile), snap, 0o644); err != nil {
		t.Fatal(err)
	}
	if x, err := Open(dir); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			x.Close()
		}
		t.Fatalf("%s: err = %v, want ErrCorrupt", what, err)
	}
}
