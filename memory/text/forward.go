package text

import (
	"cmp"
	"math"
	"slices"
	"sync"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/search"
)

// forward is the index turned around: each document's analysed terms,
// with their frequencies, and its length. The second pass of a search
// scores its few hundred candidates by looking them up here, where
// intersecting the candidates with the postings of every query term costs
// a millisecond or more on a large collection (the common terms' postings
// are long).
//
// It lives in memory only. A new index is complete from its first
// document; an index opened from disk is complete once the owner has
// primed it with every document it holds (Prime, then MarkPrimed), and until
// then the second pass falls back to bleve's own intersection.
type forward struct {
	mu     sync.RWMutex
	terms  map[string]uint32  // term → term id
	docs   map[string]termVec // document id → its terms
	df     []uint32           // by term id: documents holding the term
	live   int                // terms some document holds
	primed bool
}

// termVec is one document's terms: ids ascending, with their frequencies.
type termVec struct {
	ids    []uint32
	freqs  []uint16 // saturated at 65,535
	length uint32   // tokens, as bleve counts a field's length
}

func newForward(primed bool) *forward {
	return &forward{terms: map[string]uint32{}, docs: map[string]termVec{}, primed: primed}
}

// add records documents' analyses (again, for a document re-indexed).
func (f *forward) add(a analysis.Analyzer, docs []Doc) {
	type analysed struct {
		id     string
		freqs  map[string]uint32
		length uint32
	}
	out := make([]analysed, len(docs))
	for i, d := range docs {
		toks := a.Analyze([]byte(d.Text))
		freqs := make(map[string]uint32, len(toks))
		for _, t := range toks {
			freqs[string(t.Term)]++
		}
		out[i] = analysed{d.ID, freqs, uint32(len(toks))}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range out {
		type pair struct{ id, n uint32 }
		pairs := make([]pair, 0, len(d.freqs))
		for t, n := range d.freqs {
			id, ok := f.terms[t]
			if !ok {
				id = uint32(len(f.terms))
				f.terms[t] = id
			}
			pairs = append(pairs, pair{id, n})
		}
		slices.SortFunc(pairs, func(a, b pair) int { return cmp.Compare(a.id, b.id) })
		v := termVec{ids: make([]uint32, len(pairs)), freqs: make([]uint16, len(pairs)), length: d.length}
		for i, p := range pairs {
			v.ids[i], v.freqs[i] = p.id, uint16(min(p.n, math.MaxUint16))
		}
		f.drop(d.id)
		f.docs[d.id] = v
		for _, id := range v.ids {
			for int(id) >= len(f.df) {
				f.df = append(f.df, 0)
			}
			if f.df[id] == 0 {
				f.live++
			}
			f.df[id]++
		}
	}
}

func (f *forward) remove(docs []Doc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range docs {
		f.drop(d.ID)
	}
}

// drop forgets a document, if held. The caller holds mu.
func (f *forward) drop(id string) {
	v, ok := f.docs[id]
	if !ok {
		return
	}
	for _, t := range v.ids {
		if f.df[t]--; f.df[t] == 0 {
			f.live--
		}
	}
	delete(f.docs, id)
}

// stats are the collection statistics of terms as bleve's BM25 scorer
// would read them from a fully merged index — the document count, the
// average field length (which bleve takes as the field's distinct terms
// per document, rounded up) and each term's document frequency — but
// from the documents held now, where bleve's own count what its segments
// still hold of deleted and replaced documents until they merge. So
// scores do not depend on an index's history: two stores of the same
// documents score alike. It reports false when the forward index is not
// primed.
func (f *forward) stats(terms []string) (stats, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if !f.primed {
		return stats{}, false
	}
	st := stats{n: uint64(len(f.docs)), df: make([]uint64, len(terms))}
	if st.n > 0 {
		st.avgLen = math.Ceil(float64(f.live) / float64(st.n))
	}
	for i, t := range terms {
		if id, ok := f.terms[t]; ok {
			st.df[i] = uint64(f.df[id])
		}
	}
	return st, true
}

func (f *forward) markPrimed() {
	f.mu.Lock()
	f.primed = true
	f.mu.Unlock()
}

// stats are the collection statistics BM25 scores with.
type stats struct {
	n      uint64   // documents
	avgLen float64  // bleve's average field length
	df     []uint64 // documents holding each query term
}

// score ranks ids by the whole query as bleve's BM25 scores a disjunction
// of the query's term queries (see bleve's TermQueryScorer and
// DisjunctionQueryScorer): for each matching term, idf·sat(tf, length)
// weighted by idf·queryNorm, summed and multiplied by the share of the
// terms matched. The caller has checked that the index is primed.
func (f *forward) score(terms []string, st stats, ids []string, k int) []Hit {
	f.mu.RLock()
	defer f.mu.RUnlock()
	type qterm struct {
		id  uint32
		idf float64
	}
	var qs []qterm
	var sumSquares float64
	for i, t := range terms {
		df := float64(st.df[i])
		idf := math.Log(1 + (float64(st.n)-df+0.5)/(df+0.5))
		sumSquares += idf * idf
		if id, ok := f.terms[t]; ok && st.df[i] > 0 {
			qs = append(qs, qterm{id: id, idf: idf})
		}
	}
	if len(qs) == 0 {
		return nil
	}
	norm := 1 / math.Sqrt(sumSquares)
	k1, b := search.BM25_k1, search.BM25_b
	seen := make(map[string]bool, len(ids))
	var hits []Hit
	for _, id := range ids {
		v, ok := f.docs[id]
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		var sum float64
		matched := 0
		for _, q := range qs {
			i, found := slices.BinarySearch(v.ids, q.id)
			if !found {
				continue
			}
			tf := math.Sqrt(float64(v.freqs[i]))
			sat := q.idf * tf * k1 / (tf + k1*(1-b+b*float64(v.length)/st.avgLen))
			sum += sat * q.idf * norm
			matched++
		}
		if matched > 0 {
			hits = append(hits, Hit{ID: id, Score: sum * float64(matched) / float64(len(terms))})
		}
	}
	slices.SortFunc(hits, byScore)
	if len(hits) > k {
		hits = hits[:k]
	}
	return hits
}

// byScore orders hits best first, ties by id.
func byScore(a, b Hit) int {
	if c := cmp.Compare(b.Score, a.Score); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}
