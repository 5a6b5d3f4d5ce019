package tiers

import (
	"context"
	"strings"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/messages"
)

// Model does the language work of the tiers: linking and summarising the
// dialogue chain, keywords of a page, a segment's summary, and the persona
// extracted from promoted pages. Heuristic does it offline and
// deterministically; LLMModel asks a language model for structured
// replies and falls back to Heuristic when the model cannot give one.
type Model interface {
	Chain(ctx context.Context, in ChainInput) (*messages.MetaChain, error)
	PageKeywords(ctx context.Context, in KeywordInput) ([]Keyword, error)
	// Digest returns a segment's new summary and, when the model chose
	// them, its keywords (nil keeps the weighted terms' keywords).
	Digest(ctx context.Context, in DigestInput) (summary string, keywords []string, err error)
	Persona(ctx context.Context, in PersonaInput) (PersonaUpdate, error)
}

// PageText is a page with the texts of its two memories.
type PageText struct {
	Page  *messages.Page
	QName string // speaker of the input; "" when unnamed
	Q     string
	RName string
	R     string
	// RSelf: the response is the sona's own (a self memory), so its
	// statements are the agent's, not the user's.
	RSelf bool
	// RQuotes: the response only quotes the dialogue (the offline model),
	// so it says nothing about the agent.
	RQuotes bool
}

// Lines renders the page as "speaker: text" lines.
func (p PageText) Lines() []string {
	line := func(name, text string) string {
		if name == "" {
			return text
		}
		return name + ": " + text
	}
	return []string{line(p.QName, p.Q), line(p.RName, p.R)}
}

// Text is the page's lines joined.
func (p PageText) Text() string { return strings.Join(p.Lines(), "\n") }

// sentences splits the page into sentences, each prefixed by its speaker.
func (p PageText) sentences() []string {
	var out []string
	add := func(name, text string) {
		for _, s := range llm.Sentences(text) {
			if name != "" {
				s = name + ": " + s
			}
			out = append(out, s)
		}
	}
	add(p.QName, p.Q)
	add(p.RName, p.R)
	return out
}

// ChainInput is what deciding a page's meta chain needs.
type ChainInput struct {
	// Prev are the short-term pages before this one, oldest first.
	Prev []PageText
	Page PageText
	// Similarity of the page to the previous one, and the emergent
	// threshold at or above which the heuristic links them.
	Similarity, Threshold float64
}

// KeywordInput is what a page's keywords need: the page and the document
// frequencies of the sona's mid-term corpus of N pages.
type KeywordInput struct {
	Page PageText
	DF   func(term string) uint64
	N    uint64
}

// DigestInput is a segment (after Join, so with its new keywords but its
// old summary) and the page that just joined it.
type DigestInput struct {
	Segment *Segment
	Page    PageText
}

// PersonaInput is a promotion with the texts of its pages and the persona
// it updates.
type PersonaInput struct {
	Promotion *messages.Promotion
	Pages     []PageText
	Persona   *Persona
	Traits    Traits
}

// Statement is a fact about the user or a trait of the agent, with the
// memory it came from; Embedding is filled in before it is applied.
type Statement struct {
	Text      string
	Source    string
	Embedding []float32
}

// TraitObservation is evidence of a user trait: Level is the observed
// strength (0..1) that the trait's level moves towards.
type TraitObservation struct {
	Dimension string
	Level     float64
	Evidence  string
}

// PersonaUpdate is what one promotion teaches the persona.
type PersonaUpdate struct {
	Profile     map[string]string
	Facts       []Statement
	Traits      []TraitObservation
	AgentTraits []Statement
}

// Limits of the heuristic texts.
const (
	chainSentences   = 3
	chainChars       = 400
	summarySentences = 3
	summaryChars     = 500
	pageKeywords     = 8
)

// Heuristic is the offline Model: similarity against the emergent
// threshold for the chain, extractive summaries, TF-IDF keywords, and
// first-person statements for the persona.
type Heuristic struct{}

var _ Model = Heuristic{}

// Chain links the page when it is at least as similar to the previous page
// as the threshold asks, and summarises the chain extractively: the
// previous chain's summary and the page's sentences.
func (Heuristic) Chain(_ context.Context, in ChainInput) (*messages.MetaChain, error) {
	linked := len(in.Prev) > 0 && in.Similarity >= in.Threshold
	return chainOf(in, linked, ""), nil
}

// chainOf builds the meta chain for a link decision; summary "" means the
// extractive one.
func chainOf(in ChainInput, linked bool, summary string) *messages.MetaChain {
	mc := &messages.MetaChain{Linked: linked, Start: in.Page.Page.Seq}
	var sentences []string
	if linked {
		prev := in.Prev[len(in.Prev)-1].Page
		mc.Start = prev.Seq
		if pm := prev.MetaChain; pm != nil {
			mc.Start = pm.Start
			sentences = llm.Sentences(pm.Summary)
		}
	}
	if summary == "" {
		summary = Summarize(append(sentences, in.Page.sentences()...), nil, chainSentences, chainChars)
	}
	mc.Summary = summary
	return mc
}

// PageKeywords weighs the page's terms by TF-IDF.
func (Heuristic) PageKeywords(_ context.Context, in KeywordInput) ([]Keyword, error) {
	return Keywords(in.Page.Text(), in.DF, in.N, pageKeywords), nil
}

// Digest summarises the segment extractively from its summary so far and
// the new page, favouring its keywords.
func (Heuristic) Digest(_ context.Context, in DigestInput) (string, []string, error) {
	sentences := append(llm.Sentences(in.Segment.Summary), in.Page.sentences()...)
	return Summarize(sentences, in.Segment.Keywords, summarySentences, summaryChars), nil, nil
}

// Persona extracts first-person statements; see ExtractPersona.
func (Heuristic) Persona(_ context.Context, in PersonaInput) (PersonaUpdate, error) {
	return ExtractPersona(in.Pages, in.Traits), nil
}
