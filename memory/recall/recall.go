package recall

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/ipfs/go-cid"
	"go.opentelemetry.io/otel/attribute"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/trace"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/index"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/text"
	"github.com/memoria-ai/memoria/memory/vector"
	"github.com/memoria-ai/memoria/messages"
)

// How a recalled memory entered the result.
const (
	ViaHit       = "hit"       // one of the top-k scored candidates
	ViaCoAccess  = "coaccess"  // a strong co-access partner of a hit
	ViaExpansion = "expansion" // reached along an edge
)

// Recall scopes.
const (
	ScopeSelf = "self" // every sona, weighted by sona similarity
	ScopeSona = "sona" // the recalling sona and the backbone
)

// AsOfTimeCutoff separates the two meanings of Query.AsOf: below it, an ACT
// seq of the recalling sona; from it on, unix seconds (2001-09-09).
const AsOfTimeCutoff = 1_000_000_000

// Query asks for the memories that matter for a prompt in a sona.
type Query struct {
	Sona   string    // uuid of the recalling sona
	Text   string    // the prompt
	Vector []float32 // its embedding; computed from Text when nil
	K      int       // ranked hits; 0 = config (recall.top_k)
	Budget int       // characters of the result; 0 = config
	// Expand bounds the memories co-access and edge expansion add to the
	// hits; nil = config (recall.expand_per_hit per hit), 0 = none.
	Expand *int
	// Exclude keeps memories out (e.g. the input being answered).
	Exclude []cid.Cid
	// Peek leaves no trace: no access, co-access or query log is recorded
	// (for inspection, which should not change what it inspects).
	Peek bool
	// AgentID partitions co-access learning and use.
	AgentID string
	// Scope is ScopeSelf or ScopeSona; "" = config.
	Scope string
	// AsOf, when set, recalls only what existed at that point (see AsOfTimeCutoff).
	AsOf *int64
	// IncludeHidden returns archived and expired memories too.
	IncludeHidden bool
	// Paths, when set, overrides the configured retrieval paths and
	// stages (for evaluation).
	Paths *Paths
	// Centroid, when set, stands for the recalling sona's centroid and
	// Activity for its chain length: a cluster member recalls in self
	// scope for a sona it may not hold, as the sona's owner asked.
	Centroid []float32
	Activity int64
	// Now is when the query is asked (unix seconds): the time its relative
	// expressions ("last week", "in May") are resolved against; 0 = the
	// clock's now, or AsOf when that is a time.
	Now int64
}

// Paths turns the stages of recall on and off.
type Paths struct {
	Weights  config.PathWeights // dense, BM25, affinity, metric; 0 = off
	CoAccess bool               // pull in co-access partners of the hits
	Expand   bool               // expand along edges
	Fusion   string             // "rrf" | "weighted"
	// Score, when set, replaces recall.weights (relevance, recency,
	// importance, sona similarity) for this recall.
	Score *config.Weights
}

// Explain is how a recalled memory came to its score. The contributions
// add up to the score.
type Explain struct {
	Evidence       Evidence
	Fused          Fused
	KindWeight     float64
	Recency        float64 // activity-relative decay factor
	Importance     float64
	SonaSimilarity float64
	// PriorUnit is what the priors' weights are measured in: the
	// evidence's resolution over the query's candidates (PriorUnit).
	PriorUnit float64
	CoAccess  float64 // weight of the co-access link that pulled it in
	// Rerank is the reranker's score and RerankRank its rank among the
	// candidates reranked (0: not reranked); see scorer.rerank.
	Rerank     float64
	RerankRank int
	Contrib    Contributions
}

// Contributions are the additive parts of a score.
type Contributions struct {
	Dense, BM25, Affinity, Metric float64 // w_relevance × fused part × kind weight
	Context, Time, Speaker        float64 // likewise
	Session, Feedback, Reply      float64 // likewise
	Recency                       float64 // kind weight × w_recency × activity-relative decay
	Importance                    float64 // kind weight × w_importance × importance
	SonaSimilarity                float64 // kind weight × w_sona × sona similarity
	Path                          float64 // score carried from a hit (co-access, expansion)
	Rerank                        float64 // the shift of the score the reranker's order made
}

// Sum is the score the contributions make.
func (c Contributions) Sum() float64 {
	return c.Dense + c.BM25 + c.Affinity + c.Metric + c.Context + c.Time + c.Speaker + c.Session + c.Feedback + c.Reply + c.Recency + c.Importance + c.SonaSimilarity + c.Path + c.Rerank
}

// Decay is Living Memory's activity-relative forgetting:
// e^(−λ'·inactivity) where inactivity is the share of its home sona's
// activity (chain length) since the memory was last stored or recalled,
// and λ' = λ/(1+importance) so important memories decay slower. Backbone
// memories never decay.
func Decay(lambda, importance float64, backbone bool, activity, lastTick int64) float64 {
	if backbone || activity <= 0 {
		return 1
	}
	ratio := float64(activity-lastTick) / float64(activity)
	ratio = math.Max(0, math.Min(1, ratio))
	return math.Exp(-lambda / (1 + importance) * ratio)
}

// ScoreHit computes a candidate's contributions (DESIGN.md §5): its kind
// weight × (w_relevance × relevance, split by path, + the priors, w_recency
// × recency + w_importance × importance + w_sona × sona similarity, each
// 0..1, in the unit e.PriorUnit). The unit is the evidence's resolution
// for the query, the mean distance between neighbouring candidates by
// relevance (PriorUnit): the priors order what the evidence cannot tell
// apart, candidates nearer each other than a share of that distance (with
// the default weights, 0.4 of it), and not what it can, whatever the
// spread of the embedder's cosines or the number of candidates. (Added on
// the relevance's 0..1 scale, the priors reached across several
// neighbours: a narrow embedder's near ties, calibrated min-max, were
// reordered by recency and importance that carry little evidence on LoCoMo,
// and dense-only recall fell below the plain cosine's on every dev
// conversation: README, "Calibration".) The unit is at most 1, so the
// priors stay on the scale of a perfect match (at least 1, FuseWeighted),
// and the kind weight scales them with it: a memory the query does not
// match and no evidence supports scores at most 0.4 × its kind weight
// with the default weights, a perfect match at least its kind weight, of
// the same kind or of the default kinds (whose weights differ at most
// 2×). (They were added outside the kind weight, to a relevance the
// evidence's weights divided: a perfect match of a note, without other
// evidence, scored 0.16 beside priors of up to 0.4.)
func ScoreHit(e *Explain, w config.Weights) {
	k := e.KindWeight
	f := w.Relevance * k
	p := k * e.PriorUnit
	e.Contrib = Contributions{
		Dense:          f * e.Fused.Dense,
		BM25:           f * e.Fused.BM25,
		Affinity:       f * e.Fused.Affinity,
		Metric:         f * e.Fused.Metric,
		Context:        f * e.Fused.Context,
		Time:           f * e.Fused.Time,
		Speaker:        f * e.Fused.Speaker,
		Session:        f * e.Fused.Session,
		Feedback:       f * e.Fused.Feedback,
		Reply:          f * e.Fused.Reply,
		Recency:        p * w.Recency * e.Recency,
		Importance:     p * w.Importance * e.Importance,
		SonaSimilarity: p * w.Sona * e.SonaSimilarity,
	}
}

// PriorUnit is the unit of the priors for a query whose candidates have
// these relevances: the evidence's resolution, the mean distance between
// neighbouring candidates when they are ordered by relevance — their range
// over their number less one. Two candidates nearer each other than that
// are nearer than the evidence puts neighbours on average. When they
// all have the same relevance (or there is one), the evidence cannot
// order them and the unit is 1: the priors alone do, on a perfect match's
// scale — which is also the most it is (two candidates 2 apart would make
// it 2).
func PriorUnit(relevances []float64) float64 {
	if len(relevances) < 2 {
		return 1
	}
	lo, hi := slices.Min(relevances), slices.Max(relevances)
	if lo == hi {
		return 1
	}
	return math.Min(1, (hi-lo)/float64(len(relevances)-1))
}

// Recalled is one memory of a recall result.
type Recalled struct {
	CID     cid.Cid
	Memory  *model.Memory // shared: do not modify
	Meta    *messages.MemoryMeta
	Score   float64
	Explain Explain
	Via     string
	Depth   int // hops from a hit
	// Rank is a hit's place among the hits, from 1, in the order they were
	// chosen (by score; with diversity when recall.mmr_lambda < 1); 0 for
	// what co-access and expansion added.
	Rank int
	// Collapsed are near-identical memories folded into this one (see
	// recall.collapse): found, but not injected.
	Collapsed []cid.Cid
	// place is its position in its sona's chain plus one, -1 for none, 0
	// not looked up yet (placeOf).
	place int32
	// vid is its vector id plus one, -1 for none, 0 not looked up yet
	// (vectorID).
	vid int64
	// partial: Meta is what knownCandidate knew, not the record.
	partial bool
}

// Ranked returns the hits of a recall result in their rank order.
func Ranked(rs []*Recalled) []*Recalled {
	var hits []*Recalled
	for _, r := range rs {
		if r.Rank > 0 {
			hits = append(hits, r)
		}
	}
	slices.SortFunc(hits, func(a, b *Recalled) int { return cmp.Compare(a.Rank, b.Rank) })
	return hits
}

// Chars is the memory's size against the budget: its text in characters.
func (r *Recalled) Chars() int { return r.Memory.TextChars() }

// Time orders memories: the memory's timestamp, else when it was stored.
func (r *Recalled) Time() int64 { return memoryTime(r.Memory, r.Meta) }

func memoryTime(m *model.Memory, meta *messages.MemoryMeta) int64 {
	if m.Timestamp != nil {
		return *m.Timestamp
	}
	return meta.CreatedAt
}

// WithDefaults is q with what it leaves out taken from rc: k, the budget
// and the scope; and how many memories expansion may add (q.Expand, else
// rc.ExpandPerHit per hit).
func (q Query) WithDefaults(rc config.Recall) (Query, int) {
	if q.K <= 0 {
		q.K = rc.TopK
	}
	if q.Budget <= 0 {
		q.Budget = rc.BudgetChars
	}
	if q.Scope == "" {
		q.Scope = rc.Scope
	}
	expand := rc.ExpandPerHit * q.K
	if q.Expand != nil {
		expand = *q.Expand
	}
	return q, expand
}

// Recall returns the memories that matter for q (DESIGN.md §5):
//
//  1. candidates from the dense (HNSW) and full-text (BM25) paths, and an
//     affinity path of the associations and co-access partners of the best
//     of them, at most recall.candidates from each path (and, when
//     recall.paths.feedback is set, a full-text search
//     with the words of the best: pseudo-relevance feedback), fused
//     (reciprocal rank fusion or a calibrated sum) with the evidence of
//     each candidate's context, session, time and speaker (context.go);
//  2. each scored: kind weight × (relevance + activity-relative recency,
//     importance and sona similarity, each weighted, in the unit of the
//     evidence's resolution over the candidates; see ScoreHit);
//  3. those below the emergent retrieval threshold dropped: a candidate is
//     kept when its dense similarity reaches mean + log(0.3)·std of the
//     candidates' similarities (bootstrap below the configured size) or
//     another path vouches for it;
//  4. with recall.rerank, the best candidates reordered by a reranker
//     (rerank.go; its failure keeps the fused order);
//  5. the k hits: the best candidates (by score, or by maximal marginal
//     relevance when recall.mmr_lambda < 1) that fit the character budget,
//     a memory near-identical to one already taken folded into it
//     (recall.collapse); then at most Expand more: the strongest co-access
//     partners of the hits and a best-first expansion along edges, while
//     budget remains; all in topological order (supports first, time as
//     tie-breaker). Ranked gives the hits in their rank order.
//
// Unless q.Peek, it returns its trace: the writes that record the access,
// strengthen the co-access of the hits and log the query, for the caller
// to submit (Trace.Submit). It traces a span "recall" with a child per
// stage (recall.dense, recall.bm25, recall.metric, recall.fusion with
// recall.affinity inside, recall.rerank, recall.select, recall.expand).
func (s *Recaller) Recall(ctx context.Context, q Query) (out []*Recalled, tr Trace, err error) {
	rc := s.cfg.Recall
	paths := Paths{Weights: rc.Paths, CoAccess: rc.CoAccessPartners > 0, Expand: rc.ExpandDepth > 0, Fusion: rc.Fusion}
	if q.Paths != nil {
		paths = *q.Paths
	}
	q, expandMax := q.WithDefaults(rc)
	ctx, span := trace.Start(ctx, "recall", attribute.String("memoria.sona.uuid", q.Sona), attribute.String("memoria.recall.scope", q.Scope),
		attribute.Int("memoria.recall.k", q.K), attribute.Int("memoria.recall.budget_chars", q.Budget), attribute.Int("memoria.recall.expand", expandMax))
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.Int("memoria.recall.hits", len(Ranked(out))), attribute.Int("memoria.recall.memories", len(out)))
			trace.Fail(span, err)
		}
		span.End()
	}()
	if q.Scope != ScopeSelf && q.Scope != ScopeSona {
		return nil, nil, fmt.Errorf("%w: scope must be %q or %q", base.ErrInvalid, ScopeSelf, ScopeSona)
	}
	if expandMax < 0 {
		return nil, nil, fmt.Errorf("%w: expand must not be negative", base.ErrInvalid)
	}
	if err := base.ValidateAgentID(q.AgentID); err != nil {
		return nil, nil, err
	}
	if q.Vector == nil && paths.Weights.Dense > 0 || q.Vector == nil && paths.Weights.Affinity > 0 {
		vecs, err := s.embed(ctx, q.Text)
		if err != nil {
			return nil, nil, err
		}
		q.Vector = vecs[0]
	}
	if q.Vector != nil && len(q.Vector) != s.index.Dims() {
		return nil, nil, fmt.Errorf("%w: query vector has %d dims, want %d", base.ErrInvalid, len(q.Vector), s.index.Dims())
	}
	// From here a recall computes (a reranker's call aside): it waits for
	// a worker.
	worker := &slot{w: s.workers}
	if err := worker.take(ctx); err != nil {
		return nil, nil, err
	}
	defer worker.give()
	centroid, activity, ok := s.sonas.Snapshot(q.Sona)
	if q.Centroid != nil {
		centroid, activity, ok = q.Centroid, q.Activity, true
	}
	if !ok {
		return nil, nil, fmt.Errorf("%w: sona %q", base.ErrNotFound, q.Sona)
	}
	n := rc.Candidates + len(q.Exclude) // each path brings at most n candidates
	if q.AsOf != nil {
		n *= 4 // later memories are filtered out after the search
	}
	sc := &scorer{
		self: s, ctx: ctx, q: &q, centroid: centroid, now: s.clock.Now().Unix(),
		sims: map[string]float64{}, activity: map[string]int64{q.Sona: activity},
		excluded: map[cid.Cid]bool{}, weights: rc.Weights,
		collapse: collapser{min: rc.Collapse, sets: s.words}, n: n, worker: worker,
		scratch: evidenceScratches.Get().(*evidenceScratch),
	}
	defer sc.scratch.release()
	if paths.Score != nil {
		sc.weights = *paths.Score
	}
	for _, c := range q.Exclude {
		sc.excluded[c] = true
	}
	if err := sc.resolveAsOf(); err != nil {
		return nil, nil, err
	}

	// The backbone is every sona's: in sona scope its memories join the sona's.
	backbone := s.backbone()
	// The dense and full-text paths run side by side; the full-text path
	// also scores the dense candidates.
	var dense []pathHit
	var denseDone sync.WaitGroup
	if paths.Weights.Dense > 0 {
		denseDone.Add(1)
		go func() {
			defer denseDone.Done()
			_, dspan := trace.Start(ctx, "recall.dense")
			defer dspan.End()
			for _, h := range s.denseCandidates(q, n, backbone) {
				dense = append(dense, pathHit{key: h.Key, score: float64(h.Similarity)})
			}
			dspan.SetAttributes(attribute.Int("memoria.recall.candidates", len(dense)))
		}()
	}
	var bm25 []pathHit
	if paths.Weights.BM25 > 0 {
		bctx, bspan := trace.Start(ctx, "recall.bm25")
		bm25, err = s.bm25Candidates(bctx, q, n, backbone, func() []pathHit { denseDone.Wait(); return dense }, nil)
		bspan.SetAttributes(attribute.Int("memoria.recall.candidates", len(bm25)))
		trace.Fail(bspan, err)
		bspan.End()
		if err != nil {
			denseDone.Wait()
			return nil, nil, err
		}
	}
	denseDone.Wait()

	// The metric path (EUMAS): memories whose metric profile is near the
	// query's, the query evaluated as memories are. Off when nothing
	// stands out in the query or nothing is evaluated.
	var metric []pathHit
	if paths.Weights.Metric > 0 {
		mctx, mspan := trace.Start(ctx, "recall.metric")
		prof, err := s.profiles.QueryProfile(mctx, q.Text)
		if err == nil {
			sc.profile = prof
			if prof == nil {
				paths.Weights.Metric = 0
			}
			metric = s.metricCandidates(q.Sona, backbone, prof, n)
		}
		mspan.SetAttributes(attribute.Int("memoria.recall.candidates", len(metric)))
		trace.Fail(mspan, err)
		mspan.End()
		if err != nil {
			return nil, nil, err
		}
	}

	if s.plain != nil {
		sc.plainGen = s.plain.generation()
	}
	err = s.store.View(func(txn store.Reader) error {
		sc.txn = txn
		fctx, fspan := trace.Start(ctx, "recall.fusion", attribute.String("memoria.recall.fusion", paths.Fusion))
		sc.ctx = fctx
		cands, err := sc.gather(dense, bm25, metric, paths)
		sc.ctx = ctx
		fspan.SetAttributes(attribute.Int("memoria.recall.candidates", len(cands)))
		trace.Fail(fspan, err)
		fspan.End()
		if err != nil {
			return err
		}
		if err := sc.rerank(ctx, cands); err != nil {
			return err
		}
		_, sspan := trace.Start(ctx, "recall.select")
		hits, budget, err := sc.choose(cands, q.K, q.Budget)
		sspan.SetAttributes(attribute.Int("memoria.recall.hits", len(hits)))
		trace.Fail(sspan, err)
		sspan.End()
		if err != nil {
			return err
		}
		out = hits
		if expandMax > 0 && (paths.CoAccess || paths.Expand) {
			_, xspan := trace.Start(ctx, "recall.expand")
			more, err := sc.extend(hits, budget, expandMax, paths)
			xspan.SetAttributes(attribute.Int("memoria.recall.memories", len(more)))
			trace.Fail(xspan, err)
			xspan.End()
			if err != nil {
				return err
			}
			out = append(out, more...)
		}
		out, err = sc.complete(out)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	out = detach(out) // out of the scratch, which the next recall reuses
	hits := make([]cid.Cid, 0, q.K)
	for _, r := range out {
		if r.Via == ViaHit {
			hits = append(hits, r.CID)
		}
	}
	out = TopoSort(out)
	if !q.Peek {
		tr = append(tr, s.touchOp(out))
		if len(hits) > 1 && rc.CoAccessRate > 0 {
			tr = append(tr, s.links.Strengthen(q.AgentID, hits, rc.CoAccessRate, s.clock.Now().Unix()))
		}
		if rc.QueryLog {
			tr = append(tr, s.queryLogOp(q, out))
		}
	}
	return out, tr, nil
}

// bm25Candidates runs the full-text path. The index has everything the
// sona wrote (read-your-writes); dense gives the dense
// path's candidates, which it scores too.
// (A search with feedback, fb, has no dense candidates to score: dense
// is nil.)
func (s *Recaller) bm25Candidates(ctx context.Context, q Query, n int, backbone string, dense func() []pathHit, fb *text.Feedback) ([]pathHit, error) {
	opts := text.SearchOptions{K: n, Feedback: fb}
	if dense != nil {
		opts.Also = func() []string {
			hits := dense()
			ids := make([]string, 0, len(hits))
			for _, h := range hits {
				if c, err := base.CID(h.key); err == nil {
					ids = append(ids, c.String())
				}
			}
			return ids
		}
	}
	if q.Scope == ScopeSona {
		opts.Sonas = []string{q.Sona}
		if backbone != "" {
			opts.Sonas = append(opts.Sonas, backbone)
		}
	}
	hits, err := s.text.Search(ctx, q.Sona, q.Text, opts)
	if errors.Is(err, index.ErrUnavailable) {
		return nil, nil // being rebuilt: the other paths answer
	}
	if err != nil {
		return nil, err
	}
	out := make([]pathHit, 0, len(hits))
	for _, h := range hits {
		c, err := cid.Decode(h.ID)
		if err != nil {
			return nil, fmt.Errorf("%w: text index id %q", base.ErrCorrupt, h.ID)
		}
		out = append(out, pathHit{key: c.KeyString(), score: h.Score})
	}
	return out, nil
}

// extend adds to the hits at most max memories within budget: the
// strongest co-access partners of the hits, then a best-first expansion
// along edges.
func (sc *scorer) extend(hits []*Recalled, budget, max int, paths Paths) ([]*Recalled, error) {
	rc := sc.self.cfg.Recall
	chosen := map[cid.Cid]bool{}
	for c := range sc.excluded {
		chosen[c] = true
	}
	for _, r := range hits {
		chosen[r.CID] = true
	}
	var out []*Recalled
	if paths.CoAccess && rc.CoAccessPartners > 0 {
		more, left, err := sc.pullCoAccess(hits, chosen, budget, max)
		if err != nil {
			return nil, err
		}
		out, budget = more, left
	}
	if paths.Expand && rc.ExpandDepth > 0 && len(out) < max {
		more, err := sc.expand(append(slices.Clip(hits), out...), chosen, budget, max-len(out), rc)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// denseCandidates runs the dense path. In sona scope, the sona's (and
// the backbone's) nearest memories: exactly among them up to
// recall.exact_scan_max, through the graph beyond when that finds them
// (vector.Index.SearchIn). In self scope a sona of up to
// recall.exact_scan_max memories is searched exactly among its own and the
// graph adds the other sonas' nearest, the best of both kept; a larger one
// goes through the graph alone.
func (s *Recaller) denseCandidates(q Query, n int, backbone string) []vector.Hit {
	members := s.sonas.Runs(q.Sona, backbone, q.Scope == ScopeSona)
	exact := vector.RunsLen(members) <= s.cfg.Recall.ExactScanMax
	switch {
	case q.Scope == ScopeSona:
		return s.index.SearchIn(q.Vector, members, n, s.cfg.Recall.ExactScanMax)
	case !exact:
		return s.index.Search(q.Vector, n)
	}
	hits := s.index.Search(q.Vector, n)
	seen := make(map[string]bool, len(hits))
	for _, h := range hits {
		seen[h.Key] = true
	}
	for _, h := range s.index.SearchAmong(q.Vector, members, n) {
		if !seen[h.Key] {
			hits = append(hits, h)
		}
	}
	slices.SortFunc(hits, func(a, b vector.Hit) int {
		if c := cmp.Compare(b.Similarity, a.Similarity); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return hits[:min(n, len(hits))]
}

type pathHit struct {
	key   string // CID key
	score float64
}

// scorer carries one recall's state through its stages.
type scorer struct {
	self     *Recaller
	ctx      context.Context // of the stage running (its span)
	q        *Query
	txn      store.Reader
	centroid []float32
	profile  []float32         // the query's metric profile (nil: no metric path)
	qq       *vector.Quantized // the query's int8 form, for neighbourSim (once asked)
	now      int64
	sims     map[string]float64 // sona similarity by sona uuid
	activity map[string]int64   // chain length by sona uuid
	excluded map[cid.Cid]bool
	weights  config.Weights // of the score: recall.weights or Paths.Score
	collapse collapser      // what is injected so far, by its words
	cal      Calibration    // the paths' scales for this query (gather)
	n        int            // candidates a path brings at most

	// The excluded memories by vector id and, for those without one, by
	// key, and the ids given out then (excludes); nil until asked.
	excludedIDs  []uint64
	excludedKeys []string
	excludedFrom uint64

	// The context, time and speaker evidence (context.go): the
	// candidates by CID key, what was read of the memories around them,
	// the query's time spans.
	cands      map[string]*Recalled
	byID       map[uint64]*Recalled  // the candidates by vector id
	neighbours map[uint64]*neighbour // by vector id
	bodies     map[string]body       // the candidates' times and speakers, by CID key (readBodies)
	chains     map[string]chainView  // sonas' chains by uuid (viewOf)
	spans      []text.Span

	// Time travel: memories with a log seq above maxSeq, or stored after
	// maxTime, did not exist yet.
	maxSeq  uint64
	maxTime int64

	// partners are the co-access lists read so far, by memory (coAccess).
	partners map[cid.Cid][]assoc.Link

	plainGen uint64 // plainMemories' generation before the view began (visible.go)
	worker   *slot  // the recall's worker (recall.workers)
	scratch  *evidenceScratch
}

// resolveAsOf turns Query.AsOf into the limits of what existed.
func (sc *scorer) resolveAsOf() error {
	sc.maxSeq, sc.maxTime = math.MaxUint64, math.MaxInt64
	if sc.q.AsOf == nil {
		return nil
	}
	v := *sc.q.AsOf
	switch {
	case v < 0:
		return fmt.Errorf("%w: as_of must not be negative", base.ErrInvalid)
	case v >= AsOfTimeCutoff:
		sc.maxTime = v
		return nil
	}
	page, err := sc.self.sonas.Chain(sc.q.Sona, v, 1)
	if err != nil {
		return err
	}
	if len(page.Items) == 0 || page.Items[0].Seq != v {
		return fmt.Errorf("%w: as_of %d: the sona has no ACT with that seq", base.ErrInvalid, v)
	}
	sc.maxSeq = page.Items[0].LogSeq
	sc.activity[sc.q.Sona] = v + 1
	return nil
}

// candidate reads a memory's metadata and computes its parts other than
// relevance; errHidden when recall must not return it.
func (sc *scorer) candidate(c cid.Cid) (*Recalled, error) {
	if sc.excluded[c] {
		return nil, errHidden
	}
	s := sc.self
	id, hasID := s.index.ID(c.KeyString())
	c = sc.lasting(c, id, hasID)
	if hasID {
		if r, err, ok := sc.knownCandidate(c, id); ok {
			return r, err
		}
	}
	meta, err := s.memories.MetaIn(sc.txn, c)
	if errors.Is(err, base.ErrNotFound) {
		return nil, errHidden // indexed but gone
	}
	if err != nil {
		return nil, err
	}
	vid := int64(-1)
	if hasID {
		sc.remember(id, meta)
		vid = int64(id) + 1
	}
	if !sc.visible(meta) {
		return nil, errHidden
	}
	return sc.scored(c, meta, eumas.DecayMultiplier(meta.Evaluation), vid, false), nil
}

// scored is candidate c of metadata meta with its parts other than
// relevance (decay: its evaluation's multiplier of the decay rate, as
// DecayOf takes it), vid and partial as Recalled has them.
func (sc *scorer) scored(c cid.Cid, meta *messages.MemoryMeta, decay float64, vid int64, partial bool) *Recalled {
	var activity int64
	if len(meta.Sonas) > 0 {
		activity = sc.activityOf(meta.Sonas[0])
	}
	var r *Recalled
	if sc.scratch != nil {
		r = sc.scratch.recalled.next()
	} else {
		r = new(Recalled)
	}
	*r = Recalled{
		CID:  c,
		Meta: meta,
		Explain: Explain{
			KindWeight:     sc.self.cfg.KindWeight(meta.Kind),
			Recency:        Decay(sc.self.cfg.Recall.Lambda*decay, meta.Importance, meta.Backbone, activity, meta.LastAccessTick),
			Importance:     meta.Importance,
			SonaSimilarity: sc.sonaSimilarity(meta),
		},
		vid:     vid,
		partial: partial,
	}
	return r
}

// knownCandidate is candidate c, of vector id id, scored from what recall
// keeps of its metadata (scoreFact) without reading it; ok false when not
// enough is known. Its Meta holds only what the score and the evidence
// read — its kind, sona, backbone, time, importance and access tick —
// until complete reads the record of those recall returns.
func (sc *scorer) knownCandidate(c cid.Cid, id uint64) (_ *Recalled, _ error, ok bool) {
	p := sc.self.plain
	if p == nil || sc.q.AsOf != nil {
		return nil, nil, false
	}
	f, fact, kind, sonas, ok := p.known(id)
	if !ok || fact.fromRecord && !sc.self.memories.HotAbsent(sc.txn, c) {
		return nil, nil, false
	}
	if sc.q.Scope == ScopeSona && !f.backbone && (len(sonas) == 0 || sonas[0] != sc.q.Sona) {
		return nil, errHidden, true
	}
	var meta *messages.MemoryMeta
	if sc.scratch != nil {
		meta = sc.scratch.metas.next()
	} else {
		meta = new(messages.MemoryMeta)
	}
	meta.Kind, meta.Sonas, meta.Backbone, meta.CreatedAt, meta.Importance = kind, sonas, f.backbone, f.created, fact.importance
	meta.LastAccessTick = max(fact.access, sc.self.memories.TouchedTick(c))
	return sc.scored(c, meta, fact.decay, int64(id)+1, true), nil, true
}

// complete reads the metadata of those of out that knownCandidate scored
// from what it knew: what recall returns has its whole record. One hidden
// or gone since (a commit whose events recall has not taken yet) is left
// out.
func (sc *scorer) complete(out []*Recalled) ([]*Recalled, error) {
	kept := out[:0]
	for _, r := range out {
		if r.partial {
			meta, err := sc.self.memories.MetaIn(sc.txn, r.CID)
			if errors.Is(err, base.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if !sc.visible(meta) {
				continue
			}
			r.Meta, r.partial = meta, false
		}
		kept = append(kept, r)
	}
	return kept, nil
}

// visible applies scope, time travel, archive and expiry.
func (sc *scorer) visible(meta *messages.MemoryMeta) bool {
	if sc.q.Scope == ScopeSona && !meta.Backbone && !slices.Contains(meta.Sonas, sc.q.Sona) {
		return false
	}
	if meta.Seq > sc.maxSeq || meta.CreatedAt > sc.maxTime {
		return false
	}
	if sc.q.IncludeHidden {
		return true
	}
	return !meta.Archived && (meta.ExpiresAt == 0 || sc.now < meta.ExpiresAt) &&
		(meta.Insight == nil || meta.Insight.Confidence >= sc.self.cfg.Heartbeat.InsightConfidence)
}

func (sc *scorer) activityOf(sona string) int64 {
	if a, ok := sc.activity[sona]; ok {
		return a
	}
	a, _ := sc.self.sonas.Activity(sona)
	sc.activity[sona] = a
	return a
}

// errHidden marks a memory recall must not return.
var errHidden = errors.New("hidden")

// sonaSimilarity is the best cosine between the recalling sona's centroid
// and the centroids of the sonas a memory belongs to (1 for its own and
// for the backbone, which is every sona's).
func (sc *scorer) sonaSimilarity(meta *messages.MemoryMeta) float64 {
	if meta.Backbone {
		return 1
	}
	best := 0.0
	for _, id := range meta.Sonas {
		if id == sc.q.Sona {
			return 1
		}
		sim, ok := sc.sims[id]
		if !ok {
			if c, _, ok := sc.self.sonas.Snapshot(id); ok && len(c) == len(sc.centroid) {
				sim = base.Cosine(sc.centroid, c)
			}
			sc.sims[id] = sim
		}
		best = math.Max(best, sim)
	}
	return best
}

// gather builds the scored, fused candidate set of the three paths.
func (sc *scorer) gather(dense, bm25, metric []pathHit, paths Paths) ([]*Recalled, error) {
	// The maps come from the recall's scratch (evidenceScratch), grown by
	// the recalls before it: grown entry by entry they were 7% of the
	// bytes a recall allocated at 100,000 memories.
	byKey := sc.scratch.cands
	sc.cands, sc.byID, sc.neighbours, sc.chains, sc.bodies = byKey, sc.scratch.byID, sc.scratch.neighbours, sc.scratch.chains, sc.scratch.bodies
	if paths.Weights.Time > 0 {
		if sc.spans = sc.querySpans(); len(sc.spans) == 0 {
			paths.Weights.Time = 0 // the query speaks of no time
		}
	}
	var order []*Recalled
	add := func(key string) (*Recalled, error) {
		if r, ok := byKey[key]; ok {
			return r, nil
		}
		c, err := base.CID(key)
		if err != nil {
			return nil, fmt.Errorf("%w: index key: %v", base.ErrCorrupt, err)
		}
		r, err := sc.candidate(c)
		if errors.Is(err, errHidden) {
			byKey[key] = nil
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		byKey[key] = r
		if id, ok := sc.vectorID(r); ok {
			sc.byID[id] = r
		}
		order = append(order, r)
		return r, nil
	}
	rank := 0
	for _, h := range dense {
		r, err := add(h.key)
		if err != nil {
			return nil, err
		}
		if r != nil {
			rank++
			r.Explain.Evidence.Dense, r.Explain.Evidence.DenseRank = h.score, rank
		}
	}
	rank = 0
	for _, h := range bm25 {
		r, err := add(h.key)
		if err != nil {
			return nil, err
		}
		if r != nil {
			rank++
			r.Explain.Evidence.BM25, r.Explain.Evidence.BM25Rank = h.score, rank
			sc.cal.BestBM25 = math.Max(sc.cal.BestBM25, h.score)
		}
	}
	rank = 0
	for _, h := range metric {
		r, err := add(h.key)
		if err != nil {
			return nil, err
		}
		if r != nil {
			rank++
			r.Explain.Evidence.Metric, r.Explain.Evidence.MetricRank = h.score, rank
		}
	}
	// Every candidate's dense (and metric-profile) similarity, also for
	// those the path did not return: the calibrated fusion, the threshold
	// and the explanation use it.
	denseDone := 0
	fuseAll := func() {
		for _, r := range order[denseDone:] {
			if r.Explain.Evidence.DenseRank == 0 && sc.q.Vector != nil {
				r.Explain.Evidence.Dense = sc.denseSim(r.CID)
			}
			if r.Explain.Evidence.MetricRank == 0 && sc.profile != nil {
				r.Explain.Evidence.Metric = sc.metricSim(r.CID)
			}
		}
		denseDone = len(order)
		// Every candidate's cosine calibrates the dense evidence
		// (Calibration), again when the affinity path has added some.
		var cosines []float64
		if sc.q.Vector != nil {
			for _, r := range order {
				cosines = append(cosines, r.Explain.Evidence.Dense)
			}
		}
		sc.cal.DenseFloor, sc.cal.DenseBest = CalibrateDense(cosines)
		for _, r := range order {
			if paths.Fusion == "weighted" {
				r.Explain.Fused = FuseWeighted(r.Explain.Evidence, paths.Weights, sc.cal)
			} else {
				r.Explain.Fused = FuseRRF(r.Explain.Evidence, paths.Weights, sc.self.cfg.Recall.RRFK)
			}
		}
	}
	fuseAll()
	// The evidence of the memories' context, time and speaker, for the
	// candidates from enriched on; then fused again.
	enriched := 0
	enrich := func() error {
		from := order[enriched:]
		enriched = len(order)
		if w := paths.Weights; w.Time > 0 || w.Speaker > 0 || w.Session > 0 {
			named, err := sc.readBodies(from, w.Time > 0, w.Speaker > 0)
			if err != nil {
				return err
			}
			if w.Speaker > 0 && !named && len(from) == len(order) {
				paths.Weights.Speaker = 0 // the query names no candidate's speaker
			}
		}
		if paths.Weights.Context > 0 {
			if err := sc.context(from, paths.Weights); err != nil {
				return err
			}
		}
		if paths.Weights.Reply > 0 {
			if err := sc.reply(from, paths.Weights); err != nil {
				return err
			}
		}
		if paths.Weights.Session > 0 { // every candidate's: the new ones join sessions
			sc.session(order, paths.Weights)
		}
		fuseAll()
		return nil
	}
	if err := enrich(); err != nil {
		return nil, err
	}

	// Pseudo-relevance feedback: a full-text search with the words most
	// typical of the best candidates so far (RM3); what it finds joins
	// as a path.
	if paths.Weights.Feedback > 0 && paths.Weights.BM25 > 0 && len(order) > 0 {
		hits, err := sc.feedback(order)
		if err != nil {
			return nil, err
		}
		rank = 0
		for _, h := range hits {
			r, err := add(h.key)
			if err != nil {
				return nil, err
			}
			if r != nil {
				rank++
				r.Explain.Evidence.Feedback, r.Explain.Evidence.FeedbackRank = h.score, rank
				sc.cal.BestFeedback = math.Max(sc.cal.BestFeedback, h.score)
			}
		}
		fuseAll()
		if err := enrich(); err != nil {
			return nil, err
		}
	}

	// Affinity: what the best candidates so far are associated with, up
	// to recall.affinity_depth hops, and their co-access partners, scored
	// by the seed's relevance (relative to the best) × the strengths along
	// the path × recall.expand_decay per hop after the first.
	if paths.Weights.Affinity > 0 && sc.self.cfg.Recall.AffinitySeeds > 0 && len(order) > 0 {
		seeds := slices.Clone(order)
		slices.SortFunc(seeds, func(a, b *Recalled) int { return byRelevance(a, b) })
		seeds = seeds[:min(len(seeds), sc.self.cfg.Recall.AffinitySeeds)]
		_, span := trace.Start(sc.ctx, "recall.affinity", attribute.Int("memoria.recall.seeds", len(seeds)))
		affinity, err := sc.affinity(seeds)
		span.SetAttributes(attribute.Int("memoria.recall.candidates", len(affinity.hits)))
		trace.Fail(span, err)
		span.End()
		if err != nil {
			return nil, err
		}
		// The best n join, as the other paths' do: a memory many
		// responses drew on links to each of them, and all it reached
		// joining made a long-lived sona's recall enrich a thousand
		// candidates (issue 15).
		ranked := bestFirst(affinity.hits)
		rank = 0
		for rank < sc.n && len(*ranked) > 0 {
			h := ranked.pop()
			r, err := add(h.key)
			if err != nil {
				return nil, err
			}
			if r != nil {
				rank++
				r.Explain.Evidence.Affinity, r.Explain.Evidence.AffinityRank = h.score, rank
			}
		}
		sc.scratch.keepHits(affinity.hits)
		fuseAll()
		if err := enrich(); err != nil {
			return nil, err
		}
	}
	return sc.admit(order), nil
}

// feedbackDocs and feedbackTerms: pseudo-relevance feedback takes this
// many of the best candidates and this many of their words.
const (
	feedbackDocs  = 3
	feedbackTerms = 10
)

// feedback is the pseudo-relevance feedback search (text.Feedback) over
// the best feedbackDocs of cands by relevance, each weighted by it.
func (sc *scorer) feedback(cands []*Recalled) ([]pathHit, error) {
	best := slices.Clone(cands)
	slices.SortFunc(best, byRelevance)
	fb := &text.Feedback{Terms: feedbackTerms}
	for _, r := range best[:min(feedbackDocs, len(best))] {
		fb.Docs = append(fb.Docs, r.CID.String())
		fb.Weights = append(fb.Weights, r.Explain.Fused.Relevance)
	}
	return sc.self.bm25Candidates(sc.ctx, *sc.q, sc.n, sc.self.backbone(), nil, fb)
}

// admit applies the emergent retrieval threshold: a candidate stays if
// its dense similarity reaches mean + log(β)·std of the candidates'
// similarities, or the full-text or affinity path vouches for it.
func (sc *scorer) admit(cands []*Recalled) []*Recalled {
	s := sc.self
	th := math.Inf(-1) // without a query vector, every candidate came from a path that vouches for it
	if sc.q.Vector != nil {
		sims := make([]float64, len(cands))
		for i, r := range cands {
			sims[i] = r.Explain.Evidence.Dense
		}
		nodes := s.count()
		th = assoc.EmergentThreshold(s.cfg.Threshold, s.cfg.Threshold.RetrievalBeta, assoc.StatsOf(sims), nodes).Value
	}
	kept := cands[:0]
	for _, r := range cands {
		if r.Explain.Evidence.Dense >= th || r.Explain.Evidence.BM25Rank > 0 || r.Explain.Evidence.AffinityRank > 0 ||
			r.Explain.Evidence.FeedbackRank > 0 {
			kept = append(kept, r)
		}
	}
	rel := make([]float64, len(kept))
	for i, r := range kept {
		rel[i] = r.Explain.Fused.Relevance
	}
	unit := PriorUnit(rel)
	for _, r := range kept {
		r.Explain.PriorUnit = unit
		ScoreHit(&r.Explain, sc.weights)
		r.Score = r.Explain.Contrib.Sum()
		r.Via = ViaHit
	}
	return kept
}

// coAccess returns c's co-access partners for the recalling agent, read
// once a recall: the affinity path's seeds are mostly hits, whose partners
// the co-access path pulls in after. The list is shared: do not modify it.
func (sc *scorer) coAccess(c cid.Cid) ([]assoc.Link, error) {
	if l, ok := sc.partners[c]; ok {
		return l, nil
	}
	l, err := sc.self.links.In(sc.txn, assoc.CoAccessKey(sc.q.AgentID, c))
	if err != nil {
		return nil, err
	}
	if sc.partners == nil {
		sc.partners = map[cid.Cid][]assoc.Link{}
	}
	sc.partners[c] = l
	return l, nil
}

// linkWeight is an association type's weight on the affinity path.
func linkWeight(w config.LinkWeights, typ string) float64 {
	switch typ {
	case assoc.Causal:
		return w.Causal
	case assoc.Similar:
		return w.Similar
	case assoc.Sequential:
		return w.Sequential
	case assoc.Related:
		return w.Related
	case assoc.CoAccess:
		return w.CoAccess
	}
	return 0
}

func byRelevance(a, b *Recalled) int {
	if c := cmp.Compare(b.Explain.Fused.Relevance, a.Explain.Fused.Relevance); c != 0 {
		return c
	}
	return strings.Compare(a.CID.KeyString(), b.CID.KeyString())
}

func byScore(a, b *Recalled) int {
	if c := cmp.Compare(b.Score, a.Score); c != 0 {
		return c
	}
	return strings.Compare(a.CID.KeyString(), b.CID.KeyString())
}

// choose takes the k hits: the best candidates that fit the budget, by
// score or, when recall.mmr_lambda < 1, by maximal marginal relevance; a
// candidate near-identical to a hit taken is folded into it. It reads the
// hits' bodies and returns them ranked, with the budget left.
func (sc *scorer) choose(cands []*Recalled, k, budget int) ([]*Recalled, int, error) {
	slices.SortFunc(cands, byScore)
	lambda := sc.self.cfg.Recall.MMRLambda
	var mmr *diversity
	if lambda < 1 && sc.q.Vector != nil {
		mmr = sc.newDiversity(cands, lambda)
		defer mmr.release() // its records go no further than this choice
	}
	var out []*Recalled
	for len(out) < k && len(cands) > 0 {
		i := 0
		if mmr != nil {
			i = mmr.next()
		}
		r := cands[i]
		cands = slices.Delete(cands, i, i+1)
		var vec vector.Quantized
		if mmr != nil {
			vec = mmr.take(i)
		}
		m, err := sc.self.memories.MemoryIn(sc.txn, r.CID)
		if err != nil {
			return nil, 0, err
		}
		r.Memory = m
		key, folded := sc.collapse.fold(r)
		if folded {
			continue
		}
		if n := r.Chars(); n <= budget {
			budget -= n
			r.Rank = len(out) + 1
			out = append(out, r)
			sc.collapse.add(key)
			if mmr != nil {
				mmr.chose(vec)
			}
		}
	}
	return out, budget, nil
}

// lasting is c, the memory of vector id id when hasID, with bytes that
// may outlive the recall: the index's own key (as the dense path's keys
// are), or a copy where the index has none. A candidate's CID may share
// its bytes with what it was read from — a block the affinity walk cut
// its keys from (reached.set), the block of the memory whose edge it is —
// and it is kept past the recall (in an edge of the response that drew on
// it, cached with that memory), which kept all of it: 76 MB of the walk's
// blocks after three minutes of advances at 1,000 sonas (issue 15, stop
// 97).
func (sc *scorer) lasting(c cid.Cid, id uint64, hasID bool) cid.Cid {
	key, ok := "", false
	if hasID {
		key, ok = sc.self.index.Key(id)
	}
	if !ok {
		key = strings.Clone(c.KeyString())
	}
	if own, err := base.CID(key); err == nil {
		return own
	}
	return c
}

// reach loads a memory reached from a hit along a link, if visible and not
// yet chosen, scoring it by the path: parent score × strength.
func (sc *scorer) reach(c cid.Cid, score float64, via string, depth int, chosen map[cid.Cid]bool) (*Recalled, error) {
	if chosen[c] {
		return nil, nil
	}
	chosen[c] = true
	r, err := sc.candidate(c)
	if errors.Is(err, errHidden) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if r.Memory, err = sc.self.memories.MemoryIn(sc.txn, c); err != nil {
		return nil, err
	}
	r.Score, r.Via, r.Depth = score, via, depth
	r.Explain.Contrib = Contributions{Path: score}
	return r, nil
}

// take adds r, reached and within budget, to out: its dense evidence is
// read now, not for the many reached that do not fit (once the budget is
// nearly spent, every partner and edge is reached and let go).
func (sc *scorer) take(out []*Recalled, r *Recalled, key collapseKey) []*Recalled {
	if sc.q.Vector != nil {
		r.Explain.Evidence.Dense = sc.denseSim(r.CID)
	}
	sc.collapse.add(key)
	return append(out, r)
}

// visitsPerTake bounds what expansion reads: at most this many memories
// visited for each it may take. Once the hits have spent most of the
// budget, few visited memories fit what is left, and a long-lived sona's
// recall read and folded ~260 memories to take a handful (issue 15).
const visitsPerTake = 4

// pullCoAccess adds, for each hit best first, its strongest co-access
// partners (of this agent) that fit the remaining budget, at most max:
// recall.coaccess_partners of each, from its visitsPerTake times as many
// strongest.
func (sc *scorer) pullCoAccess(hits []*Recalled, chosen map[cid.Cid]bool, budget, max int) ([]*Recalled, int, error) {
	var out []*Recalled
	per := sc.self.cfg.Recall.CoAccessPartners
	for _, h := range hits {
		if len(out) == max {
			break
		}
		partners, err := sc.coAccess(h.CID)
		if err != nil {
			return nil, 0, err
		}
		taken, visited := 0, 0
		for _, p := range partners {
			if taken == per || visited == visitsPerTake*per || budget <= 0 || len(out) == max {
				break
			}
			if chosen[p.Target] {
				continue
			}
			visited++
			r, err := sc.reach(p.Target, h.Score*p.Strength, ViaCoAccess, 1, chosen)
			if err != nil {
				return nil, 0, err
			}
			if r == nil {
				continue
			}
			key, folded := sc.collapse.fold(r)
			if folded {
				continue
			}
			if n := r.Chars(); n <= budget {
				r.Explain.CoAccess = p.Strength
				budget -= n
				out = sc.take(out, r, key)
				taken++
			}
		}
	}
	return out, budget, nil
}

// expand follows edges from the chosen memories, best first, adding each
// reachable memory that fits the remaining budget with the score of the
// path that reached it: parent score × edge weight (capped at 1) × decay
// per hop, up to the configured depth, at most max of them, from at most
// visitsPerTake × max visited.
func (sc *scorer) expand(from []*Recalled, chosen map[cid.Cid]bool, budget, max int, rc config.Recall) ([]*Recalled, error) {
	frontier := &edgeHeap{}
	push := func(r *Recalled) {
		for _, e := range r.Memory.Edges {
			if chosen[e.Target] {
				continue
			}
			w := math.Max(0, math.Min(1, e.Weight))
			heap.Push(frontier, edgeCand{target: e.Target, score: r.Score * w * rc.ExpandDecay, depth: r.Depth + 1})
		}
	}
	for _, r := range from {
		push(r)
	}
	var out []*Recalled
	for visits := 0; frontier.Len() > 0 && budget > 0 && len(out) < max && visits < visitsPerTake*max; {
		e := heap.Pop(frontier).(edgeCand)
		if !chosen[e.target] {
			visits++
		}
		r, err := sc.reach(e.target, e.score, ViaExpansion, e.depth, chosen)
		if err != nil {
			return nil, err
		}
		if r == nil {
			continue
		}
		key, folded := sc.collapse.fold(r)
		if folded {
			continue
		}
		n := r.Chars()
		if n > budget {
			continue
		}
		budget -= n
		out = sc.take(out, r, key)
		if e.depth < rc.ExpandDepth {
			push(r)
		}
	}
	return out, nil
}

// denseSim is the query's cosine similarity with a memory's embedding.
func (sc *scorer) denseSim(c cid.Cid) float64 { return sc.denseSimKey(c.KeyString()) }

// neighbourSim is denseSimKey of a chain neighbour that is no candidate,
// from the int8 records the graph searches: its cosine only weighs the
// context evidence of the candidates beside it (baseRelevance), and a
// large store's float32 vectors are read from the snapshot's file one
// system call each — a recall reads a hundred neighbours, 8% of its CPU on
// a restored store of 100,000 memories (issue 15). Its error is the
// quantisation's, a few thousandths.
func (sc *scorer) neighbourSim(key string, id uint64) float64 {
	if sc.qq == nil {
		qq := sc.self.index.Quantize(sc.q.Vector)
		sc.qq = &qq
	}
	if sim, ok := sc.self.index.ApproxDotID(id, *sc.qq); ok {
		return float64(sim)
	}
	return sc.storedSim(key)
}

// denseSimKey is denseSim of the memory of CID key.
func (sc *scorer) denseSimKey(key string) float64 {
	if sim, ok := sc.self.index.Dot(key, sc.q.Vector); ok {
		return float64(sim)
	}
	return sc.storedSim(key)
}

// storedSim is the query's cosine similarity with the stored embedding of
// the memory of CID key, one the index does not hold (0 without one).
func (sc *scorer) storedSim(key string) float64 {
	c, err := base.CID(key)
	if err != nil {
		return 0
	}
	vec, err := readVector(sc.txn, c)
	if err != nil {
		return 0
	}
	return base.Dot(sc.q.Vector, vec)
}

func readVector(txn store.Reader, c cid.Cid) ([]float32, error) {
	item, err := txn.Item(meta.VectorKey(c))
	if err != nil {
		return nil, err
	}
	var vec []float32
	err = item.Value(func(v []byte) error {
		vec, err = meta.DecodeVector(v)
		return err
	})
	return vec, err
}

type edgeCand struct {
	target cid.Cid
	score  float64
	depth  int
}

// edgeHeap pops the best-scored edge first; ties by target bytes.
type edgeHeap []edgeCand

func (h edgeHeap) Len() int { return len(h) }
func (h edgeHeap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score > h[j].score
	}
	return strings.Compare(h[i].target.KeyString(), h[j].target.KeyString()) < 0
}
func (h edgeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *edgeHeap) Push(v any)   { *h = append(*h, v.(edgeCand)) }
func (h *edgeHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// Support is what meta.Store.Reinforce takes of the memories a response
// used: their CIDs and recall scores.
func Support(used []*Recalled) []meta.Used {
	out := make([]meta.Used, len(used))
	for i, r := range used {
		out[i] = meta.Used{CID: r.CID, Score: r.Score}
	}
	return out
}
