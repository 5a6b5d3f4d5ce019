package tiers

import (
	"cmp"
	"hash/maphash"
	"math"
	"slices"
	"strings"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/messages"
	"github.com/viterin/vek/vek32"
)

// Tier names: the children of a sona actor and the inboxes of the store.
const (
	STM = "stm"
	MTM = "mtm"
	LPM = "lpm"
)

// Names lists the tiers in the order work flows through them.
var Names = []string{STM, MTM, LPM}

// fquery is what fscore weighs a sona's segments against: a page's (or a
// query's) embedding with its squared norm, and its distinct keywords by
// their hashes — made once for all the segments of a placement or a tier
// recall. At two busy sonas fscore was 4.8% of five minutes of advances
// (issue 15, stop 103): base.Cosine's three sums in float64, an element
// at a time, half of it, and a hash of every keyword of every segment,
// whose bytes were rarely in the cache, the other half.
type fquery struct {
	vec    []float32
	norm   float64  // Σ vec²
	hashes []uint64 // its keywords' (keywordHashes)
}

func newFquery(vec []float32, keywords []string) *fquery {
	return &fquery{vec: vec, norm: squaredNorm(vec), hashes: keywordHashes(keywords)}
}

// squaredNorm is Σ v², summed in float32 with the vector instructions the
// vector index uses (the same as float64's to ~10⁻⁶).
func squaredNorm(v []float32) float64 {
	if len(v) == 0 { // vek32 refuses empty vectors
		return 0
	}
	return float64(vek32.Dot(v, v))
}

// cosine is the cosine similarity of emb, of squared norm norm, with q's
// embedding, its dot product summed as squaredNorm sums (one vek32.Dot: at
// 384 dimensions ~25 ns, where base.Cosine took ~330): 0 when either is
// zero, or their lengths differ.
func (q *fquery) cosine(emb []float32, norm float64) float64 {
	if len(emb) != len(q.vec) || len(emb) == 0 || q.norm == 0 || norm == 0 {
		return 0
	}
	return float64(vek32.Dot(emb, q.vec)) / math.Sqrt(norm*q.norm)
}

// jaccard is |K ∩ q| / |K ∪ q| of the set K of a segment's keywords,
// given by their distinct hashes (keywordHashes), and q's; 0 when both
// are empty. q's few are compared one by one.
func (q *fquery) jaccard(hashes []uint64) float64 {
	inter := 0
	for _, h := range hashes {
		if slices.Contains(q.hashes, h) {
			inter++
		}
	}
	union := len(hashes) + len(q.hashes) - inter
	if union == 0 {
		return 0
	}
	return float64(inter) / float64(union)
}

// fscore is MemoryOS's page-to-segment (and query-to-segment) score
// against q, a page's (query's) embedding and keywords: from the
// segment's scoring when the cache made it one, else from its fields (a
// step's own copy of a segment it changes).
func fscore(seg *Segment, q *fquery) float64 {
	sc := seg.scoring
	if sc == nil {
		sc = scoringOf(seg)
	}
	return q.cosine(seg.Embedding, sc.norm) + q.jaccard(sc.keywords)
}

// segmentScoring is what fscore reads of a segment the cache holds, made
// once as the cache takes it (a cached segment never changes): its
// embedding's squared norm, and its distinct keywords by their hashes
// (keywordHashes) — a cache line a segment, where its keywords' strings
// were a dozen apart.
type segmentScoring struct {
	norm     float64
	keywords []uint64
}

func scoringOf(seg *Segment) *segmentScoring {
	return &segmentScoring{norm: squaredNorm(seg.Embedding), keywords: keywordHashes(seg.Keywords)}
}

// keywordHashes are the distinct hashes of keywords, in their order: each
// a 64-bit hash for this process, two keywords counting as one with a
// chance of 2⁻⁶⁴ a pair.
func keywordHashes(keywords []string) []uint64 {
	out := make([]uint64, 0, len(keywords))
	for _, k := range keywords {
		if h := maphash.String(keywordSeed, k); !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

var keywordSeed = maphash.MakeSeed()

// Heat is a segment's heat at now (unix seconds).
func Heat(seg *Segment, now int64, p config.Tiers) float64 {
	dt := float64(max(0, now-seg.LastAccess))
	return p.Alpha*float64(seg.NVisit) + p.Beta*float64(seg.LInteraction) + p.Gamma*math.Exp(-dt/p.Mu.D().Seconds())
}

// PageVector is a page's embedding: the normalised sum of its input's and
// response's embeddings.
func PageVector(q, r []float32) []float32 {
	out := make([]float32, max(len(q), len(r)))
	for i := range out {
		if i < len(q) {
			out[i] += q[i]
		}
		if i < len(r) {
			out[i] += r[i]
		}
	}
	llm.Normalize(out)
	return out
}

// PushSTM appends page to the short-term memory and removes the pages
// beyond capacity, which it returns oldest first: they move to the MTM.
func PushSTM(stm *messages.StmState, page *messages.Page, capacity int) []*messages.Page {
	stm.Pages = append(stm.Pages, page)
	var out []*messages.Page
	if over := len(stm.Pages) - capacity; over > 0 {
		out = slices.Clone(stm.Pages[:over])
		stm.Pages = slices.Clone(stm.Pages[over:])
	}
	return out
}

// Place returns the index of the segment a page joins — the one with the
// best Fscore, if that exceeds theta — or -1 for a new segment, and the
// best Fscore. Ties go to the older segment.
func Place(segs []*Segment, vec []float32, keywords []string, theta float64) (int, float64) {
	best, bestScore := -1, math.Inf(-1)
	q := newFquery(vec, keywords)
	for i, s := range segs {
		if f := fscore(s, q); f > bestScore {
			best, bestScore = i, f
		}
	}
	if best < 0 || !(bestScore > theta) {
		return -1, max(bestScore, 0)
	}
	return best, bestScore
}

// NewSegment starts segment id with page at now.
func NewSegment(id uint64, page *messages.Page, weights []Keyword, now int64) *Segment {
	seg := &Segment{ID: id, CreatedAt: now, LastAccess: now}
	Join(seg, page, weights)
	return seg
}

// maxWeights bounds the weighted terms a segment keeps; maxKeywords is how
// many of them are its keywords.
const (
	maxWeights  = 64
	maxKeywords = 10
)

// Join adds page, with its keyword weights, to seg: the segment's
// embedding becomes the mean of its pages', its weights the sum of theirs,
// its keywords the strongest terms; L_interaction and the page count grow.
// The summary is the caller's (Model.Digest).
func Join(seg *Segment, page *messages.Page, weights []Keyword) {
	n := float32(seg.PageCount)
	if len(seg.Embedding) != len(page.Embedding) {
		seg.Embedding, n = make([]float32, len(page.Embedding)), 0
	}
	for i, x := range page.Embedding {
		seg.Embedding[i] = (seg.Embedding[i]*n + x) / (n + 1)
	}
	sum := map[string]float64{}
	for _, k := range seg.Weights {
		sum[k.Term] += k.Weight
	}
	for _, k := range weights {
		sum[k.Term] += k.Weight
	}
	seg.Weights = TopTerms(sum, maxWeights)
	seg.Keywords = seg.Keywords[:0]
	for _, k := range seg.Weights[:min(maxKeywords, len(seg.Weights))] {
		seg.Keywords = append(seg.Keywords, k.Term)
	}
	seg.PageCount++
	seg.LInteraction++
}

// TopTerms returns the n heaviest terms, heaviest first, ties by term.
func TopTerms(weights map[string]float64, n int) []Keyword {
	out := make([]Keyword, 0, len(weights))
	for t, w := range weights {
		out = append(out, Keyword{Term: t, Weight: w})
	}
	slices.SortFunc(out, func(a, b Keyword) int {
		if c := cmp.Compare(b.Weight, a.Weight); c != 0 {
			return c
		}
		return strings.Compare(a.Term, b.Term)
	})
	return out[:min(n, len(out))]
}

// Coldest returns the index of the segment with the lowest heat at now
// (the first on ties: segments are kept oldest first), or -1 when there is
// none.
func Coldest(segs []*Segment, now int64, p config.Tiers) int {
	coldest, heat := -1, math.Inf(1)
	for i, s := range segs {
		if h := Heat(s, now, p); h < heat {
			coldest, heat = i, h
		}
	}
	return coldest
}

// Promotable returns the indexes of the segments to promote at now: heat
// above τ and pages joined since the last promotion.
func Promotable(segs []*Segment, now int64, p config.Tiers) []int {
	var out []int
	for i, s := range segs {
		if s.LInteraction > 0 && Heat(s, now, p) > p.Tau {
			out = append(out, i)
		}
	}
	return out
}

// Promote marks seg handed to the persona up to page seq through: its
// L_interaction resets to 0.
func Promote(seg *Segment, through uint64) {
	seg.LInteraction = 0
	seg.PromotedThrough = max(seg.PromotedThrough, through)
	seg.Promotions++
}

// Visit records a retrieval of seg at now.
func Visit(seg *Segment, now int64) {
	seg.NVisit++
	seg.LastAccess = max(seg.LastAccess, now)
}

// Ranked is an index into a list with its score.
type Ranked struct {
	Index int
	Score float64
}

// TopSegments ranks segments by Fscore with a query and returns the best m
// with a positive score, best first (ties to the older segment).
func TopSegments(segs []*Segment, vec []float32, keywords []string, m int) []Ranked {
	var out []Ranked
	q := newFquery(vec, keywords)
	for i, s := range segs {
		if f := fscore(s, q); f > 0 {
			out = append(out, Ranked{i, f})
		}
	}
	sortRanked(out, func(i int) uint64 { return segs[i].ID })
	return out[:min(m, len(out))]
}

// TopPages ranks pages by cosine similarity with a query and returns the
// best k, best first (ties to the older page).
func TopPages(pages []*messages.Page, vec []float32, k int) []Ranked {
	out := make([]Ranked, len(pages))
	for i, p := range pages {
		out[i] = Ranked{i, base.Cosine(p.Embedding, vec)}
	}
	sortRanked(out, func(i int) uint64 { return pages[i].Seq })
	return out[:min(k, len(out))]
}

// TopFacts ranks facts by cosine similarity with a query and returns the
// best k, best first (ties to the older fact).
func TopFacts(facts []*Fact, vec []float32, k int) []Ranked {
	out := make([]Ranked, len(facts))
	for i, f := range facts {
		out[i] = Ranked{i, base.Cosine(f.Embedding, vec)}
	}
	sortRanked(out, func(i int) uint64 { return uint64(i) })
	return out[:min(k, len(out))]
}

func sortRanked(rs []Ranked, order func(int) uint64) {
	slices.SortFunc(rs, func(a, b Ranked) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(order(a.Index), order(b.Index))
	})
}

// Keywords weighs a text's terms by TF-IDF against a corpus of n pages
// whose document frequencies df gives, and returns the strongest limit.
// idf = ln((n+1)/(df+1)) + 1, so unseen terms weigh most.
func Keywords(text string, df func(term string) uint64, n uint64, limit int) []Keyword {
	return Weigh(distinct(llm.Tokenize(text)), text, df, n, limit)
}

// Weigh gives chosen terms (a model's keywords) their TF-IDF weights in
// text, counting a term the text does not contain once, and returns the
// strongest limit.
func Weigh(terms []string, text string, df func(term string) uint64, n uint64, limit int) []Keyword {
	tf := map[string]float64{}
	for _, t := range llm.Tokenize(text) {
		tf[t]++
	}
	w := make(map[string]float64, len(terms))
	for _, t := range terms {
		w[t] = max(1, tf[t]) * (math.Log(float64(n+1)/float64(df(t)+1)) + 1)
	}
	return TopTerms(w, limit)
}

// Terms returns the distinct terms of keyword weights, in order.
func Terms(ks []Keyword) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Term
	}
	return out
}

// NormalizeKeywords turns free-form keywords (from a model) into the
// stemmed terms the tiers compare, distinct, in order.
func NormalizeKeywords(ks []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range ks {
		for _, t := range llm.Tokenize(k) {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// Summarize picks up to maxSentences of sentences — those sharing the
// most terms with the others and with keywords, per square root of their
// length — and joins them in their original order, within maxChars.
func Summarize(sentences, keywords []string, maxSentences, maxChars int) string {
	type cand struct {
		pos   int
		text  string
		score float64
	}
	count := map[string]int{}
	terms := make([][]string, len(sentences))
	var uniq []string
	seen := map[string]bool{}
	for _, s := range sentences {
		if k := strings.ToLower(strings.TrimSpace(s)); k != "" && !seen[k] {
			seen[k] = true
			uniq = append(uniq, strings.TrimSpace(s))
		}
	}
	for i, s := range uniq {
		terms[i] = distinct(llm.Tokenize(s))
		for _, t := range terms[i] {
			count[t]++
		}
	}
	kw := map[string]bool{}
	for _, k := range keywords {
		kw[k] = true
	}
	cands := make([]cand, 0, len(uniq))
	for i, s := range uniq {
		if len(terms[i]) == 0 {
			continue
		}
		score := 0.0
		for _, t := range terms[i] {
			score += float64(count[t] - 1)
			if kw[t] {
				score += 2
			}
		}
		cands = append(cands, cand{i, s, score / math.Sqrt(float64(len(terms[i])))})
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(b.score, a.score) })
	var chosen []cand
	size := 0
	for _, c := range cands {
		if len(chosen) == maxSentences {
			break
		}
		if size > 0 && size+1+len(c.text) > maxChars {
			continue
		}
		chosen = append(chosen, c)
		size += len(c.text) + 1
	}
	slices.SortFunc(chosen, func(a, b cand) int { return cmp.Compare(a.pos, b.pos) })
	parts := make([]string, len(chosen))
	for i, c := range chosen {
		parts[i] = c.text
	}
	return Truncate(strings.Join(parts, " "), maxChars)
}

// distinct is ts without its repeats, in the order of their first
// appearance.
func distinct(ts []string) []string {
	out := ts[:0]      // in ts's own storage: its callers' tokens are theirs
	if len(ts) <= 32 { // a sentence's: a scan costs less than a map
		for _, t := range ts {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
		return out
	}
	seen := make(map[string]bool, len(ts))
	for _, t := range ts {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// Truncate cuts s to at most n bytes at a word boundary, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := strings.LastIndexByte(s[:n], ' ')
	if cut <= 0 {
		cut = n
	}
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return strings.TrimSpace(s[:cut]) + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// AddFact appends f to a FIFO of facts of at most capacity: a fact whose
// text is already there (compared case-insensitively) is refreshed and
// moved to the end instead of repeated; the oldest fall out.
func AddFact(facts []*Fact, f *Fact, capacity int) []*Fact {
	key := strings.ToLower(strings.TrimSpace(f.Text))
	facts = slices.DeleteFunc(facts, func(old *Fact) bool {
		return strings.ToLower(strings.TrimSpace(old.Text)) == key
	})
	facts = append(facts, f)
	if over := len(facts) - capacity; over > 0 {
		facts = slices.Clone(facts[over:])
	}
	return facts
}
