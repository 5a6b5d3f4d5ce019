// Package rerank is the chat-scored reranker (recall.rerank.provider
// chat) for servers without a /rerank endpoint: any llm.LLM — in practice
// llm/openai's chat client, behind a resilience guard — is asked to score
// every candidate 0–10, and its reply is read leniently. The /rerank
// clients are llm/openai's (Reranker, TEIReranker).
package rerank

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/memoria-ai/memoria/llm"
)

// Chat is a reranker for servers without /rerank: one chat call lists
// the documents, numbered from 1, and asks for a score 0–10 for each.
// The reply is read leniently (ParseChatScores): models do not keep to a
// format.
type Chat struct{ model llm.LLM }

var _ llm.Reranker = (*Chat)(nil)

// NewChat returns a reranker asking model.
func NewChat(model llm.LLM) *Chat { return &Chat{model: model} }

// chatDocChars bounds each document in the prompt (characters).
const chatDocChars = 1000

const chatSystem = "You judge how relevant passages are to a query. Score every passage from 0 (unrelated) to 10 " +
	"(it answers the query). Reply with one line per passage, in the form `[number] score`, and nothing else."

// Rerank asks the model to score documents against query.
func (c *Chat) Rerank(ctx context.Context, query string, documents []string) ([]float64, error) {
	if err := ctx.Err(); err != nil || len(documents) == 0 {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Query: %s\n\nPassages:\n", oneLine(query, chatDocChars))
	for i, d := range documents {
		fmt.Fprintf(&b, "[%d] %s\n", i+1, oneLine(d, chatDocChars))
	}
	fmt.Fprintf(&b, "\nScore all %d passages, one line each: [number] score.", len(documents))
	resp, err := c.model.Complete(ctx, llm.Request{
		Messages:  []llm.Message{{Role: llm.RoleSystem, Content: chatSystem}, {Role: llm.RoleUser, Content: b.String()}},
		MaxTokens: 16*len(documents) + 64,
	})
	if err != nil {
		return nil, err
	}
	return ParseChatScores(resp.Content, len(documents))
}

// oneLine is s on one line, cut to at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}

// scoreLine is a line naming a passage and its score: "[3] 7", "3: 7",
// "Passage 3 - 7/10", "#3 score: 7.5", "[3]: 8 (mentions …)".
var scoreLine = regexp.MustCompile(`(?i)^\W*(?:passage|document|doc)?\s*[\[#(]?\s*(\d+)\b\s*[\])]?\s*[:=\-–—.)]*\s*(?:score|relevance)?\s*[:=]?\s*(\d+(?:\.\d+)?)\s*(?:/\s*10)?`)

// bareScore is a line with nothing but a score: "7", "7/10".
var bareScore = regexp.MustCompile(`^\s*(\d+(?:\.\d+)?)\s*(?:/\s*10)?\s*$`)

// ParseChatScores reads a chat model's scores of n passages numbered from
// 1, each clamped to 0..10: lines of "[i] score" (and the usual variants:
// "i: score", "Passage i - score/10", a Markdown list), a JSON array of n
// numbers, or a JSON object {"scores": …} holding such an array or
// {index, score} objects; else n lines of a bare score each, in order. A
// passage named twice keeps its first score; one left out is NaN. A reply
// that scores none is llm.ErrMalformed.
func ParseChatScores(reply string, n int) ([]float64, error) {
	scores := make([]float64, n)
	for i := range scores {
		scores[i] = math.NaN()
	}
	scored := 0
	put := func(i int, v float64) {
		if i >= 0 && i < n && math.IsNaN(scores[i]) && !math.IsNaN(v) && !math.IsInf(v, 0) {
			scores[i] = max(0, min(10, v))
			scored++
		}
	}
	text := llm.Unfence(reply)
	if !parseJSONScores(text, n, put) {
		parseLines(text, n, put)
	}
	if scored == 0 {
		return nil, fmt.Errorf("%w: chat reranker: no passage scored (reply %q)", llm.ErrMalformed, oneLine(reply, 200))
	}
	return scores, nil
}

// parseLines reads "[i] score" lines, else n lines of a bare score each.
func parseLines(text string, n int, put func(int, float64)) {
	var bare []float64
	indexed := false
	for _, line := range strings.Split(text, "\n") {
		if m := scoreLine.FindStringSubmatch(line); m != nil {
			indexed = true
			i, _ := strconv.Atoi(m[1])
			v, _ := strconv.ParseFloat(m[2], 64)
			put(i-1, v)
		} else if m := bareScore.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			bare = append(bare, v)
		}
	}
	if !indexed && len(bare) == n {
		for i, v := range bare {
			put(i, v)
		}
	}
}

// parseJSONScores reads a JSON reply: an array of n numbers, in order,
// or of {index, score} objects (index from 1), either alone or under
// "scores". It reports whether the reply was such JSON.
func parseJSONScores(text string, n int, put func(int, float64)) bool {
	var obj struct {
		Scores json.RawMessage `json:"scores"`
	}
	raw := json.RawMessage(text)
	if strings.HasPrefix(text, "{") {
		if json.Unmarshal(raw, &obj) != nil || obj.Scores == nil {
			return false
		}
		raw = obj.Scores
	}
	var nums []float64
	if err := json.Unmarshal(raw, &nums); err == nil && len(nums) == n {
		for i, v := range nums {
			put(i, v)
		}
		return true
	}
	var items []struct {
		Index *int     `json:"index"`
		Score *float64 `json:"score"`
	}
	if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 {
		return false
	}
	for _, it := range items {
		if it.Index != nil && it.Score != nil {
			put(*it.Index-1, *it.Score)
		}
	}
	return true
}
