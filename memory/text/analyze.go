package text

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	porterstemmer "github.com/blevesearch/go-porterstemmer"
	"github.com/blevesearch/segment"
)

// analyze turns text into its index terms, in order, repeats kept:
// Unicode words (UAX #29), English possessives dropped ("Maya's" →
// "Maya"), lower case, English stop words dropped, Porter stems. It is
// the analysis of bleve's "en" analyzer, which indexes before layout 3
// used, so the terms (and BM25's scores) did not change with the index.
func analyze(text string) []string {
	var out []string
	seg := segment.NewWordSegmenterDirect([]byte(text))
	for seg.Segment() {
		if seg.Type() == segment.None { // spaces, punctuation
			continue
		}
		t := lower(dropPossessive(seg.Bytes()))
		if stopWords[t] {
			continue
		}
		out = append(out, string(porterstemmer.StemWithoutLowerCasing([]rune(t))))
	}
	return out
}

// dropPossessive removes a final 's (with an apostrophe, a right single
// quotation mark or a full-width apostrophe).
func dropPossessive(w []byte) []byte {
	last, n := utf8.DecodeLastRune(w)
	if last != 's' && last != 'S' {
		return w
	}
	prev, m := utf8.DecodeLastRune(w[:len(w)-n])
	if prev == '\'' || prev == '’' || prev == '＇' {
		return w[:len(w)-n-m]
	}
	return w
}

// lower lower-cases w rune by rune, a final σ as ς; from a rune whose
// lower case is longer in UTF-8 on, as bytes.ToLower does (bleve's
// to_lower filter, which the terms of existing indexes came from).
func lower(w []byte) string {
	var b strings.Builder
	b.Grow(len(w))
	for i := 0; i < len(w); {
		r, n := rune(w[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRune(w[i:])
		}
		l := unicode.ToLower(r)
		switch {
		case l == r:
			b.Write(w[i : i+n])
		case l == 'σ' && i+2 == len(w):
			b.WriteRune('ς')
		case utf8.RuneLen(l) > n:
			b.Write(bytes.ToLower(w[i:]))
			return b.String()
		default:
			b.WriteRune(l)
		}
		i += n
	}
	return b.String()
}

// stopWords are the English stop words of the Snowball project
// (snowball.tartarus.org, algorithms/english/stop.txt, BSD licence), as
// Lucene and bleve use them.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
i me my myself we our ours ourselves you your yours yourself yourselves
he him his himself she her hers herself it its itself they them their theirs
themselves what which who whom this that these those am is are was were be
been being have has had having do does did doing would should could ought
i'm you're he's she's it's we're they're i've you've we've they've i'd you'd
he'd she'd we'd they'd i'll you'll he'll she'll we'll they'll isn't aren't
wasn't weren't hasn't haven't hadn't doesn't don't didn't won't wouldn't
shan't shouldn't can't cannot couldn't mustn't let's that's who's what's
here's there's when's where's why's how's a an the and but if or because as
until while of at by for with about against between into through during
before after above below to from up down in out on off over under again
further then once here there when where why how all any both each few more
most other some such no nor not only own same so than too very`) {
		m[w] = true
	}
	return m
}()
