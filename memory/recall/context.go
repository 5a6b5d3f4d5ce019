package recall

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/text"
	"github.com/memoria-ai/memoria/messages"
)

// neighbour is what the context evidence reads of a memory around a
// candidate: its relevance of its own (from the paths' evidence, no read),
// and once read (placed), whether recall may see it and its time.
type neighbour struct {
	dense, bm25 float64 // its dense and BM25 evidence (match)
	key         string  // its CID key
	id          uint64  // its vector id, as the chain holds it (bodyFacts keeps its time by it)
	placed      bool    // visible and time were read
	visible     bool
	time        int64
}

// match is n's own evidence: its dense and BM25 parts alone (a
// neighbour is made for each memory around every candidate: a whole
// Evidence each was a twentieth of the bytes a recall allocated).
func (n *neighbour) match() Evidence { return Evidence{Dense: n.dense, BM25: n.bm25} }

// chainView is one recall's view of a sona's chain: its members (vector
// ids in chain order) as the registry held them when the recall first
// asked, and what chainPositions keeps of them.
type chainView struct {
	members []uint64
	chain   *sonaChain
}

// chainOf is the sona whose chain holds a memory's context: the
// recalling sona's in sona scope when the memory is one of its own, else
// the first sona it joined ("" for none).
func (sc *scorer) chainOf(meta *messages.MemoryMeta) string {
	if sc.q.Scope == ScopeSona && slices.Contains(meta.Sonas, sc.q.Sona) {
		return sc.q.Sona
	}
	if len(meta.Sonas) > 0 {
		return meta.Sonas[0]
	}
	return ""
}

// viewOf is the recall's view of sona's chain (one for the whole recall).
func (sc *scorer) viewOf(sona string) chainView {
	v, ok := sc.chains[sona]
	if !ok {
		v.members = sc.self.sonas.Members(sona, "", false)
		v.chain = sc.self.chains.chain(sona, v.members)
		sc.chains[sona] = v
	}
	return v
}

// placeOf is r's sona chain and its position there (ok false when it has
// none: no sona, no embedding), found once per recall.
func (sc *scorer) placeOf(r *Recalled) (v chainView, pos int, ok bool) {
	switch {
	case r.place < 0:
		return v, 0, false
	case r.place > 0:
		return sc.chains[sc.chainOf(r.Meta)], int(r.place - 1), true
	}
	r.place = -1
	sona := sc.chainOf(r.Meta)
	vid, ok := sc.vectorID(r)
	if sona == "" || !ok {
		return v, 0, false
	}
	if v = sc.viewOf(sona); v.chain == nil {
		return v, 0, false
	}
	if pos, ok = v.chain.position(vid); !ok || pos >= len(v.members) || pos >= math.MaxInt32 {
		return v, 0, false
	}
	r.place = int32(pos + 1)
	return v, pos, true
}

// vectorID is r's vector id, looked up once.
func (sc *scorer) vectorID(r *Recalled) (uint64, bool) {
	if r.vid == 0 {
		r.vid = -1
		if id, ok := sc.self.index.ID(r.CID.KeyString()); ok {
			r.vid = int64(id) + 1
		}
	}
	return uint64(r.vid - 1), r.vid > 0
}

// baseRelevance is a memory's own dense and full-text relevance, 0..1: the
// calibrated cosine and BM25 over the query's best, weighted as in the
// fusion.
func (sc *scorer) baseRelevance(e Evidence, w config.PathWeights) float64 {
	total := w.Dense + w.BM25
	if total == 0 {
		return 0
	}
	v := 0.0
	if w.Dense > 0 && sc.q.Vector != nil {
		v += w.Dense * sc.cal.Dense(e.Dense)
	}
	if w.BM25 > 0 && sc.cal.BestBM25 > 0 {
		v += w.BM25 * e.BM25 / sc.cal.BestBM25
	}
	return v / total
}

// neighbourAt is (once per recall) the evidence for the context of the
// memory at position i of v's chain, nil past its ends: a candidate's
// own, another's cosine alone. (The full-text path used to score four
// times the candidates, so that their neighbours had their BM25: that
// changed nothing on LoCoMo, and it was the larger part of the context
// evidence's cost in `self` scope; README, "LoCoMo evaluation".)
func (sc *scorer) neighbourAt(v chainView, i int) *neighbour {
	if i < 0 || i >= len(v.members) {
		return nil
	}
	id := v.members[i]
	if n, ok := sc.neighbours[id]; ok {
		return n
	}
	key, ok := sc.self.index.Key(id)
	if !ok {
		return nil
	}
	n := sc.scratch.places.next()
	*n = neighbour{key: key, id: id}
	if r := sc.byID[id]; r != nil { // a candidate (ids are never reused)
		n.dense, n.bm25 = r.Explain.Evidence.Dense, r.Explain.Evidence.BM25
	} else if sc.q.Vector != nil {
		n.dense = sc.neighbourSim(key, id)
	}
	sc.neighbours[id] = n
	return n
}

// place reads (once per recall) whether recall may see n and its time
// (the memory's body only when bodyFacts does not know it). Its metadata
// is not read when it is known plain (visible.go).
func (sc *scorer) place(n *neighbour) error {
	if n.placed {
		return nil
	}
	n.placed = true
	created, known := sc.knownVisible(n.id, n.key)
	t, timed := sc.self.bodies.time(n.id)
	if known && timed {
		n.visible, n.time = true, t
		return nil
	}
	c, err := base.CID(n.key)
	if err != nil {
		return fmt.Errorf("%w: index key: %v", base.ErrCorrupt, err)
	}
	if !known {
		meta, err := sc.self.memories.MetaIn(sc.txn, c)
		if errors.Is(err, base.ErrNotFound) {
			return nil // gone: no context
		}
		if err != nil {
			return err
		}
		sc.remember(n.id, meta)
		if sc.excluded[c] || !sc.visible(meta) {
			return nil // hidden (another sona's, archived…): its text lends nothing
		}
		created = meta.CreatedAt
	}
	if !timed {
		m, err := sc.self.memories.MemoryIn(sc.txn, c)
		if err != nil {
			return err
		}
		b := bodyOf(m, &messages.MemoryMeta{CreatedAt: created})
		sc.self.bodies.set(n.id, b)
		t = b.time
	}
	n.visible, n.time = true, t
	return nil
}

// context sets each candidate's context evidence: the mean relevance of
// their own (baseRelevance) of the memories around it in its sona's chain
// (the memories appended to the sona before and after it, placeOf) —
// up to w = recall.context_window on each side, not past a gap in time
// of more than recall.context_gap (the session's end), each hop beyond the first halving a neighbour's
// part — over the 2w places of the window (a place past the session's
// end counts 0). A memory's words often answer a question only with the
// turns around it ("What did you think of it?" — "It was the best concert
// of my life"), and a turn amid a passage about the question's subject is
// more likely about it than one that matches it alone. (The best
// neighbour's relevance instead of the mean lost on LoCoMo: it lifts the
// neighbours of a strong hit over other evidence.)
func (sc *scorer) context(cands []*Recalled, w config.PathWeights) error {
	rc := sc.self.cfg.Recall
	gap := int64(time.Duration(rc.ContextGap) / time.Second)
	if rc.ContextWindow == 0 {
		return nil
	}
	var around []*neighbour
	var rel []float64
	for _, r := range cands {
		v, pos, ok := sc.placeOf(r)
		if !ok {
			continue
		}
		self := sc.neighbourAt(v, pos)
		sum := 0.0
		for _, dir := range []int{-1, 1} {
			// The window's memories and their relevance first: only those
			// up to the last relevant one need reading (whether they are
			// visible, where the session ends).
			around, rel = around[:0], rel[:0]
			last := 0
			for d := 1; d <= rc.ContextWindow; d++ {
				n := sc.neighbourAt(v, pos+dir*d)
				if n == nil {
					break
				}
				around = append(around, n)
				rel = append(rel, sc.baseRelevance(n.match(), w)*math.Pow(contextDecay, float64(d-1)))
				if rel[d-1] > 0 {
					last = d
				}
			}
			if last == 0 {
				continue
			}
			if err := sc.place(self); err != nil {
				return err
			}
			at := self
			for d := 1; d <= last; d++ {
				n := around[d-1]
				if err := sc.place(n); err != nil {
					return err
				}
				if !n.visible || absDiff(n.time, at.time) > gap {
					break
				}
				sum += rel[d-1]
				at = n
			}
		}
		r.Explain.Evidence.Context = sum / float64(2*rc.ContextWindow)
	}
	return nil
}

// session sets every candidate's session evidence: the relevance of
// their own (baseRelevance) of the other candidates of its sona's chain
// within recall.context_gap of it in time (its session, as far as the
// candidates tell), summed, divided by the best candidate's sum — a
// first pass over sessions, then turns within the best of them: evidence
// for a question often lies in several turns of one session, some of
// them sharing none of its words. The candidates' times are those
// readBodies kept.
func (sc *scorer) session(cands []*Recalled, w config.PathWeights) {
	gap := int64(time.Duration(sc.self.cfg.Recall.ContextGap) / time.Second)
	type item struct {
		r   *Recalled
		t   int64
		rel float64
	}
	bySona := map[string][]item{}
	for _, r := range cands {
		s := sc.chainOf(r.Meta)
		bySona[s] = append(bySona[s], item{r, sc.bodies[r.CID.KeyString()].time, sc.baseRelevance(r.Explain.Evidence, w)})
	}
	sums := make([]float64, 0, len(cands))
	var of []*Recalled
	best := 0.0
	for _, items := range bySona {
		slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.t, b.t) })
		ts, rel := make([]int64, len(items)), make([]float64, len(items))
		for i, it := range items {
			ts[i], rel[i] = it.t, it.rel
			of = append(of, it.r)
		}
		for _, v := range sessionSums(ts, rel, gap) {
			sums = append(sums, v)
			best = math.Max(best, v)
		}
	}
	for i, r := range of {
		r.Explain.Evidence.Session = 0
		if best > 0 {
			r.Explain.Evidence.Session = sums[i] / best
		}
	}
}

// sessionSums is, for each of memories at times ts (ascending) with
// relevance rel, the relevance of the others within gap of it in time.
func sessionSums(ts []int64, rel []float64, gap int64) []float64 {
	out := make([]float64, len(ts))
	lo, hi, sum := 0, 0, 0.0 // the window [lo, hi) within gap of ts[i]; sum its relevance
	for i, t := range ts {
		for hi < len(ts) && ts[hi]-t <= gap {
			sum += rel[hi]
			hi++
		}
		for t-ts[lo] > gap {
			sum -= rel[lo]
			lo++
		}
		out[i] = math.Max(0, sum-rel[i])
	}
	return out
}

// contextDecay weighs a neighbour's relevance per hop beyond the first.
const contextDecay = 0.5

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}

// body is what the time, speaker and session evidence read of a
// candidate's body: its time and its speaker's name (the words of an
// `other` memory's name, lower-cased; nil for none).
type body struct {
	time     int64
	speaker  []string
	question bool // it asks a question (asksQuestion)
}

// readBodies reads the body of each of cands once (readBodies keeps what
// it read in sc.bodies, for the session evidence over all the candidates
// at each enrichment) and sets the time evidence — how near its time is
// to the nearest span the query speaks of (text.Span.Near) — when time,
// and the speaker evidence — 1 when every word of its speaker's name is
// a word of the query — when speaker. It reports whether it named any
// speaker.
func (sc *scorer) readBodies(cands []*Recalled, time, speaker bool) (bool, error) {
	var words map[string]bool
	if speaker {
		words = map[string]bool{}
		for _, w := range strings.FieldsFunc(strings.ToLower(sc.q.Text), notWordRune) {
			words[w] = true
		}
	}
	named := false
	for _, r := range cands {
		b, err := sc.candidateBody(r)
		if err != nil {
			return false, err
		}
		if time {
			best := 0.0
			for _, s := range sc.spans {
				best = math.Max(best, s.Near(b.time))
			}
			r.Explain.Evidence.Time = best
		}
		if speaker && len(b.speaker) > 0 && allIn(b.speaker, words) {
			r.Explain.Evidence.Speaker, named = 1, true
		}
	}
	return named, nil
}

// candidateBody is bodyNear of candidate r, from its place in its chain
// (placeOf); read as bodyWith when it has none.
func (sc *scorer) candidateBody(r *Recalled) (body, error) {
	key := r.CID.KeyString()
	if v, pos, ok := sc.placeOf(r); ok {
		if n := sc.neighbourAt(v, pos); n != nil && n.key == key { // (not forgotten meanwhile)
			return sc.bodyNear(n, r.CID, r.Meta)
		}
	}
	return sc.bodyWith(key, r.CID, r.Meta)
}

// bodyOf is what the evidence keeps of memory m (of metadata meta).
func bodyOf(m *model.Memory, meta *messages.MemoryMeta) body {
	b := body{time: memoryTime(m, meta), question: asksQuestion(m)}
	if m.Data.Other != nil && m.Data.Other.Name != nil {
		b.speaker = strings.FieldsFunc(strings.ToLower(*m.Data.Other.Name), notWordRune)
	}
	return b
}

// asksQuestion reports whether what m says asks a question: it holds a
// question mark (ASCII or full-width). (A byte search, part by part: a
// rune-by-rune strings.ContainsAny of each neighbour's whole text was a
// twentieth of a long sona's advance.)
func asksQuestion(m *model.Memory) bool {
	has := func(s string) bool { return strings.IndexByte(s, '?') >= 0 || strings.Contains(s, "？") }
	if self := m.Data.Self; self != nil {
		return slices.ContainsFunc(self.Parts, func(p model.Part) bool { return has(p.Content) })
	}
	return has(model.Said(m))
}

// allIn reports whether every one of words is in set.
func allIn(words []string, set map[string]bool) bool {
	for _, w := range words {
		if !set[w] {
			return false
		}
	}
	return true
}

func notWordRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// querySpans resolves the time expressions of the query against when it is
// asked: Query.Now, else AsOf when that is a time, else the clock.
func (sc *scorer) querySpans() []text.Span {
	now := sc.now
	if sc.q.AsOf != nil && *sc.q.AsOf >= AsOfTimeCutoff {
		now = *sc.q.AsOf
	}
	if sc.q.Now != 0 {
		now = sc.q.Now
	}
	return text.TimeSpans(sc.q.Text, time.Unix(now, 0))
}
