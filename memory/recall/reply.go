package recall

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
)

// reply sets each of cands' reply evidence (replyTo).
func (sc *scorer) reply(cands []*Recalled, w config.PathWeights) error {
	for _, r := range cands {
		v, err := sc.replyTo(r, w)
		if err != nil {
			return err
		}
		r.Explain.Evidence.Reply = v
	}
	return nil
}

// replyTo is r's reply evidence: the relevance of the question r answers,
// 0 when it answers none. The question is the memory before r in its
// sona's chain (placeOf) when that one asks a question (its text holds a
// question mark), is visible, lies within recall.context_gap of r in time
// and was said by another speaker than r (when both have one: a speaker
// who asks and goes on is not answered). Its relevance is its own
// (baseRelevance: its calibrated cosine and BM25) and, counting half
// (contextDecay, as a neighbour two places away counts for the context),
// that of the memory before it within the session — what it asks about:
// "I made coconut milk ice cream" — "What did you think of it?" — "Super
// good! Rich and creamy" — at most 1. Nothing is read when neither has
// relevance.
//
// In a conversation the answer often shares no word with a later
// question about it while the question it answered does: "What is Nate's
// favorite video game?" — Joanna: "So what's your favorite game?" — Nate:
// "I'm currently playing this awesome fantasy RPG called Xenoblade
// Chronicles…"; likewise a model's response to a user's question. (The
// answers to the best candidates that ask a question, brought in as a
// path of their own, added nothing on LoCoMo over the evidence: README,
// "LoCoMo evaluation".)
func (sc *scorer) replyTo(r *Recalled, w config.PathWeights) (float64, error) {
	v, pos, ok := sc.placeOf(r)
	if !ok || pos == 0 {
		return 0, nil
	}
	key := r.CID.KeyString()
	qk, ok := sc.memoryAt(v, pos-1)
	if !ok {
		return 0, nil
	}
	q := sc.neighbourOf(qk, v.chain, pos-1)
	own := sc.baseRelevance(q.e, w)
	var about *neighbour
	ak, ok := sc.memoryAt(v, pos-2)
	if ok {
		about = sc.neighbourOf(ak, v.chain, pos-2)
	}
	topic := 0.0
	if about != nil {
		topic = sc.baseRelevance(about.e, w)
	}
	if own == 0 && topic == 0 {
		return 0, nil // it would lend nothing: no read
	}
	self := sc.neighbourOf(key, v.chain, pos)
	if err := sc.place(key, self); err != nil {
		return 0, err
	}
	if err := sc.place(qk, q); err != nil {
		return 0, err
	}
	gap := int64(time.Duration(sc.self.cfg.Recall.ContextGap) / time.Second)
	if !q.visible || absDiff(q.time, self.time) > gap {
		return 0, nil
	}
	asked, err := sc.bodyAt(qk)
	if err != nil || !asked.question {
		return 0, err
	}
	answer, err := sc.bodyAt(key)
	if err != nil {
		return 0, err
	}
	if len(answer.speaker) > 0 && slices.Equal(answer.speaker, asked.speaker) {
		return 0, nil
	}
	if topic > 0 {
		if err := sc.place(ak, about); err != nil {
			return 0, err
		}
		if about.visible && absDiff(about.time, q.time) <= gap {
			own += contextDecay * topic
		}
	}
	return math.Min(1, own), nil
}

// bodyAt is what the evidence keeps of the body of the memory of CID key
// (bodyOf), read once per recall: a candidate's or a neighbour's that
// place found visible.
func (sc *scorer) bodyAt(key string) (body, error) {
	if b, ok := sc.bodies[key]; ok {
		return b, nil
	}
	c, err := cid.Cast([]byte(key))
	if err != nil {
		return body{}, fmt.Errorf("%w: index key: %v", base.ErrCorrupt, err)
	}
	md, err := sc.self.memories.MetaIn(sc.txn, c)
	if err != nil {
		return body{}, err
	}
	m, err := sc.self.memories.MemoryIn(sc.txn, c)
	if err != nil {
		return body{}, err
	}
	b := bodyOf(m, md)
	sc.bodies[key] = b
	return b, nil
}
