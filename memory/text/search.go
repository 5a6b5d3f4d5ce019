package text

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
)

// SearchOptions shape a search.
type SearchOptions struct {
	K     int      // documents to return
	Sonas []string // only documents of these sonas, when set
	// Also, when set, names documents to score too, wherever they rank
	// (the dense path's candidates, which the rare terms of a large
	// collection's first pass may miss; the caller may still be finding
	// them while the first pass runs).
	Also func() []string
	// Feedback, when set, searches with pseudo-relevance feedback instead
	// of the query's own terms (see Feedback).
	Feedback *Feedback
}

// Feedback is pseudo-relevance feedback (RM3's relevance model): the
// search's terms are the Terms terms most typical of the Docs (ids),
// each doc weighted by its Weights entry — Σ_d w_d·tf(t, d)/|d|, times
// the term's idf — leaving out the query's own terms and terms no other
// document holds. So a question's best matches lend it their words
// ("Where did Caroline move from?" — "since I moved from my home
// country" — "my home country, Sweden").
type Feedback struct {
	Docs    []string
	Weights []float64
	Terms   int
}

// Candidates per result drawn before exact scoring, and the collection
// size from which the first pass uses only the query's rarer terms.
const (
	candidateFactor = 4
	pruneFrom       = 20_000
	rareShare       = 0.01
)

// stats are the collection statistics BM25 scores with: the document
// count, the average document length (in tokens) and each query term's
// document frequency. (Until issue 17 the average length was the
// vocabulary's size over the document count, rounded up — what bleve,
// which indexes before layout 3 used, took for it: 1 on LoCoMo's five
// conversations (2,748 terms over 2,760 turns) against a mean length of
// 14.8, so that every memory's length counted as fifteen times the
// average's and a term in a turn of 30 terms scored less than half what
// it did in one of 10. BM25's own mean length raised LoCoMo's recall:
// README, "LoCoMo evaluation".)
type stats struct {
	n      uint64
	avgLen float64
	df     []uint64
}

// Search returns the documents that best match q by BM25, best first,
// ties by id. On a collection under 20,000 documents it scores every
// document holding a query term. On a larger one it takes two passes:
// candidates by the query's rarer terms only (those in at most 1% of the
// documents, or the two rarest), whose postings are short — the common
// terms' long postings are what makes an exhaustive BM25 slow — and then
// those candidates and opts.Also scored by the whole query. A search
// within sonas holding fewer documents than those postings, counted in
// what scoring costs, scores every document of theirs by the whole query
// instead (exact at any size). A search that panics reports ErrCorrupt.
func (x *Index) Search(q string, opts SearchOptions) (hits []Hit, err error) {
	defer func() {
		if r := recover(); r != nil {
			hits, err = nil, fmt.Errorf("%w: search panicked: %v", ErrCorrupt, r)
		}
	}()
	if opts.K <= 0 {
		return nil, nil
	}
	terms := unique(analyze(q))
	if len(terms) == 0 {
		return nil, nil
	}
	var also []string
	if opts.Also != nil {
		also = opts.Also()
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if opts.Feedback != nil {
		if terms = x.expansion(terms, *opts.Feedback); len(terms) == 0 {
			return nil, nil
		}
	}
	var filter []uint32
	if len(opts.Sonas) > 0 {
		for _, s := range opts.Sonas {
			if id, ok := x.sonaIDs[s]; ok {
				filter = append(filter, id)
			}
		}
		if len(filter) == 0 {
			return nil, nil
		}
	}
	ids := make([]uint32, len(terms)) // math.MaxUint32: not in the index
	st := stats{n: uint64(x.docs.Len()), df: make([]uint64, len(terms))}
	if st.n > 0 {
		st.avgLen = float64(x.tokens) / float64(st.n)
	}
	for i, t := range terms {
		ids[i] = math.MaxUint32
		if id, ok := x.terms[t]; ok {
			ids[i] = id
			st.df[i] = uint64(x.df[id])
		}
	}
	if st.n < x.pruneFrom {
		if slots := x.sonaSlots(filter, ids, ids); slots != nil {
			return x.top(x.scoreSlots(ids, st, slots), opts.K), nil
		}
		return x.top(x.accumulate(ids, st, filter), opts.K), nil
	}
	rare := rareTerms(ids, st)
	rst := stats{n: st.n, avgLen: st.avgLen, df: make([]uint64, len(rare))}
	rids := make([]uint32, len(rare))
	for k, i := range rare {
		rids[k], rst.df[k] = ids[i], st.df[i]
	}
	if slots := x.sonaSlots(filter, ids, rids); slots != nil {
		return x.top(x.scoreSlots(ids, st, slots), opts.K), nil // every one, by the whole query
	}
	cands := x.top(x.accumulate(rids, rst, filter), candidateFactor*opts.K)
	slots := make([]uint32, 0, len(cands)+len(also))
	for _, h := range cands {
		s, _ := x.docs.Get(h.ID)
		slots = append(slots, s)
	}
	for _, id := range also {
		if s, ok := x.docs.Get(id); ok && x.inSonas(s, filter) {
			slots = append(slots, s)
		}
	}
	slices.Sort(slots)
	return x.top(x.scoreSlots(ids, st, slices.Compact(slots)), opts.K), nil
}

// expansion is fb's expansion terms for a query of terms (see
// Feedback). The caller holds mu.
func (x *Index) expansion(terms []string, fb Feedback) []string {
	total := 0.0
	for _, w := range fb.Weights {
		total += w
	}
	if total <= 0 || len(fb.Docs) != len(fb.Weights) {
		return nil
	}
	query := map[uint32]bool{}
	for _, t := range terms {
		if id, ok := x.terms[t]; ok {
			query[id] = true
		}
	}
	score := map[uint32]float64{}
	for i, id := range fb.Docs {
		s, ok := x.docs.Get(id)
		if !ok || x.slots[s].dead || x.slots[s].length == 0 {
			continue
		}
		sl := &x.slots[s]
		terms := x.termsOf(sl)
		for j := range terms.len() {
			if t := terms.id(j); !query[t] && x.df[t] > 1 {
				score[t] += fb.Weights[i] / total * float64(terms.freq(j)) / float64(sl.length)
			}
		}
	}
	n := float64(x.docs.Len())
	ids := make([]uint32, 0, len(score))
	for t := range score {
		d := float64(x.df[t])
		score[t] *= math.Log(1 + (n-d+0.5)/(d+0.5))
		ids = append(ids, t)
	}
	slices.SortFunc(ids, func(a, b uint32) int {
		if c := cmp.Compare(score[b], score[a]); c != 0 {
			return c
		}
		return cmp.Compare(x.names[a], x.names[b])
	})
	out := make([]string, 0, fb.Terms)
	for _, t := range ids[:min(fb.Terms, len(ids))] {
		out = append(out, x.names[t])
	}
	return out
}

// unique keeps the first of each term.
func unique(terms []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range terms {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// weights are a query's terms' BM25 weights: idf, and the query norm over
// all its terms (bleve's queryNorm, so that scores did not change).
func weights(st stats) (idf []float64, norm float64) {
	idf = make([]float64, len(st.df))
	var sumSquares float64
	for i, df := range st.df {
		d := float64(df)
		idf[i] = math.Log(1 + (float64(st.n)-d+0.5)/(d+0.5))
		sumSquares += idf[i] * idf[i]
	}
	return idf, 1 / math.Sqrt(sumSquares)
}

// term is one matching term's contribution to a document's score:
// idf·sat(tf, length) weighted by idf·norm.
func term(idf, norm float64, freq uint16, length uint32, avgLen float64) float64 {
	k1, b := bm25K1, bm25B
	tf := math.Sqrt(float64(freq))
	return idf * tf * k1 / (tf + k1*(1-b+b*float64(length)/avgLen)) * idf * norm
}

// scores is an accumulation of BM25 over documents: sum and matched
// terms by slot, and the slots touched.
type scores struct {
	sum     []float64
	matched []uint16
	touched []uint32
	terms   int // query terms, for the coordination factor
}

var scorePool sync.Pool

// newScores is an empty accumulation for a query of terms terms, from the
// pool. The caller holds mu.
func (x *Index) newScores(terms int) *scores {
	sc, _ := scorePool.Get().(*scores)
	if sc == nil {
		sc = &scores{}
	}
	sc.fit(len(x.slots))
	sc.touched, sc.terms = sc.touched[:0], terms
	return sc
}

// fit makes sc hold at least slots slots, with a quarter more room: the
// index grows by a slot a document, and arrays only just large enough
// were made again for nearly every search of a growing index. Every
// slot but the touched ones holds zero, so longer arrays do no harm.
func (sc *scores) fit(slots int) {
	if len(sc.sum) < slots {
		n := slots + slots/4
		sc.sum = make([]float64, n)
		sc.matched = make([]uint16, n)
	}
}

// accumulate scores every document of filter's sonas holding one of the
// terms ids (math.MaxUint32: a term not in the index), as a disjunction
// of term queries: the contributions summed, times the share of the terms
// matched. The caller holds mu.
func (x *Index) accumulate(ids []uint32, st stats, filter []uint32) *scores {
	sc := x.newScores(len(ids))
	idf, norm := weights(st)
	for i, id := range ids {
		if id == math.MaxUint32 {
			continue
		}
		for _, p := range x.post[id] {
			if filter != nil && !x.postOwned(p, filter) {
				continue
			}
			s := &x.slots[p.slot]
			if s.dead {
				continue
			}
			if sc.matched[p.slot] == 0 {
				sc.touched = append(sc.touched, p.slot)
			}
			sc.sum[p.slot] += term(idf[i], norm, p.freq, s.length, st.avgLen)
			sc.matched[p.slot]++
		}
	}
	return sc
}

// postOwned is owned for p's slot, from p's owner when it holds one.
// The caller holds mu.
func (x *Index) postOwned(p posting, filter []uint32) bool {
	switch p.owner {
	case postDead:
		return false
	case postMany:
		return x.owned(p.slot, filter)
	}
	return slices.Contains(filter, uint32(p.owner))
}

// owned reports whether the document in slot n is in one of filter's
// sonas, from its owner when it has one sona. The caller holds mu.
func (x *Index) owned(n uint32, filter []uint32) bool {
	switch o := x.owner[n]; o {
	case ownerDead:
		return false
	case ownerMany:
		return x.inSonas(n, filter)
	default:
		return slices.Contains(filter, o)
	}
}

// scoreSlots scores the documents slots (ascending, no repeats) by the
// terms ids, from each document's own terms. The caller holds mu.
func (x *Index) scoreSlots(ids []uint32, st stats, slots []uint32) *scores {
	sc := x.newScores(len(ids))
	idf, norm := weights(st)
	for _, n := range slots {
		s := &x.slots[n]
		var sum float64
		var matched uint16
		if s.wide {
			sum, matched = scoreRun(x.wideOf(s), s.length, ids, idf, norm, st.avgLen)
		} else {
			sum, matched = scoreRun(x.narrowOf(s), s.length, ids, idf, norm, st.avgLen)
		}
		if matched > 0 {
			sc.touched = append(sc.touched, n)
			sc.sum[n], sc.matched[n] = sum, matched
		}
	}
	return sc
}

// scoreRun is the BM25 of a document of length tokens, whose terms are t,
// by the terms ids (idf, norm: weights), summed in their order, and how
// many it holds: one width's loop, as a search within a sona scores each
// of its documents so.
func scoreRun[T uint16 | uint32](t termRun[T], length uint32, ids []uint32, idf []float64, norm, avgLen float64) (sum float64, matched uint16) {
	for i, id := range ids {
		if id == math.MaxUint32 {
			continue // in no document
		}
		if k, found := t.find(id); found {
			sum += term(idf[i], norm, t.freq(k), length, avgLen)
			matched++
		}
	}
	return sum, matched
}

// top returns the k best of sc, best first, ties by id, and gives sc
// back to the pool: a heap of the k best so far (the worst on top), so
// that a query matching most of a large collection is not sorted whole.
// The caller holds mu.
func (x *Index) top(sc *scores, k int) []Hit {
	h := make(hitHeap, 0, min(k, len(sc.touched)))
	for _, n := range sc.touched {
		hit := Hit{ID: x.idOf(&x.slots[n]), Score: sc.sum[n] * float64(sc.matched[n]) / float64(sc.terms)}
		sc.sum[n], sc.matched[n] = 0, 0
		switch {
		case len(h) < k:
			h = append(h, hit)
			h.up(len(h) - 1)
		case byScore(hit, h[0]) < 0: // better than the worst kept
			h[0] = hit
			h.down(0)
		}
	}
	scorePool.Put(sc)
	slices.SortFunc(h, byScore)
	return h
}

// hitHeap is a heap of hits with the worst (by byScore) at its root.
type hitHeap []Hit

func (h hitHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if byScore(h[i], h[p]) <= 0 { // not worse than its parent
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (h hitHeap) down(i int) {
	for {
		w := i
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < len(h) && byScore(h[c], h[w]) > 0 { // worse
				w = c
			}
		}
		if w == i {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}

// sonaScore is what scoring one document by one query term costs (a
// binary search of its terms) against taking one posting.
const sonaScore = 4

// sonaSlots returns the live documents of filter's sonas (ascending) when
// scoring each of them by the query's terms ids costs less than taking the
// postings of the terms walked — a sona holding few of the collection's
// documents — and nil otherwise (and without a filter). The caller holds
// mu.
func (x *Index) sonaSlots(filter, ids, walked []uint32) []uint32 {
	if filter == nil {
		return nil
	}
	docs, known, postings := 0, 0, 0
	for _, s := range filter {
		if int(s) < len(x.bySona) {
			docs += len(x.bySona[s])
		}
	}
	for _, id := range ids {
		if id != math.MaxUint32 {
			known++
		}
	}
	for _, id := range walked {
		if id != math.MaxUint32 {
			postings += len(x.post[id])
		}
	}
	if docs*known*sonaScore >= postings {
		return nil
	}
	out := make([]uint32, 0, docs)
	for _, s := range filter {
		if int(s) < len(x.bySona) {
			for _, n := range x.bySona[s] {
				if !x.slots[n].dead {
					out = append(out, n)
				}
			}
		}
	}
	if len(filter) > 1 {
		slices.Sort(out)
		out = slices.Compact(out)
	}
	return out
}

// inSonas reports whether the document in slot n is in one of filter's
// sonas (any, when filter is nil).
func (x *Index) inSonas(n uint32, filter []uint32) bool {
	if filter == nil {
		return true
	}
	for _, s := range x.sonasOf(&x.slots[n]) {
		if slices.Contains(filter, s) {
			return true
		}
	}
	return false
}

// rareTerms returns the positions of the terms in at most rareShare of
// the documents, or of the two rarest when none is.
func rareTerms(ids []uint32, st stats) []int {
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(st.df[a], st.df[b]) })
	var rare []int
	for k, i := range order {
		if float64(st.df[i]) <= rareShare*float64(st.n) || k < 2 {
			rare = append(rare, i)
		}
	}
	slices.Sort(rare)
	return rare
}

// byScore orders hits best first, ties by id.
func byScore(a, b Hit) int {
	if c := cmp.Compare(b.Score, a.Score); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}
