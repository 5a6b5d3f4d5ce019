package recall

import (
	"slices"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/vector"
)

// collapser folds near-identical memories into the first one injected, so
// that a budget holds different memories: the same question asked in
// several steps, a statement repeated word for word. Two memories are
// near-identical when they have the same speaker and the Jaccard
// similarity of their word sets (lower-cased letters and digits) is at
// least min. Files and memories without words never fold.
type collapser struct {
	min  float64   // recall.collapse; 0: off
	sets *wordSets // the word sets met lately (nil: none kept)
	kept []collapseKey
}

// collapseKey is what a memory is compared by.
type collapseKey struct {
	r       *Recalled
	speaker string
	words   []uint64 // sorted, unique (wordSet)
}

// fold folds r into a near-identical memory already injected and reports
// whether it did; otherwise it returns r's key for add.
func (c *collapser) fold(r *Recalled) (collapseKey, bool) {
	if c.min == 0 || r.Memory.Data.File != nil {
		return collapseKey{}, false
	}
	k := collapseKey{r: r, speaker: model.Speaker(r.Memory), words: c.sets.of(r.CID, r.Memory)}
	if len(k.words) == 0 {
		return collapseKey{}, false
	}
	for _, o := range c.kept {
		if o.speaker == k.speaker && mayReach(len(o.words), len(k.words), c.min) && jaccard(o.words, k.words) >= c.min {
			o.r.Collapsed = append(o.r.Collapsed, r.CID)
			return collapseKey{}, true
		}
	}
	return k, false
}

// add records an injected memory by the key fold returned.
func (c *collapser) add(k collapseKey) {
	if k.r != nil {
		c.kept = append(c.kept, k)
	}
}

// wordSet is the sorted set of a text's words, lower-cased, each as the
// 64-bit FNV-1a hash of its UTF-8: two different words would count as
// one with a chance of about n²/2⁶⁵ for n words. (As strings, lower-cased,
// split, sorted and compared, the sets were a tenth of a long sona's
// recall: every candidate co-access and expansion visit is folded.)
func wordSet(text string) []uint64 {
	return sortedSet(appendWords(make([]uint64, 0, len(text)/6+1), text))
}

// memoryWords is wordSet(model.Said(m)), without joining a self memory's
// parts into its text: a newline joins them there, which ends a word as
// a part's end does.
func memoryWords(m *model.Memory) []uint64 {
	self := m.Data.Self
	if self == nil || m.Data.Other != nil { // Said is not the parts
		return wordSet(model.Said(m))
	}
	size := 1
	for _, p := range self.Parts {
		size += len(p.Content) / 6
	}
	words := make([]uint64, 0, size)
	for _, p := range self.Parts {
		words = appendWords(words, p.Content)
	}
	return sortedSet(words)
}

func sortedSet(words []uint64) []uint64 {
	slices.Sort(words)
	return slices.Compact(words)
}

// appendWords appends the hashes of text's words to words.
func appendWords(words []uint64, text string) []uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h, in := uint64(offset), false
	for _, r := range text {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			if in {
				words = append(words, h)
				h, in = offset, false
			}
			continue
		}
		in = true
		if r < utf8.RuneSelf {
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			h = (h ^ uint64(r)) * prime
			continue
		}
		var b [utf8.UTFMax]byte
		for _, c := range b[:utf8.EncodeRune(b[:], unicode.ToLower(r))] {
			h = (h ^ uint64(c)) * prime
		}
	}
	if in {
		words = append(words, h)
	}
	return words
}

// wordSets keeps the word sets (wordSet of model.Said) of the memories
// fold met lately, by CID: a memory's words never change, and a long-lived
// sona's recall folds every co-access partner and expansion it reaches,
// most of them reached by the recalls before it — computing each set again
// was a few percent of such a recall's CPU (a sona of 1,000 memories and
// more, stop 66). Direct-mapped: a slot holds the last memory whose CID hashed to
// it. The sets are shared and never written. A slot knows its memory by
// the CID's 128-bit hash (base.KeyHash), not the CID: a CID shares the
// bytes it was read from (base.CID) — a memory's block, a block of the
// affinity walk's keys — and kept here, it kept them all (stop 97).
type wordSets struct {
	hash  base.KeyHasher
	slots []atomic.Pointer[wordSetEntry]
}

type wordSetEntry struct {
	key   base.KeyHash // the memory's CID's
	words []uint64
}

// wordSetSlots is how many word sets a Recaller keeps (a power of two):
// a few MB with the sets of a chat's turns.
const wordSetSlots = 1 << 14

func newWordSets(slots int) *wordSets {
	return &wordSets{hash: base.NewKeyHasher(), slots: make([]atomic.Pointer[wordSetEntry], slots)}
}

// of is the word set of m, the memory of CID c: kept, or made and kept.
func (w *wordSets) of(c cid.Cid, m *model.Memory) []uint64 {
	if w == nil {
		return memoryWords(m)
	}
	key := w.hash.Of(c.KeyString())
	slot := &w.slots[key[0]&uint64(len(w.slots)-1)]
	if e := slot.Load(); e != nil && e.key == key {
		return e.words
	}
	words := memoryWords(m)
	slot.Store(&wordSetEntry{key: key, words: words})
	return words
}

// mayReach reports whether two sets of sizes a and b may have a Jaccard
// similarity of least: it is at most the smaller size over the larger, and
// jaccard's quotient never exceeds that one's (equal when one set holds
// the other), so a false answer is jaccard's below least, without the walk.
func mayReach(a, b int, least float64) bool {
	return float64(min(a, b))/float64(max(a, b)) >= least
}

// jaccard is |a ∩ b| / |a ∪ b| of two sorted sets.
func jaccard(a, b []uint64) float64 {
	common, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			common++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return float64(common) / float64(len(a)+len(b)-common)
}

// diversity picks candidates by maximal marginal relevance (Carbonell and
// Goldstein, 1998): next is the candidate with the best
// λ·score − (1−λ)·(its highest cosine to a hit already chosen). The
// candidates come best score first, and ties go to the earlier one, so
// with no hit chosen yet it is the best by score. The cosines are read
// from the index's int8 records (within a few thousandths; the penalty
// is a raw cosine, not calibrated): the float32 vectors of a large store
// are read from a file one system call each, and reading every
// candidate's was 2% of a recall's CPU at 100,000 memories.
type diversity struct {
	lambda float64
	scores []float64
	recs   []vector.Quantized // int8 embeddings; empty when a candidate has none
	maxSim []float64
	room   *[]int8 // holds the records read for d (roomPool)
}

func (sc *scorer) newDiversity(cands []*Recalled, lambda float64) *diversity {
	d := &diversity{lambda: lambda, scores: make([]float64, len(cands)), recs: make([]vector.Quantized, len(cands)), maxSim: make([]float64, len(cands))}
	dims := sc.self.index.Dims()
	d.room = roomPool.Get().(*[]int8)
	room := slices.Grow((*d.room)[:0], dims*len(cands))[:dims*len(cands)]
	*d.room = room
	for i, r := range cands {
		d.scores[i] = r.Score
		d.recs[i] = sc.record(r.CID, room[i*dims:(i+1)*dims:(i+1)*dims])
	}
	return d
}

// roomPool holds the room of a diversity's records between recalls.
var roomPool = sync.Pool{New: func() any { return new([]int8) }}

// release gives d's room back: call it once no record of d is used.
func (d *diversity) release() {
	clear(d.recs)
	roomPool.Put(d.room)
	d.room = nil
}

// next is the index of the candidate to consider next.
func (d *diversity) next() int {
	best, bestV := 0, 0.0
	for i, s := range d.scores {
		if v := d.lambda*s - (1-d.lambda)*d.maxSim[i]; i == 0 || v > bestV {
			best, bestV = i, v
		}
	}
	return best
}

// take removes candidate i and returns its record.
func (d *diversity) take(i int) vector.Quantized {
	v := d.recs[i]
	d.scores = slices.Delete(d.scores, i, i+1)
	d.recs = slices.Delete(d.recs, i, i+1)
	d.maxSim = slices.Delete(d.maxSim, i, i+1)
	return v
}

// chose records a hit's record: the others' redundancy grows.
func (d *diversity) chose(v vector.Quantized) {
	if v.Len() == 0 {
		return
	}
	for i, o := range d.recs {
		if o.Len() != 0 {
			d.maxSim[i] = max(d.maxSim[i], float64(vector.ApproxDot(v, o)))
		}
	}
}

// record is a memory's int8 embedding (empty when it has none): the
// index's record copied into buf (of the index's dimensions), or the
// stored vector's int8 form for one the index does not hold.
func (sc *scorer) record(c cid.Cid, buf []int8) vector.Quantized {
	if id, ok := sc.self.index.ID(c.KeyString()); ok {
		if q, ok := sc.self.index.RecordInto(id, buf); ok {
			return q
		}
	}
	if vec, err := readVector(sc.txn, c); err == nil && len(vec) == sc.self.index.Dims() {
		return sc.self.index.Quantize(vec)
	}
	return vector.Quantized{}
}
