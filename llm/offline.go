package llm

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// OfflineModel is the model name OfflineLLM reports in Response.Model.
const OfflineModel = "memoria-offline-v1"

// Reply templates of OfflineLLM.
const (
	offlinePrefix     = "[offline model] "
	offlineRecall     = offlinePrefix + "From memory: "
	offlineNoMemory   = offlinePrefix + "I don't remember anything about that."
	offlineNoted      = offlinePrefix + "Noted."
	offlineMaxQuotes  = 3
	offlineCharsPerTk = 4 // characters per token when applying MaxTokens
)

// OfflineLLM is a deterministic, offline, extractive LLM. It never invents
// text: it answers by quoting the context sentences that best match the
// question, or says it does not remember.
//
// The input is the content of the last RoleUser message; the RoleUser
// messages before it are context (system instructions and the model's own
// earlier answers are not quoted), and messages after it are ignored. The
// context is split into sentences:
//
//   - on newlines, then within each line after '.', '!' or '?' (a run of
//     them) followed by white space or the end of the line, so "v1.5" and
//     "example.com" are not split;
//   - lines starting with "#" or "---" (section headers and rules a prompt
//     builder may emit) are skipped, and a leading list marker ("- ", "* ",
//     "• ") is removed;
//   - empty sentences, repeated sentences, questions (sentences ending in
//     '?', e.g. earlier user turns) and sentences identical to the input or
//     to one of its sentences are skipped, where "identical" means equal
//     after lower-casing and reducing to words separated by single spaces;
//     the user's own words are never quoted back as a memory.
//
// Each remaining sentence is scored by how many distinct input tokens
// (Tokenize: stemmed, stop words removed) it contains. The up to three
// best-scoring sentences with a score above zero, ranked by score and then
// by position in the context, are quoted in that order:
//
//	[offline model] From memory: <sentence 1> <sentence 2> <sentence 3>
//
// If no sentence scores, the reply to a question or a request (the input
// ends with '?' or begins with a question word or a request verb such as
// "tell", "list" or "remind": asking) is
//
//	[offline model] I don't remember anything about that.
//
// and the reply to anything else — a statement the user tells it — is
//
//	[offline model] Noted.
//
// If Request.MaxTokens > 0 and the reply is longer than MaxTokens*4
// characters (runes), it is cut to at most that many at a word boundary and
// StopReason is StopMaxTokens; otherwise StopReason is StopEndTurn.
//
// OfflineLLM has no state and is safe for concurrent use.
type OfflineLLM struct{}

var _ LLM = (*OfflineLLM)(nil)

// NewOffline returns an OfflineLLM.
func NewOffline() *OfflineLLM { return &OfflineLLM{} }

// Complete answers req extractively; see OfflineLLM. It returns
// ErrEmptyRequest if req has no messages, ErrNoUserMessage if none has
// RoleUser, ErrUnsupported for a structured request (it only quotes), and
// ctx.Err() if ctx is done before work starts.
func (o *OfflineLLM) Complete(ctx context.Context, req Request) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	if req.Schema != nil {
		return Response{}, ErrUnsupported
	}
	if len(req.Messages) == 0 {
		return Response{}, ErrEmptyRequest
	}
	last := lastUserIndex(req.Messages)
	if last < 0 {
		return Response{}, ErrNoUserMessage
	}

	input := req.Messages[last].Content
	quotes := recall(input, req.Messages[:last])
	reply := offlineNoted
	if asking(input) {
		reply = offlineNoMemory
	}
	if len(quotes) > 0 {
		reply = offlineRecall + strings.Join(quotes, " ")
	}

	stop := StopEndTurn
	if limit, ok := charLimit(req.MaxTokens); ok {
		if cut, truncated := truncateWords(reply, limit); truncated {
			reply, stop = cut, StopMaxTokens
		}
	}
	return Response{Content: reply, Model: OfflineModel, StopReason: stop}, nil
}

// askWords begin a question or a request for something remembered.
var askWords = map[string]bool{
	"who": true, "what": true, "when": true, "where": true, "why": true, "how": true, "which": true,
	"whose": true, "whom": true, "do": true, "does": true, "did": true, "is": true, "are": true,
	"was": true, "were": true, "can": true, "could": true, "would": true, "will": true, "should": true,
	"shall": true, "have": true, "has": true, "had": true, "may": true, "might": true, "tell": true,
	"show": true, "list": true, "remind": true, "recall": true, "describe": true, "explain": true,
	"summarize": true, "summarise": true, "give": true, "name": true, "find": true,
}

// asking reports whether input asks something (a question or a request)
// rather than tells something.
func asking(input string) bool {
	in := strings.TrimSpace(input)
	if strings.HasSuffix(in, "?") {
		return true
	}
	first, _, _ := strings.Cut(in, " ")
	first = strings.TrimFunc(strings.ToLower(first), func(r rune) bool { return !unicode.IsLetter(r) })
	return askWords[first]
}

// lastUserIndex returns the index of the last RoleUser message, or -1.
func lastUserIndex(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser {
			return i
		}
	}
	return -1
}

// candidate is a context sentence with its match score.
type candidate struct {
	text  string
	score int
}

// recall returns the sentences of history to quote for input, best first.
func recall(input string, history []Message) []string {
	want := tokenSet(input)
	if len(want) == 0 {
		return nil
	}
	seen := make(map[string]bool) // normalised sentences already considered
	seen[normalizeSentence(input)] = true
	for _, s := range splitSentences(input) {
		seen[normalizeSentence(s)] = true
	}

	var cands []candidate
	for _, m := range history {
		if m.Role != RoleUser {
			continue // instructions and its own earlier answers are not memories to quote
		}
		for _, s := range splitSentences(m.Content) {
			key := normalizeSentence(s)
			if key == "" || seen[key] || strings.HasSuffix(s, "?") {
				continue
			}
			seen[key] = true
			if score := overlap(want, s); score > 0 {
				cands = append(cands, candidate{text: s, score: score})
			}
		}
	}
	// Stable: equal scores keep their context order.
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(b.score, a.score) })

	quotes := make([]string, 0, min(len(cands), offlineMaxQuotes))
	for _, c := range cands[:min(len(cands), offlineMaxQuotes)] {
		quotes = append(quotes, c.text)
	}
	return quotes
}

// tokenSet returns the distinct tokens of text.
func tokenSet(text string) map[string]struct{} {
	set := make(map[string]struct{})
	for _, t := range Tokenize(text) {
		set[t] = struct{}{}
	}
	return set
}

// overlap counts the distinct tokens of sentence that are in want.
func overlap(want map[string]struct{}, sentence string) int {
	n := 0
	for t := range tokenSet(sentence) {
		if _, ok := want[t]; ok {
			n++
		}
	}
	return n
}

// Sentences splits text into trimmed, non-empty sentences, skipping header
// lines, with OfflineLLM's rules.
func Sentences(text string) []string { return splitSentences(text) }

// splitSentences splits text into trimmed, non-empty sentences, skipping
// header lines; see OfflineLLM for the rules.
func splitSentences(text string) []string {
	var out []string
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "---") {
			continue
		}
		out = appendSentences(out, trimListMarker(line))
	}
	return out
}

// appendSentences appends the sentences of one line to out.
func appendSentences(out []string, line string) []string {
	start := 0
	for i := 0; i < len(line); i++ {
		if !isTerminator(line[i]) {
			continue
		}
		j := i + 1
		for j < len(line) && isTerminator(line[j]) {
			j++
		}
		if j < len(line) && line[j] != ' ' && line[j] != '\t' {
			i = j - 1
			continue // "v1.5", "example.com": not a boundary
		}
		out = appendNonEmpty(out, line[start:j])
		start, i = j, j-1
	}
	return appendNonEmpty(out, line[start:])
}

// appendNonEmpty appends the trimmed s to out unless it is empty.
func appendNonEmpty(out []string, s string) []string {
	if s = strings.TrimSpace(s); s != "" {
		out = append(out, s)
	}
	return out
}

// isTerminator reports whether c ends a sentence.
func isTerminator(c byte) bool { return c == '.' || c == '!' || c == '?' }

// trimListMarker removes a leading bullet ("- ", "* ", "• ") from line.
func trimListMarker(line string) string {
	for _, m := range []string{"- ", "* ", "• "} {
		if rest, ok := strings.CutPrefix(line, m); ok {
			return strings.TrimSpace(rest)
		}
	}
	return line
}

// normalizeSentence lower-cases s and reduces it to its words (runs of
// letters, digits and marks) separated by single spaces.
func normalizeSentence(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	inWord := false
	for _, r := range s {
		if isWordRune(r, inWord) {
			if !inWord && b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteRune(unicode.ToLower(r))
			inWord = true
			continue
		}
		inWord = false
	}
	return b.String()
}

// charLimit converts a MaxTokens value to a character limit. ok is false
// when there is no limit (maxTokens <= 0, or too large to matter).
func charLimit(maxTokens int) (limit int, ok bool) {
	if maxTokens <= 0 || maxTokens > math.MaxInt/offlineCharsPerTk {
		return 0, false
	}
	return maxTokens * offlineCharsPerTk, true
}

// truncateWords cuts s to at most limit runes, at the last word boundary
// that fits (or mid-word if the first word alone is too long), and reports
// whether it cut anything. Trailing white space is removed from the result.
func truncateWords(s string, limit int) (string, bool) {
	if utf8.RuneCountInString(s) <= limit {
		return s, false
	}
	cut := byteOffset(s, limit)
	next, _ := utf8.DecodeRuneInString(s[cut:])
	if !unicode.IsSpace(next) {
		if ws := strings.LastIndexFunc(s[:cut], unicode.IsSpace); ws > 0 {
			cut = ws
		}
	}
	return strings.TrimRightFunc(s[:cut], unicode.IsSpace), true
}

// byteOffset returns the byte offset of the rune with index n in s, or
// len(s) if s has no more than n runes.
func byteOffset(s string, n int) int {
	i := 0
	for off := range s {
		if i == n {
			return off
		}
		i++
	}
	return len(s)
}

var _ Streamer = (*OfflineLLM)(nil)

// Stream answers like Complete and hands the reply out word by word (each
// piece is a word with the white space before it), so streaming clients
// work without a network.
func (o *OfflineLLM) Stream(ctx context.Context, req Request, onToken func(string) error) (Response, error) {
	resp, err := o.Complete(ctx, req)
	if err != nil {
		return resp, err
	}
	for _, piece := range wordPieces(resp.Content) {
		if err := ctx.Err(); err != nil {
			return Response{}, err
		}
		if err := onToken(piece); err != nil {
			return Response{}, err
		}
	}
	return resp, nil
}

// wordPieces splits s into pieces that concatenate to s: each is a run of
// white space followed by a run of other characters.
func wordPieces(s string) []string {
	var out []string
	start := 0
	inWord := false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if space && inWord {
			out = append(out, s[start:i])
			start = i
		}
		inWord = !space
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
