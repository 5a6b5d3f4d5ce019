// Package text is Memoria's full-text index: BM25 over memory text with
// English analysis (possessives, lower case, stop words, Porter stemming),
// on bleve v2's scorch engine.
//
// The index is derived state. It is persisted in its own directory with a
// layout version and a watermark — the insertion-log position of the last
// memory it holds — written atomically with each batch, so after a crash
// the owner replays the log from the watermark. An index of another
// version is refused (ErrStale) and rebuilt by the owner from the store.
//
// A damaged index is refused too (ErrCorrupt): at open, every segment the
// index uses is checked against the CRC-32 in its footer before bleve
// works on it (a damaged segment makes bleve panic, and in its merger's
// goroutine nothing can recover that), and a search that fails or
// panics reports ErrCorrupt; the owner then rebuilds the index.
package text

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/index/scorch/mergeplan"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	blevequery "github.com/blevesearch/bleve/v2/search/query"
	bleveindex "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
)

// Version is the index layout: bump it when the mapping or the analysis
// changes, and existing indexes will be rebuilt.
const Version = "2"

const (
	fieldText    = "text"
	fieldSonas   = "sonas"
	keyVersion   = "memoria.version"
	keyWatermark = "memoria.watermark"
)

// ErrStale means the directory holds an index of another version:
// delete it and rebuild.
var ErrStale = errors.New("text: index is stale: rebuild it")

// ErrCorrupt means the index's files are damaged (bleve cannot open
// them, or a search or a batch fails in bleve): delete it and rebuild.
var ErrCorrupt = errors.New("text: index is corrupt: rebuild it")

// Doc is one memory to index.
type Doc struct {
	ID    string // the memory's CID
	Text  string
	Sonas []string // uuids of the sonas it belongs to
}

// Hit is one search result.
type Hit struct {
	ID    string
	Score float64 // BM25
}

// Index is a BM25 full-text index. It is safe for concurrent use.
type Index struct {
	idx       bleve.Index
	fwd       *forward
	pruneFrom uint64 // collection size from which searches take two passes
}

// runtimeConfig tunes scorch for a derived index. Batches return once
// searchable, without waiting for bleve to persist them ("unsafe_batch"):
// the watermark is persisted with the segments that hold it, and the
// owner replays the log past it after a crash. The persister naps so that
// small batches merge in memory before they reach disk.
func runtimeConfig() map[string]any {
	return map[string]any{
		"unsafe_batch": true,
		"scorchPersisterOptions": map[string]any{
			"PersisterNapTimeMSec":      200,
			"PersisterNapUnderNumFiles": 1000,
		},
	}
}

// SetBM25 sets BM25's k1 and b. bleve's scorer reads them from package
// variables, so they apply to every index of the process; call it before
// searching.
func SetBM25(k1, b float64) {
	search.BM25_k1, search.BM25_b = k1, b
}

// Open opens the index in dir, creating it if dir does not exist.
func Open(dir string) (*Index, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		idx, err := bleve.NewUsing(dir, indexMapping(), scorch.Name, scorch.Name, runtimeConfig())
		if err != nil {
			return nil, fmt.Errorf("text: create %s: %w", dir, err)
		}
		if err := idx.SetInternal([]byte(keyVersion), []byte(Version)); err != nil {
			idx.Close()
			return nil, err
		}
		return newIndex(idx, true), nil
	}
	if err := verify(dir); err != nil {
		return nil, err
	}
	idx, err := bleve.OpenUsing(dir, runtimeConfig())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	v, err := idx.GetInternal([]byte(keyVersion))
	if err != nil || string(v) != Version {
		idx.Close()
		return nil, fmt.Errorf("%w: version %q, this build writes %s", ErrStale, v, Version)
	}
	return newIndex(idx, false), nil
}

// verify opens the index read-only — no merger, no persister — in this
// goroutine, and checks every segment its snapshot uses against the
// CRC-32 of everything before it that zap keeps in the last four bytes
// of a segment file.
func verify(dir string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: opening it panicked: %v", ErrCorrupt, r)
		}
	}()
	cfg := runtimeConfig()
	cfg["read_only"] = true
	idx, err := bleve.OpenUsing(dir, cfg)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	defer idx.Close()
	adv, err := idx.Advanced()
	if err != nil {
		return err
	}
	r, err := adv.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	snap, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		return fmt.Errorf("text: unexpected index reader %T", r)
	}
	for _, ss := range snap.Segments() {
		if ps, ok := ss.Segment().(segment.PersistedSegment); ok {
			if err := checkSegment(ps.Path()); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkSegment checks a zap segment file against its CRC.
func checkSegment(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(b) < 4 || crc32.ChecksumIEEE(b[:len(b)-4]) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return fmt.Errorf("%w: segment %s does not match its checksum", ErrCorrupt, filepath.Base(path))
	}
	return nil
}

func newIndex(idx bleve.Index, primed bool) *Index {
	return &Index{idx: idx, fwd: newForward(primed), pruneFrom: pruneFrom}
}

// Prime adds documents the index already holds to its in-memory forward
// index. An index opened from disk is searched without it (more slowly)
// until its owner has primed it with every document and called MarkPrimed;
// documents applied meanwhile need no priming.
func (x *Index) Prime(docs []Doc) error {
	a, err := x.analyzer()
	if err != nil {
		return err
	}
	x.fwd.add(a, docs)
	return nil
}

// MarkPrimed says every document the index held at open has been primed.
func (x *Index) MarkPrimed() { x.fwd.markPrimed() }

// Forward reports the forward index's size and whether it is primed.
func (x *Index) Forward() (docs int, primed bool) {
	x.fwd.mu.RLock()
	defer x.fwd.mu.RUnlock()
	return len(x.fwd.docs), x.fwd.primed
}

func indexMapping() mapping.IndexMapping {
	m := mapping.NewIndexMapping()
	m.ScoringModel = bleveindex.BM25Scoring
	tf := mapping.NewTextFieldMapping()
	tf.Analyzer = en.AnalyzerName
	tf.Store = false
	tf.IncludeTermVectors = false
	tf.IncludeInAll = false
	tf.DocValues = false
	sf := mapping.NewKeywordFieldMapping()
	sf.Store = false
	sf.IncludeInAll = false
	sf.DocValues = false
	dm := mapping.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt(fieldText, tf)
	dm.AddFieldMappingsAt(fieldSonas, sf)
	m.DefaultMapping = dm
	m.DefaultAnalyzer = en.AnalyzerName
	return m
}

// Discard closes a damaged index without persisting anything more.
func (x *Index) Discard() error { return x.idx.Close() }

// Close persists what the index holds and closes it. (Batches return
// before bleve persists them; scorch's own Close would drop what is not yet
// on disk.)
func (x *Index) Close() error {
	ferr := x.Flush()
	if err := x.idx.Close(); err != nil {
		return err
	}
	return ferr
}

// Flush waits until every batch applied so far is persisted.
func (x *Index) Flush() error {
	done := make(chan error, 1)
	b := x.idx.NewBatch()
	b.SetInternal([]byte(keyVersion), []byte(Version))
	b.SetPersistedCallback(func(err error) { done <- err })
	if err := x.idx.Batch(b); err != nil {
		return err
	}
	return <-done
}

// Watermark is the insertion-log position of the last memory indexed.
func (x *Index) Watermark() (uint64, error) {
	v, err := x.idx.GetInternal([]byte(keyWatermark))
	if err != nil || v == nil {
		return 0, err
	}
	return strconv.ParseUint(string(v), 10, 64)
}

// Apply indexes docs and moves the watermark to watermark, atomically.
// A batch that fails or panics in bleve reports ErrCorrupt.
func (x *Index) Apply(docs []Doc, watermark uint64) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: indexing panicked: %v", ErrCorrupt, r)
		}
	}()
	b := x.idx.NewBatch()
	for _, d := range docs {
		if err := b.Index(d.ID, map[string]any{fieldText: d.Text, fieldSonas: d.Sonas}); err != nil {
			return fmt.Errorf("text: index %s: %w", d.ID, err)
		}
	}
	b.SetInternal([]byte(keyWatermark), []byte(strconv.FormatUint(watermark, 10)))
	if err := x.idx.Batch(b); err != nil {
		return fmt.Errorf("%w: indexing: %v", ErrCorrupt, err)
	}
	return x.Prime(docs)
}

// Delete removes documents and sets the watermark (for tools and tests
// that repair an index).
func (x *Index) Delete(docs []Doc, watermark uint64) error {
	b := x.idx.NewBatch()
	for _, d := range docs {
		b.Delete(d.ID)
	}
	b.SetInternal([]byte(keyWatermark), []byte(strconv.FormatUint(watermark, 10)))
	if err := x.idx.Batch(b); err != nil {
		return err
	}
	x.fwd.remove(docs)
	return nil
}

// Len is the number of documents.
func (x *Index) Len() (uint64, error) { return x.idx.DocCount() }

// SearchOptions shape a search.
type SearchOptions struct {
	K     int      // documents to return
	Sonas []string // only documents of these sonas, when set
	// Also, when set, is called after the first pass of a two-pass search
	// for documents to score too, wherever they rank (the dense path's
	// candidates, which the rare terms may miss; the caller may still be
	// finding them while the first pass runs).
	Also func() []string
}

// Candidates per result drawn before exact scoring, and the collection
// size from which the first pass uses only the query's rarer terms.
const (
	candidateFactor = 4
	pruneFrom       = 20_000
	rareShare       = 0.01
)

// Search returns the documents that best match q by BM25, best first, in
// two passes. Bleve draws candidates: by the whole query on a collection
// under 20,000 documents; on a larger one by the query's rarer terms only
// (those in at most 1% of the documents, or the two rarest), whose
// postings are short — the common terms' long postings are what makes an
// exhaustive BM25 slow. Then the forward index scores those candidates
// and opts.Also by the whole query, with the statistics of the documents
// held now (see forward.stats). The documents opts.Also names are scored
// wherever they belong: the caller names only documents of opts.Sonas.
// Until the forward index is primed, bleve scores. A search that fails
// or panics in bleve reports ErrCorrupt.
func (x *Index) Search(q string, opts SearchOptions) (hits []Hit, err error) {
	defer func() {
		if r := recover(); r != nil {
			hits, err = nil, fmt.Errorf("%w: search panicked: %v", ErrCorrupt, r)
		}
	}()
	if opts.K <= 0 {
		return nil, nil
	}
	terms, err := x.terms(q)
	if err != nil || len(terms) == 0 {
		return nil, err
	}
	st, primed := x.fwd.stats(terms)
	if !primed {
		n, err := x.idx.DocCount()
		if err != nil {
			return nil, err
		}
		if n < x.pruneFrom {
			return x.run(disjunction(terms), opts.Sonas, opts.K)
		}
		if st, err = x.stats(terms); err != nil {
			return nil, err
		}
	}
	first := disjunction(terms)
	if st.n >= x.pruneFrom {
		first = disjunction(rareTerms(terms, st))
	}
	cands, err := x.run(first, opts.Sonas, candidateFactor*opts.K)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(cands))
	for _, h := range cands {
		ids = append(ids, h.ID)
	}
	if opts.Also != nil {
		ids = append(ids, opts.Also()...)
	}
	if primed {
		return x.fwd.score(terms, st, ids, opts.K), nil
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// Not primed yet: bleve scores the candidates, with its own statistics.
	only := bleve.NewDocIDQuery(ids)
	only.SetBoost(0) // selects without scoring
	return x.run(bleve.NewConjunctionQuery(only, disjunction(terms)), opts.Sonas, opts.K)
}

func disjunction(terms []string) blevequery.Query {
	qs := make([]blevequery.Query, len(terms))
	for i, t := range terms {
		tq := bleve.NewTermQuery(t)
		tq.SetField(fieldText)
		qs[i] = tq
	}
	return bleve.NewDisjunctionQuery(qs...)
}

// run executes q, restricted to a sona's documents when sona is set.
func (x *Index) run(q blevequery.Query, sonas []string, k int) ([]Hit, error) {
	if len(sonas) > 0 {
		var any []blevequery.Query
		for _, id := range sonas {
			tq := bleve.NewTermQuery(id)
			tq.SetField(fieldSonas)
			any = append(any, tq)
		}
		bq := bleve.NewBooleanQuery()
		bq.AddMust(q)
		bq.AddFilter(bleve.NewDisjunctionQuery(any...))
		q = bq
	}
	res, err := x.idx.Search(bleve.NewSearchRequestOptions(q, k, 0, false))
	if err != nil {
		return nil, fmt.Errorf("%w: search: %v", ErrCorrupt, err)
	}
	hits := make([]Hit, len(res.Hits))
	for i, h := range res.Hits {
		hits[i] = Hit{ID: h.ID, Score: h.Score}
	}
	slices.SortFunc(hits, byScore) // ties by id, not by bleve's internal order
	return hits, nil
}

// analyzer is the text field's analyzer.
func (x *Index) analyzer() (analysis.Analyzer, error) {
	a := x.idx.Mapping().AnalyzerNamed(en.AnalyzerName)
	if a == nil {
		return nil, fmt.Errorf("text: no %q analyzer", en.AnalyzerName)
	}
	return a, nil
}

// terms analyses q as the text field is analysed, without repeats.
func (x *Index) terms(q string) ([]string, error) {
	a, err := x.analyzer()
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, tok := range a.Analyze([]byte(q)) {
		t := string(tok.Term)
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}

// stats reads the collection statistics of BM25 for terms, as bleve's
// scorer reads them: the document count, the average field length (which
// bleve takes as the field's distinct terms per document, rounded up) and
// each term's document frequency.
func (x *Index) stats(terms []string) (stats, error) {
	adv, err := x.idx.Advanced()
	if err != nil {
		return stats{}, err
	}
	r, err := adv.Reader()
	if err != nil {
		return stats{}, err
	}
	defer r.Close()
	st := stats{df: make([]uint64, len(terms))}
	if st.n, err = r.DocCount(); err != nil {
		return stats{}, err
	}
	if br, ok := r.(bleveindex.BM25Reader); ok && st.n > 0 {
		card, err := br.FieldCardinality(fieldText)
		if err != nil {
			return stats{}, err
		}
		st.avgLen = math.Ceil(float64(card) / float64(st.n))
	}
	for i, t := range terms {
		tfr, err := r.TermFieldReader(context.Background(), []byte(t), fieldText, false, false, false)
		if err != nil {
			return stats{}, err
		}
		st.df[i] = tfr.Count()
		tfr.Close()
	}
	return st, nil
}

// rareTerms keeps the terms in at most rareShare of the documents, or the
// two rarest when none is.
func rareTerms(terms []string, st stats) []string {
	order := make([]int, len(terms))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(st.df[a], st.df[b]) })
	var rare []string
	for i, t := range order {
		if float64(st.df[t]) <= rareShare*float64(st.n) || i < 2 {
			rare = append(rare, terms[t])
		}
	}
	return rare
}

// Has reports whether the index holds a document with this id.
func (x *Index) Has(id string) (bool, error) {
	d, err := x.idx.Document(id)
	return err == nil && d != nil, err
}

// Compact merges every segment into one, which drops the deleted
// documents and their terms, persists the result, and removes the files
// of the segments merged (once no search still reads them): after it,
// no file of the index holds what a deleted document said.
func (x *Index) Compact(ctx context.Context) error {
	adv, err := x.idx.Advanced()
	if err != nil {
		return err
	}
	sc, ok := adv.(*scorch.Scorch)
	if !ok {
		return fmt.Errorf("text: index is not scorch (%T)", adv)
	}
	// Scorch merges two segments or more, never one alone: a placeholder
	// document (no text) in a segment of its own makes the index two, so
	// that a single segment holding deleted documents is rewritten too.
	// It is deleted after; what it leaves is an empty document's id.
	b := x.idx.NewBatch()
	if err := b.Index(compactPlaceholder, map[string]any{fieldSonas: []string{}}); err != nil {
		return err
	}
	if err := x.idx.Batch(b); err != nil {
		return err
	}
	if err := x.Flush(); err != nil {
		return err
	}
	if err := sc.ForceMerge(ctx, &mergeplan.SingleSegmentMergePlanOptions); err != nil {
		return fmt.Errorf("text: compacting: %w", err)
	}
	b = x.idx.NewBatch()
	b.Delete(compactPlaceholder)
	if err := x.idx.Batch(b); err != nil {
		return err
	}
	return x.Flush()
}

// compactPlaceholder is the id of Compact's placeholder document: no
// memory's CID.
const compactPlaceholder = "memoria:compact"

// HasTerm reports whether the index's dictionary holds term (analysed
// already: lower case, stemmed) — in a live document or in a deleted one
// whose segment was not merged yet.
func (x *Index) HasTerm(term string) (bool, error) {
	d, err := x.idx.FieldDictPrefix(fieldText, []byte(term))
	if err != nil {
		return false, err
	}
	defer d.Close()
	for {
		e, err := d.Next()
		if err != nil || e == nil {
			return false, err
		}
		if e.Term == term {
			return true, nil
		}
	}
}
