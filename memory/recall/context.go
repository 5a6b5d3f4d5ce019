package recall

import (
	"errors"
	"math"
	"strings"
	"time"
	"unicode"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/text"
)

// neighbour is what the context evidence reads of a memory around a
// candidate: whether recall may see it, its time, its relevance of its own
// and its neighbours in the sona's chain (its sequential associations).
type neighbour struct {
	visible bool
	time    int64
	e       Evidence  // its dense and BM25 evidence
	next    []cid.Cid // read when the walk goes past it (nextOf)
	read    bool      // next was read
}

// nextOf is the memories next to n (c) in its sona's chain: its
// sequential associations.
func (sc *scorer) nextOf(c cid.Cid, n *neighbour) ([]cid.Cid, error) {
	if n.read {
		return n.next, nil
	}
	links, err := assoc.Read(sc.txn, assoc.Key(c))
	if err != nil {
		return nil, err
	}
	n.read = true
	for _, l := range links {
		if l.Type == assoc.Sequential {
			n.next = append(n.next, l.Target)
		}
	}
	return n.next, nil
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

// neighbourOf reads (once per recall) what the context evidence needs of c.
func (sc *scorer) neighbourOf(c cid.Cid) (*neighbour, error) {
	if n, ok := sc.neighbours[c]; ok {
		return n, nil
	}
	n := &neighbour{}
	sc.neighbours[c] = n
	meta, err := sc.self.memories.MetaIn(sc.txn, c)
	if errors.Is(err, base.ErrNotFound) {
		return n, nil // gone: no context
	}
	if err != nil {
		return nil, err
	}
	if sc.excluded[c] || !sc.visible(meta) {
		return n, nil // hidden (another sona's, archived…): its text lends nothing
	}
	m, err := sc.self.memories.MemoryIn(sc.txn, c)
	if err != nil {
		return nil, err
	}
	n.visible, n.time = true, memoryTime(m, meta)
	n.e = Evidence{BM25: sc.bm25All[c.KeyString()]}
	if r := sc.cands[c.KeyString()]; r != nil {
		n.e = r.Explain.Evidence
	} else if sc.q.Vector != nil {
		n.e.Dense = sc.denseSim(c)
	}
	return n, nil
}

// context sets each candidate's context evidence: the mean relevance of
// their own (baseRelevance) of the memories around it in its sona's chain
// — up to w = recall.context_window on each side, along the sequential
// associations, not past a gap in time of more than recall.context_gap
// (the session's end), each hop beyond the first halving a neighbour's
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
	for _, r := range cands {
		self, err := sc.neighbourOf(r.CID)
		if err != nil {
			return err
		}
		firsts, err := sc.nextOf(r.CID, self)
		if err != nil {
			return err
		}
		sum := 0.0
		for _, first := range firsts {
			prev, cur, at := r.CID, first, self
			for d := 1; d <= rc.ContextWindow; d++ {
				n, err := sc.neighbourOf(cur)
				if err != nil {
					return err
				}
				if !n.visible || absDiff(n.time, at.time) > gap {
					break
				}
				sum += sc.baseRelevance(n.e, w) * math.Pow(contextDecay, float64(d-1))
				if d == rc.ContextWindow {
					break
				}
				nexts, err := sc.nextOf(cur, n)
				if err != nil {
					return err
				}
				next := cid.Undef
				for _, c := range nexts {
					if c != prev {
						next = c
						break
					}
				}
				if !next.Defined() {
					break
				}
				prev, cur, at = cur, next, n
			}
		}
		r.Explain.Evidence.Context = sum / float64(2*rc.ContextWindow)
	}
	return nil
}

// contextFactor: with the context evidence on, the full-text path scores
// this many times the candidates, so that the candidates' neighbours have
// their BM25 (only the first recall.candidates are candidates).
const contextFactor = 4

// contextDecay weighs a neighbour's relevance per hop beyond the first.
const contextDecay = 0.5

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}

// timeEvidence sets each candidate's time evidence: how near its time is
// to the nearest span the query speaks of (text.Span.Near).
func (sc *scorer) timeEvidence(cands []*Recalled) error {
	for _, r := range cands {
		m, err := sc.self.memories.MemoryIn(sc.txn, r.CID)
		if err != nil {
			return err
		}
		t, best := memoryTime(m, r.Meta), 0.0
		for _, s := range sc.spans {
			best = math.Max(best, s.Near(t))
		}
		r.Explain.Evidence.Time = best
	}
	return nil
}

// speakerEvidence sets each candidate's speaker evidence: 1 when every
// word of its speaker's name (an `other` memory's name) is a word of the
// query. It reports whether it named any.
func (sc *scorer) speakerEvidence(cands []*Recalled) (bool, error) {
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(sc.q.Text), notWordRune) {
		words[w] = true
	}
	named := false
	for _, r := range cands {
		m, err := sc.self.memories.MemoryIn(sc.txn, r.CID)
		if err != nil {
			return false, err
		}
		if m.Data.Other == nil || m.Data.Other.Name == nil {
			continue
		}
		name := strings.FieldsFunc(strings.ToLower(*m.Data.Other.Name), notWordRune)
		all := len(name) > 0
		for _, w := range name {
			all = all && words[w]
		}
		if all {
			r.Explain.Evidence.Speaker, named = 1, true
		}
	}
	return named, nil
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
