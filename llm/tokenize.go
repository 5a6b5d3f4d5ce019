package llm

import (
	"unicode"
	"unicode/utf8"
)

// Tokenize splits text into the keyword tokens Memoria uses for matching:
//
//  1. Words are maximal runs of Unicode letters and digits (combining marks
//     continue a word, so decomposed accents and Indic vowel signs do not
//     split it); every other rune is a separator. Apostrophes are
//     separators too, so "don't" yields "don" and "t", both stop words.
//  2. Words are lower-cased rune by rune (unicode.ToLower).
//  3. English stop words (a built-in list of about 150 function words and
//     contraction fragments) are dropped.
//  4. The rest are reduced by a light suffix-stripping stemmer (see stem).
//
// Tokens are stems, not display words ("loving" becomes "lov"). They are
// returned in text order, duplicates included; the result is nil when text
// has no content words.
func Tokenize(text string) []string {
	var buf [64]byte
	t := tokenizer{text: text}
	var out []string
	for {
		tok, ok := t.appendNext(buf[:0])
		if !ok {
			return out
		}
		out = append(out, string(tok))
	}
}

// Word is a token and the word of the text it came from, as written.
type Word struct {
	Token string // as Tokenize returns it: lower-cased, stemmed
	Text  string // the word in the text: "Lisbon", "lives"
}

// TokenizeWords is Tokenize with the word each token came from: what to
// show people where a stem would not read ("lives", not "liv").
func TokenizeWords(text string) []Word {
	var buf [64]byte
	t := tokenizer{text: text}
	var out []Word
	for {
		tok, ok := t.appendNext(buf[:0])
		if !ok {
			return out
		}
		out = append(out, Word{Token: string(tok), Text: text[t.word:t.pos]})
	}
}

// tokenizer yields the stemmed, stop-word-filtered tokens of text one at a
// time. It holds no buffer of its own: callers pass the slice to append
// each token to, which lets hot paths tokenize without allocating.
type tokenizer struct {
	text string
	pos  int
	word int // where the last word read begins in text (it ends at pos)
}

// appendNext appends the next token to dst and returns the extended slice,
// or dst unchanged and false when text is exhausted.
func (t *tokenizer) appendNext(dst []byte) ([]byte, bool) {
	start := len(dst)
	for {
		dst = t.appendWord(dst[:start])
		word := dst[start:]
		if len(word) == 0 {
			return dst, false
		}
		if !isStopWord(word) {
			// stem only shortens and rewrites in place, so its result is
			// a prefix of word.
			return dst[:start+len(stem(word))], true
		}
	}
}

// appendWord appends the next word of text, lower-cased, to dst. It appends
// nothing when no word is left.
func (t *tokenizer) appendWord(dst []byte) []byte {
	start := len(dst)
	for t.pos < len(t.text) {
		r, size := utf8.DecodeRuneInString(t.text[t.pos:])
		if isWordRune(r, len(dst) > start) {
			if len(dst) == start {
				t.word = t.pos
			}
			dst = utf8.AppendRune(dst, unicode.ToLower(r))
		} else if len(dst) > start {
			break // leave the separator for the next call
		}
		t.pos += size
	}
	return dst
}

// isWordRune reports whether r belongs to a word. Marks only continue a word
// that has already started.
func isWordRune(r rune, inWord bool) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || (inWord && unicode.IsMark(r))
}

// minStemLen is the shortest stem (in runes) the stemmer will produce by
// removing a suffix or letter; words already shorter are left alone.
const minStemLen = 3

// stem applies a light, English-oriented suffix stripper to a lower-cased
// word, in place, and returns the (possibly shorter) result. It is much
// cruder than Porter's algorithm; its only goal is that common inflections
// of a word share a feature ("run"/"runs"/"running" -> "run",
// "paint"/"paints"/"painted"/"painting" -> "paint",
// "love"/"loves"/"loved"/"loving" -> "lov", "party"/"parties" -> "parti").
//
// Step 1 removes at most one suffix; the first rule whose conditions hold
// wins, and a rule never leaves fewer than minStemLen runes:
//
//	-ies, -ied  -> -i          (parties -> parti, studied -> studi)
//	-es         -> removed     only after s, x, z, ch, sh (boxes -> box)
//	-s          -> removed     not after s, u, i (class, bus, analysis kept)
//	-ing        -> removed     if the stem has a vowel (string kept)
//	-ed         -> removed     if the stem has a vowel, not after e (need kept)
//	-ly         -> removed     if the stem has a vowel (quickly -> quick)
//
// Step 2 tidies the end of every word, stripped or not:
//
//	after -ing/-ed, a doubled final consonant other than l, s, z is undoubled
//	(running -> runn -> run, stopped -> stop; falling -> fall);
//	a final single "e" is dropped (love -> lov, free kept);
//	a final "y" after a stem with a vowel becomes "i" (happy -> happi).
func stem(w []byte) []byte {
	w, verbal := stripSuffix(w)
	if verbal {
		w = undouble(w)
	}
	w = dropFinalE(w)
	return yToI(w)
}

// stripSuffix performs step 1 of stem. verbal reports whether -ing or -ed
// was removed.
func stripSuffix(w []byte) (out []byte, verbal bool) {
	switch {
	case hasSuffix(w, "ies") && long(w, 2), hasSuffix(w, "ied") && long(w, 2):
		return w[:len(w)-2], false // "parties" -> "parti" (the "i" stays)
	case hasSuffix(w, "es") && sibilantBefore(w, 2) && long(w, 2):
		return w[:len(w)-2], false
	case hasSuffix(w, "s") && !hasSuffix(w, "ss") && !hasSuffix(w, "us") &&
		!hasSuffix(w, "is") && long(w, 1):
		return w[:len(w)-1], false
	case hasSuffix(w, "ing") && long(w, 3) && hasVowel(w[:len(w)-3]):
		return w[:len(w)-3], true
	case hasSuffix(w, "ed") && !hasSuffix(w, "eed") && long(w, 2) && hasVowel(w[:len(w)-2]):
		return w[:len(w)-2], true
	case hasSuffix(w, "ly") && long(w, 2) && hasVowel(w[:len(w)-2]):
		return w[:len(w)-2], false
	}
	return w, false
}

// undouble turns a final doubled consonant (other than l, s, z) into a
// single one: "runn" -> "run".
func undouble(w []byte) []byte {
	n := len(w)
	if n < 2 || !long(w, 1) || w[n-1] != w[n-2] {
		return w
	}
	switch c := w[n-1]; {
	case c < 'a' || c > 'z', isVowel(c), c == 'l', c == 's', c == 'z':
		return w
	}
	return w[:n-1]
}

// dropFinalE removes a final single "e": "love" -> "lov", "free" is kept.
func dropFinalE(w []byte) []byte {
	if hasSuffix(w, "e") && !hasSuffix(w, "ee") && long(w, 1) {
		return w[:len(w)-1]
	}
	return w
}

// yToI replaces a final "y" with "i" when the rest has a vowel:
// "happy" -> "happi", "day" -> "dai", "try" is kept.
func yToI(w []byte) []byte {
	n := len(w)
	if hasSuffix(w, "y") && utf8.RuneCount(w) >= minStemLen && hasVowel(w[:n-1]) {
		w[n-1] = 'i'
	}
	return w
}

// long reports whether w keeps at least minStemLen runes after its last cut
// bytes (an ASCII suffix) are removed.
func long(w []byte, cut int) bool {
	return len(w) >= cut && utf8.RuneCount(w[:len(w)-cut]) >= minStemLen
}

// hasSuffix reports whether w ends with the ASCII suffix s.
func hasSuffix(w []byte, s string) bool {
	return len(w) >= len(s) && string(w[len(w)-len(s):]) == s
}

// sibilantBefore reports whether the suffix of length cut follows s, x, z,
// ch or sh, the endings after which English plurals take "-es".
func sibilantBefore(w []byte, cut int) bool {
	stem := w[:len(w)-cut]
	return hasSuffix(stem, "s") || hasSuffix(stem, "x") || hasSuffix(stem, "z") ||
		hasSuffix(stem, "ch") || hasSuffix(stem, "sh")
}

// hasVowel reports whether w contains an ASCII vowel (y counts).
func hasVowel(w []byte) bool {
	for _, c := range w {
		if isVowel(c) || c == 'y' {
			return true
		}
	}
	return false
}

// isVowel reports whether c is one of a, e, i, o, u.
func isVowel(c byte) bool {
	switch c {
	case 'a', 'e', 'i', 'o', 'u':
		return true
	}
	return false
}

// isStopWord reports whether the lower-cased word w is an English stop word.
// The list is a compact set of pronouns, determiners, auxiliaries,
// prepositions and conjunctions, plus the fragments that splitting
// contractions on the apostrophe leaves behind ("don't" -> "don", "t").
// A switch keeps the list immutable and lookup allocation-free.
func isStopWord(w []byte) bool {
	switch string(w) {
	case "a", "about", "above", "after", "again", "against", "all", "also",
		"am", "an", "and", "any", "are", "as", "at",
		"be", "because", "been", "before", "being", "below", "between",
		"both", "but", "by",
		"can", "could",
		"did", "do", "does", "doing", "down", "during",
		"each", "either", "else", "ever",
		"few", "for", "from", "further",
		"had", "has", "have", "having", "he", "her", "here", "hers",
		"herself", "him", "himself", "his", "how",
		"i", "if", "in", "into", "is", "it", "its", "itself",
		"just",
		"me", "might", "more", "most", "must", "my", "myself",
		"no", "nor", "not", "now",
		"of", "off", "on", "once", "only", "or", "other", "our", "ours",
		"ourselves", "out", "over", "own",
		"same", "shall", "she", "should", "so", "some", "such",
		"than", "that", "the", "their", "theirs", "them", "themselves",
		"then", "there", "these", "they", "this", "those", "through", "to",
		"too",
		"under", "until", "up", "us",
		"very",
		"was", "we", "were", "what", "when", "where", "which", "while",
		"who", "whom", "whose", "why", "will", "with", "would",
		"yet", "you", "your", "yours", "yourself", "yourselves",
		// Contraction fragments.
		"s", "t", "d", "ll", "m", "re", "ve",
		"aren", "couldn", "didn", "doesn", "don", "hadn", "hasn", "haven",
		"isn", "mustn", "shan", "shouldn", "wasn", "weren", "wouldn":
		return true
	}
	return false
}
