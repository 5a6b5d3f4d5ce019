package llm

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// DefaultDims is the vector length NewHashedEmbedder uses when asked for a
// non-positive one.
const DefaultDims = 384

// Feature weights of HashedEmbedder.
const (
	// wordWeight is the weight of a whole-word feature.
	wordWeight = 1.0
	// trigramWeight is the total weight of a word's trigram features; it is
	// split evenly across the word's trigrams so that long words do not
	// outweigh short ones.
	trigramWeight = 0.5
)

// Feature tags keep the three feature families apart in hash space: the
// word "run" and the trigram "run" must not collide by construction.
const (
	tagWord    byte = 'w'
	tagTrigram byte = 't'
	tagRaw     byte = 'r'
)

// FNV-1a 64-bit parameters.
const (
	fnvOffset64 uint64 = 14695981039346656037
	fnvPrime64  uint64 = 1099511628211
)

// HashedEmbedder is a deterministic, offline Embedder based on signed
// feature hashing. It needs no model and no network; similarity reflects
// shared (stemmed) words and word fragments, not meaning, so it is a
// stand-in for a real embedding model, good enough for tests, demos and
// keyword-ish recall.
//
// For each text:
//
//  1. Tokenize gives the stemmed, stop-word-free words.
//  2. Each distinct word with term frequency tf gets weight
//     w = 1 + ln(tf) (sublinear tf) and contributes
//     - one word feature of weight 1.0*w, and
//     - its character trigrams, computed over runes of the word padded
//     with one space each side (" run " -> " ru", "run", "un "), each of
//     weight 0.5*w/len(trigrams); a word of n runes has n trigrams.
//  3. Each feature (a tag byte followed by its UTF-8 text) is hashed with
//     FNV-1a 64, and the hash is passed through the SplitMix64 finalizer
//     (FNV alone diffuses the last bytes of short keys poorly into the high
//     bits, which clustered similar words into neighbouring buckets). The
//     high 32 bits of the result modulo Dims select the bucket; bit 0
//     selects the sign (set = negative). Signed hashing makes collisions
//     cancel in expectation instead of biasing dot products upwards.
//  4. The vector is L2-normalised.
//
// A text with no content words (empty, punctuation only, all stop words)
// cannot be normalised from step 2, so it is instead embedded as the single
// feature "raw text, lower-cased, surrounding space trimmed" of weight 1:
// every text gets a unit vector, equal texts get equal vectors, and all
// empty texts share one vector. The same fallback covers the (vanishingly
// unlikely) case where signed features cancel to exactly zero.
//
// Words are visited in order of their hash, so output is bit-for-bit
// reproducible across calls, instances and processes. A HashedEmbedder is
// immutable and safe for concurrent use; Embed allocates one []float32 per
// text plus the outer slice (more only for texts with very many words).
type HashedEmbedder struct {
	dims int
	id   string
}

var _ Embedder = (*HashedEmbedder)(nil)

// NewHashedEmbedder returns a HashedEmbedder producing vectors of length
// dims, or DefaultDims if dims <= 0.
func NewHashedEmbedder(dims int) *HashedEmbedder {
	if dims <= 0 {
		dims = DefaultDims
	}
	return &HashedEmbedder{dims: dims, id: fmt.Sprintf("hashed/v1/%d", dims)}
}

// Dims returns the length of the vectors Embed produces.
func (e *HashedEmbedder) Dims() int { return e.dims }

// ID returns "hashed/v1/<dims>".
func (e *HashedEmbedder) ID() string { return e.id }

// Embed returns one unit vector per text, in order. It returns ctx.Err() if
// ctx is done before work starts or between texts.
func (e *HashedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i, text := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[i] = e.embed(text)
	}
	return out, nil
}

// wordRef locates one token in the scratch arena, keyed by its word hash.
type wordRef struct {
	hash       uint64
	start, end int
}

// embed computes the vector of one text.
func (e *HashedEmbedder) embed(text string) []float32 {
	v := make([]float32, e.dims)

	var arenaBuf [512]byte
	var refsBuf [64]wordRef
	arena, refs := collectWords(text, arenaBuf[:0], refsBuf[:0])
	slices.SortFunc(refs, func(a, b wordRef) int { return cmp.Compare(a.hash, b.hash) })

	for i := 0; i < len(refs); {
		j := i + 1
		for j < len(refs) && refs[j].hash == refs[i].hash {
			j++
		}
		w := 1 + math.Log(float64(j-i))
		word := arena[refs[i].start:refs[i].end]
		addFeature(v, refs[i].hash, wordWeight*w)
		addTrigrams(v, word, trigramWeight*w)
		i = j
	}

	if !Normalize(v) {
		clear(v)
		raw := strings.TrimSpace(strings.ToLower(text))
		addFeature(v, fnvString(fnvByte(fnvOffset64, tagRaw), raw), 1)
	}
	return v
}

// collectWords appends every token of text to arena and a reference to it,
// with its word-feature hash, to refs.
func collectWords(text string, arena []byte, refs []wordRef) ([]byte, []wordRef) {
	t := tokenizer{text: text}
	for {
		start := len(arena)
		var ok bool
		if arena, ok = t.appendNext(arena); !ok {
			return arena, refs
		}
		h := fnvBytes(fnvByte(fnvOffset64, tagWord), arena[start:])
		refs = append(refs, wordRef{hash: h, start: start, end: len(arena)})
	}
}

// addTrigrams adds the space-padded character trigrams of word, sharing
// total weight equally.
func addTrigrams(v []float32, word []byte, total float64) {
	n := utf8.RuneCount(word) // padded word has n+2 runes, hence n trigrams
	weight := total / float64(n)

	var buf [64]byte
	padded := append(append(append(buf[:0], ' '), word...), ' ')

	// off holds the byte offsets of the current trigram's first rune and
	// the three runes that follow it.
	var off [4]int
	for k := 1; k < 4; k++ {
		_, size := utf8.DecodeRune(padded[off[k-1]:])
		off[k] = off[k-1] + size
	}
	for range n {
		h := fnvBytes(fnvByte(fnvOffset64, tagTrigram), padded[off[0]:off[3]])
		addFeature(v, h, weight)
		if off[3] >= len(padded) {
			break
		}
		_, size := utf8.DecodeRune(padded[off[3]:])
		off = [4]int{off[1], off[2], off[3], off[3] + size}
	}
}

// addFeature adds weight to the bucket and with the sign selected by the
// FNV-1a hash h of a feature.
func addFeature(v []float32, h uint64, weight float64) {
	h = mix64(h)
	bucket := (h >> 32) % uint64(len(v))
	if h&1 != 0 {
		weight = -weight
	}
	v[bucket] += float32(weight)
}

// mix64 is the SplitMix64 finalizer: a bijection on uint64 in which every
// input bit affects every output bit.
func mix64(h uint64) uint64 {
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
	h = (h ^ (h >> 27)) * 0x94d049bb133111eb
	return h ^ (h >> 31)
}

// fnvByte folds one byte into an FNV-1a 64 hash state.
func fnvByte(h uint64, b byte) uint64 {
	return (h ^ uint64(b)) * fnvPrime64
}

// fnvBytes folds p into an FNV-1a 64 hash state.
func fnvBytes(h uint64, p []byte) uint64 {
	for _, b := range p {
		h = fnvByte(h, b)
	}
	return h
}

// fnvString folds s into an FNV-1a 64 hash state.
func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = fnvByte(h, s[i])
	}
	return h
}
