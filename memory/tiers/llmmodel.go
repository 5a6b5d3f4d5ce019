package tiers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/messages"
)

// LLMModel does the tiers' language work with a language model: one
// JSON-schema'd call per decision (MemoryOS asks its model for the same
// four things). When the model cannot give a valid reply — it has no
// structured output (llm.ErrUnsupported, remembered so that it is not
// asked again), the call fails, or the reply does not fit the schema — the
// step falls back to Heuristic, so the tiers never stall on a model, and
// Fallback (when set) hears why. Only a cancelled context is returned as an
// error.
type LLMModel struct {
	LLM llm.LLM
	// MaxTokens caps each reply (0: 1024).
	MaxTokens int
	// Fallback, when set, is told every time the heuristic answers for
	// the model: the operation (chain, keywords, digest, persona) and why.
	Fallback func(op string, err error)

	unsupported atomic.Bool
}

var _ Model = (*LLMModel)(nil)

// Chain asks whether the page continues the chain and for the chain's summary.
func (m *LLMModel) Chain(ctx context.Context, in ChainInput) (*messages.MetaChain, error) {
	var prev strings.Builder
	for _, p := range in.Prev {
		fmt.Fprintf(&prev, "[page %d]\n%s\n", p.Page.Seq, p.Text())
		if mc := p.Page.MetaChain; mc != nil && mc.Summary != "" {
			fmt.Fprintf(&prev, "(chain so far: %s)\n", mc.Summary)
		}
	}
	if len(in.Prev) == 0 {
		prev.WriteString("(none)\n")
	}
	var reply struct {
		Linked  bool   `json:"linked"`
		Summary string `json:"summary"`
	}
	err := m.ask(ctx, "chain", chainSchema,
		"You keep the short-term memory of a dialogue. Decide whether the new page continues the thread of the previous pages (linked) or starts a new one, and summarise the pages of its thread, the new page included, in at most three sentences.",
		fmt.Sprintf("Previous pages, oldest first:\n%s\nNew page:\n%s", prev.String(), in.Page.Text()), &reply)
	if err == nil && strings.TrimSpace(reply.Summary) == "" {
		err = errors.New("empty summary")
	}
	if err != nil {
		return fallback(ctx, m, "chain", err, func() (*messages.MetaChain, error) { return Heuristic{}.Chain(ctx, in) })
	}
	return chainOf(in, reply.Linked && len(in.Prev) > 0, Truncate(strings.TrimSpace(reply.Summary), chainChars)), nil
}

// PageKeywords asks for the page's keywords and weighs the model's terms
// by TF-IDF, so that they add up in a segment like the heuristic's.
func (m *LLMModel) PageKeywords(ctx context.Context, in KeywordInput) ([]Keyword, error) {
	var reply struct {
		Keywords []string `json:"keywords"`
	}
	err := m.ask(ctx, "keywords", keywordsSchema,
		fmt.Sprintf("Give the %d keywords (single words or short phrases) that best say what this dialogue page is about.", pageKeywords),
		in.Page.Text(), &reply)
	terms := NormalizeKeywords(reply.Keywords)
	if err == nil && len(terms) == 0 {
		err = errors.New("no keywords")
	}
	if err != nil {
		return fallback(ctx, m, "keywords", err, func() ([]Keyword, error) { return Heuristic{}.PageKeywords(ctx, in) })
	}
	return Weigh(terms, in.Page.Text(), in.DF, in.N, pageKeywords), nil
}

// Digest asks for the segment's new summary and keywords.
func (m *LLMModel) Digest(ctx context.Context, in DigestInput) (string, []string, error) {
	var reply struct {
		Summary  string   `json:"summary"`
		Keywords []string `json:"keywords"`
	}
	err := m.ask(ctx, "digest", digestSchema,
		"You keep topic segments of a dialogue's mid-term memory. Update the segment's summary (at most three sentences) with the page that joined it, and give the segment's keywords.",
		fmt.Sprintf("Segment summary so far: %s\nSegment keywords so far: %s\n\nPage that joined:\n%s",
			orNone(in.Segment.Summary), orNone(strings.Join(in.Segment.Keywords, ", ")), in.Page.Text()), &reply)
	if err == nil && strings.TrimSpace(reply.Summary) == "" {
		err = errors.New("empty summary")
	}
	if err != nil {
		type digest struct {
			summary  string
			keywords []string
		}
		d, err := fallback(ctx, m, "digest", err, func() (digest, error) {
			s, k, err := Heuristic{}.Digest(ctx, in)
			return digest{s, k}, err
		})
		return d.summary, d.keywords, err
	}
	return Truncate(strings.TrimSpace(reply.Summary), summaryChars), NormalizeKeywords(reply.Keywords), nil
}

// Persona asks for what the promoted pages teach about the user and the
// agent. Statements name the page they came from; traits outside the
// configured dimensions and pages out of range are dropped.
func (m *LLMModel) Persona(ctx context.Context, in PersonaInput) (PersonaUpdate, error) {
	var pages strings.Builder
	for i, p := range in.Pages {
		fmt.Fprintf(&pages, "[page %d]\n%s\n", i+1, p.Text())
	}
	var dims strings.Builder
	for _, d := range in.Traits.Dims() {
		fmt.Fprintf(&dims, "%s (%s); ", d.Name, d.Group)
	}
	var reply struct {
		Profile []struct {
			Attribute string `json:"attribute"`
			Value     string `json:"value"`
		} `json:"profile"`
		Facts []struct {
			Text string `json:"text"`
			Page int    `json:"page"`
		} `json:"facts"`
		Traits []struct {
			Dimension string  `json:"dimension"`
			Level     float64 `json:"level"`
			Evidence  string  `json:"evidence"`
		} `json:"traits"`
		AgentTraits []struct {
			Text string `json:"text"`
			Page int    `json:"page"`
		} `json:"agent_traits"`
	}
	err := m.ask(ctx, "persona", personaSchema,
		"You keep the long-term personal memory of an assistant. From the dialogue pages, extract: the user's static profile attributes (name, gender, age, location, occupation, …; prefix the attribute with the speaker's name when there are several speakers); facts about the user, each one self-contained sentence in the third person naming the user; the user's traits among the given dimensions, each with a level from 0 to 1 and the sentence that shows it; and the assistant's own traits, recommendations and commitments. Give for each fact and agent trait the number of the page it came from.",
		fmt.Sprintf("Trait dimensions: %s\n\nPages:\n%s", dims.String(), pages.String()), &reply)
	if err != nil {
		return fallback(ctx, m, "persona", err, func() (PersonaUpdate, error) { return Heuristic{}.Persona(ctx, in) })
	}
	known := map[string]bool{}
	for _, d := range in.Traits.Dims() {
		known[d.Name] = true
	}
	source := func(page int, response bool) string {
		if page < 1 || page > len(in.Pages) {
			return ""
		}
		if response {
			return in.Pages[page-1].Page.R
		}
		return in.Pages[page-1].Page.Q
	}
	u := PersonaUpdate{Profile: map[string]string{}}
	for _, p := range reply.Profile {
		if a, v := strings.TrimSpace(p.Attribute), strings.TrimSpace(p.Value); a != "" && v != "" {
			u.Profile[a] = v
		}
	}
	for _, f := range reply.Facts {
		if t := strings.TrimSpace(f.Text); t != "" {
			u.Facts = append(u.Facts, Statement{Text: t, Source: source(f.Page, false)})
		}
	}
	for _, t := range reply.Traits {
		if known[t.Dimension] && !math.IsNaN(t.Level) {
			u.Traits = append(u.Traits, TraitObservation{Dimension: t.Dimension, Level: min(1, max(0, t.Level)), Evidence: strings.TrimSpace(t.Evidence)})
		}
	}
	for _, f := range reply.AgentTraits {
		if t := strings.TrimSpace(f.Text); t != "" {
			u.AgentTraits = append(u.AgentTraits, Statement{Text: t, Source: source(f.Page, true)})
		}
	}
	return u, nil
}

// ask makes one structured call and decodes the reply into out.
func (m *LLMModel) ask(ctx context.Context, name string, schema []byte, system, user string, out any) error {
	if m.unsupported.Load() {
		return llm.ErrUnsupported
	}
	maxTokens := m.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 1024
	}
	resp, err := m.LLM.Complete(ctx, llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: system + " Reply with one JSON object only."},
			{Role: llm.RoleUser, Content: user},
		},
		MaxTokens: maxTokens,
		Schema:    &llm.Schema{Name: "memoria_tiers_" + name, JSON: schema},
	})
	if errors.Is(err, llm.ErrUnsupported) {
		m.unsupported.Store(true)
	}
	if err != nil {
		return err
	}
	if resp.StopReason == llm.StopMaxTokens {
		return errors.New("reply cut at max tokens")
	}
	dec := json.NewDecoder(strings.NewReader(llm.Unfence(resp.Content)))
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("reply is not the schema's JSON: %w", err)
	}
	return nil
}

// fallback answers with the heuristic unless ctx is done.
func fallback[T any](ctx context.Context, m *LLMModel, op string, err error, heuristic func() (T, error)) (T, error) {
	if ctx.Err() != nil {
		var zero T
		return zero, ctx.Err()
	}
	if m.Fallback != nil {
		m.Fallback(op, err)
	}
	return heuristic()
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(none)"
	}
	return s
}

// JSON schemas of the replies (strict-mode friendly: every property
// required, no additional properties).
var (
	chainSchema = []byte(`{"type":"object","properties":{"linked":{"type":"boolean"},"summary":{"type":"string"}},"required":["linked","summary"],"additionalProperties":false}`)

	keywordsSchema = []byte(`{"type":"object","properties":{"keywords":{"type":"array","items":{"type":"string"}}},"required":["keywords"],"additionalProperties":false}`)

	digestSchema = []byte(`{"type":"object","properties":{"summary":{"type":"string"},"keywords":{"type":"array","items":{"type":"string"}}},"required":["summary","keywords"],"additionalProperties":false}`)

	personaSchema = []byte(`{"type":"object","properties":{` +
		`"profile":{"type":"array","items":{"type":"object","properties":{"attribute":{"type":"string"},"value":{"type":"string"}},"required":["attribute","value"],"additionalProperties":false}},` +
		`"facts":{"type":"array","items":{"type":"object","properties":{"text":{"type":"string"},"page":{"type":"integer"}},"required":["text","page"],"additionalProperties":false}},` +
		`"traits":{"type":"array","items":{"type":"object","properties":{"dimension":{"type":"string"},"level":{"type":"number"},"evidence":{"type":"string"}},"required":["dimension","level","evidence"],"additionalProperties":false}},` +
		`"agent_traits":{"type":"array","items":{"type":"object","properties":{"text":{"type":"string"},"page":{"type":"integer"}},"required":["text","page"],"additionalProperties":false}}` +
		`},"required":["profile","facts","traits","agent_traits"],"additionalProperties":false}`)
)
