package recall

import (
	"fmt"
	"slices"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/messages"
)

// reply sets each of cands' reply evidence: the relevance of its own
// (baseRelevance: its calibrated cosine and BM25) of the question the
// candidate answers (questionBefore), 0 when it answers none. In a
// conversation the answer often shares no word with a later question
// about it while the question it answered does: "What is Nate's favorite
// video game?" — Joanna: "So what's your favorite game?" — Nate: "I'm
// currently playing this awesome fantasy RPG called Xenoblade
// Chronicles…"; likewise a model's response to a user's question. (The
// answers to the best candidates that ask a question, brought in as a
// path of their own, added nothing on LoCoMo over the evidence: README,
// "LoCoMo evaluation".)
func (sc *scorer) reply(cands []*Recalled, w config.PathWeights) error {
	for _, r := range cands {
		q, err := sc.questionBefore(r, w)
		if err != nil {
			return err
		}
		if q != nil {
			r.Explain.Evidence.Reply = sc.baseRelevance(q.match(), w)
		}
	}
	return nil
}

// questionBefore is the memory r answers, if any: the memory before it in
// its sona's chain (placeOf) when that one asks a question (its text
// holds a question mark), is visible, lies within recall.context_gap of r
// in time and was said by another speaker than r (when both have one: a
// speaker who asks and goes on is not answered). Its relevance is not
// read when it has none.
func (sc *scorer) questionBefore(r *Recalled, w config.PathWeights) (*neighbour, error) {
	v, pos, ok := sc.placeOf(r)
	if !ok || pos == 0 {
		return nil, nil
	}
	prev := sc.neighbourAt(v, pos-1)
	if prev == nil || sc.baseRelevance(prev.match(), w) == 0 {
		return nil, nil // it would lend nothing: no read
	}
	self := sc.neighbourAt(v, pos)
	if err := sc.place(self); err != nil {
		return nil, err
	}
	if err := sc.place(prev); err != nil {
		return nil, err
	}
	gap := int64(time.Duration(sc.self.cfg.Recall.ContextGap) / time.Second)
	if !prev.visible || absDiff(prev.time, self.time) > gap {
		return nil, nil
	}
	asked, err := sc.bodyNear(prev, cid.Undef, nil)
	if err != nil || !asked.question {
		return nil, err
	}
	answer, err := sc.bodyNear(self, cid.Undef, nil)
	if err != nil {
		return nil, err
	}
	if len(answer.speaker) > 0 && slices.Equal(answer.speaker, asked.speaker) {
		return nil, nil
	}
	return prev, nil
}

// bodyNear is what the evidence keeps of the body of n's memory (bodyOf):
// a candidate's or a neighbour's that place found visible. It is read
// once per recall, and only when bodyFacts does not know it. c and meta
// are its CID and metadata when the caller has them (meta nil: read).
func (sc *scorer) bodyNear(n *neighbour, c cid.Cid, meta *messages.MemoryMeta) (body, error) {
	if b, ok := sc.bodies[n.key]; ok {
		return b, nil
	}
	if b, ok := sc.self.bodies.body(n.id); ok {
		sc.bodies[n.key] = b
		return b, nil
	}
	if meta == nil {
		var err error
		if c, err = base.CID(n.key); err != nil {
			return body{}, fmt.Errorf("%w: index key: %v", base.ErrCorrupt, err)
		}
		if meta, err = sc.self.memories.MetaIn(sc.txn, c); err != nil {
			return body{}, err
		}
	}
	b, err := sc.bodyWith(n.key, c, meta)
	if err == nil {
		sc.self.bodies.set(n.id, b)
	}
	return b, err
}

// bodyWith is bodyAt of memory c (of CID key), its metadata given.
func (sc *scorer) bodyWith(key string, c cid.Cid, meta *messages.MemoryMeta) (body, error) {
	if b, ok := sc.bodies[key]; ok {
		return b, nil
	}
	m, err := sc.self.memories.MemoryIn(sc.txn, c)
	if err != nil {
		return body{}, err
	}
	b := bodyOf(m, meta)
	sc.bodies[key] = b
	return b, nil
}
