// Package text is Memoria's full-text index: BM25 over memory text with
// English analysis (possessives, lower case, stop words, Porter stemming),
// on bleve v2's scorch engine.
//
// The index is derived state. It is persisted in its own directory with a
// layout version and a watermark — the insertion-log position of the last
// memory it holds — written atomically with each batch, so after a crash
// the owner replays the log from the watermark. An index of another
// version is refused (ErrStale) and rebuilt by the owner from the store.
package text

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	blevequery "github.com/blevesearch/bleve/v2/search/query"
	bleveindex "github.com/blevesearch/bleve_index_api"
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

// ErrStale means the directory holds an index of another version (or an
// unreadable one): delete it and rebuild.
var ErrStale = errors.New("text: index is stale: rebuild it")

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
	idx bleve.Index
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
		return &Index{idx: idx}, nil
	}
	idx, err := bleve.OpenUsing(dir, runtimeConfig())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStale, err)
	}
	v, err := idx.GetInternal([]byte(keyVersion))
	if err != nil || string(v) != Version {
		idx.Close()
		return nil, fmt.Errorf("%w: version %q, this build writes %s", ErrStale, v, Version)
	}
	return &Index{idx: idx}, nil
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
func (x *Index) Apply(docs []Doc, watermark uint64) error {
	b := x.idx.NewBatch()
	for _, d := range docs {
		if err := b.Index(d.ID, map[string]any{fieldText: d.Text, fieldSonas: d.Sonas}); err != nil {
			return fmt.Errorf("text: index %s: %w", d.ID, err)
		}
	}
	b.SetInternal([]byte(keyWatermark), []byte(strconv.FormatUint(watermark, 10)))
	return x.idx.Batch(b)
}

// Delete removes documents and sets the watermark (for tools and tests
// that repair an index).
func (x *Index) Delete(docs []Doc, watermark uint64) error {
	b := x.idx.NewBatch()
	for _, d := range docs {
		b.Delete(d.ID)
	}
	b.SetInternal([]byte(keyWatermark), []byte(strconv.FormatUint(watermark, 10)))
	return x.idx.Batch(b)
}

// Len is the number of documents.
func (x *Index) Len() (uint64, error) { return x.idx.DocCount() }

// Search returns up to k documents matching any analysed term of q, best
// BM25 score first; with sona set, only documents of that sona.
func (x *Index) Search(q string, k int, sona string) ([]Hit, error) {
	if k <= 0 {
		return nil, nil
	}
	mq := bleve.NewMatchQuery(q)
	mq.SetField(fieldText)
	var query blevequery.Query = mq
	if sona != "" {
		tq := bleve.NewTermQuery(sona)
		tq.SetField(fieldSonas)
		bq := bleve.NewBooleanQuery()
		bq.AddMust(mq)
		bq.AddFilter(tq)
		query = bq
	}
	req := bleve.NewSearchRequestOptions(query, k, 0, false)
	res, err := x.idx.Search(req)
	if err != nil {
		return nil, fmt.Errorf("text: search: %w", err)
	}
	hits := make([]Hit, len(res.Hits))
	for i, h := range res.Hits {
		hits[i] = Hit{ID: h.ID, Score: h.Score}
	}
	return hits, nil
}
