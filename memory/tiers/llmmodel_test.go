package tiers

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/messages"
)

// scripted is an llm.LLM that answers each structured request with the
// reply scripted for its schema name, and records the requests.
type scripted struct {
	mu      sync.Mutex
	replies map[string]string // by schema name
	err     error
	reqs    []llm.Request
}

func (s *scripted) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	if s.err != nil {
		return llm.Response{}, s.err
	}
	if req.Schema == nil {
		return llm.Response{}, errors.New("unstructured request")
	}
	return llm.Response{Content: s.replies[req.Schema.Name], Model: "scripted", StopReason: llm.StopEndTurn}, nil
}

func dialogue(seq uint64, q, r string) PageText {
	return PageText{Page: &messages.Page{Seq: seq, Q: "q" + string(rune('0'+seq)), R: "r" + string(rune('0'+seq))}, QName: "Caroline", Q: q, RName: "Mel", R: r}
}

func noDF(string) uint64 { return 0 }

func TestLLMModelUsesStructuredReplies(t *testing.T) {
	ctx := context.Background()
	fake := &scripted{replies: map[string]string{
		"memoria_tiers_chain":    `{"linked": true, "summary": "Caroline and Mel talk about Caroline's garden."}`,
		"memoria_tiers_keywords": "```json\n{\"keywords\": [\"Gardening\", \"tomatoes\"]}\n```",
		"memoria_tiers_digest":   `{"summary": "Garden talk.", "keywords": ["garden", "Tomato plants"]}`,
		"memoria_tiers_persona": `{"profile": [{"attribute": "Caroline.location", "value": "Lisbon"}],
			"facts": [{"text": "Caroline grows tomatoes.", "page": 2}, {"text": "  ", "page": 1}],
			"traits": [{"dimension": "gardening", "level": 1.7, "evidence": "grows tomatoes"}, {"dimension": "no such trait", "level": 1, "evidence": "x"}],
			"agent_traits": [{"text": "Mel suggests compost.", "page": 9}]}`,
	}}
	m := &LLMModel{LLM: fake, Fallback: func(op string, err error) { t.Errorf("fell back on %s: %v", op, err) }}
	p1 := dialogue(1, "I planted tomatoes.", "Nice!")
	p2 := dialogue(2, "The tomatoes are red now, my best tomatoes ever.", "Lovely.")

	mc, err := m.Chain(ctx, ChainInput{Prev: []PageText{p1}, Page: p2, Similarity: 0, Threshold: 1})
	if err != nil || !mc.Linked || mc.Start != 1 || mc.Summary != "Caroline and Mel talk about Caroline's garden." {
		t.Fatalf("chain %v %v", mc, err)
	}
	// Linking needs a previous page, whatever the model says.
	if mc, _ := m.Chain(ctx, ChainInput{Page: p1}); mc.Linked || mc.Start != 1 {
		t.Fatalf("first page linked: %v", mc)
	}
	ks, err := m.PageKeywords(ctx, KeywordInput{Page: p2, DF: noDF, N: 3})
	if err != nil || strings.Join(Terms(ks), ",") != "tomato,garden" {
		t.Fatalf("keywords %v %v (the term the page contains weighs more)", ks, err)
	}
	summary, kw, err := m.Digest(ctx, DigestInput{Segment: &Segment{Summary: "old"}, Page: p2})
	if err != nil || summary != "Garden talk." || strings.Join(kw, ",") != "garden,tomato,plant" {
		t.Fatalf("digest %q %v %v", summary, kw, err)
	}
	dims := []config.TraitDimension{{Name: "gardening", Group: "content interests"}}
	u, err := m.Persona(ctx, PersonaInput{Pages: []PageText{p1, p2}, Traits: NewTraits(dims)})
	if err != nil {
		t.Fatal(err)
	}
	if u.Profile["Caroline.location"] != "Lisbon" || len(u.Facts) != 1 || u.Facts[0].Source != "q2" ||
		len(u.Traits) != 1 || u.Traits[0].Level != 1 || len(u.AgentTraits) != 1 || u.AgentTraits[0].Source != "" {
		t.Fatalf("persona %+v", u)
	}
	// Every request carried its schema, and the schemas are valid JSON.
	for _, r := range fake.reqs {
		if r.Schema == nil || !json.Valid(r.Schema.JSON) || r.Messages[0].Role != llm.RoleSystem {
			t.Fatalf("request %+v", r)
		}
	}
}

func TestLLMModelFallsBackToHeuristic(t *testing.T) {
	ctx := context.Background()
	p1 := dialogue(1, "I love hiking in the mountains every weekend.", "Sounds fun.")
	p2 := dialogue(2, "My favourite trail is near Sintra.", "Nice.")
	check := func(t *testing.T, m *LLMModel) {
		t.Helper()
		got, err := m.Chain(ctx, ChainInput{Prev: []PageText{p1}, Page: p2, Similarity: 0.9, Threshold: 0.5})
		want, _ := Heuristic{}.Chain(ctx, ChainInput{Prev: []PageText{p1}, Page: p2, Similarity: 0.9, Threshold: 0.5})
		if err != nil || got.String() != want.String() {
			t.Fatalf("chain %v, heuristic %v (%v)", got, want, err)
		}
		gu, _ := m.Persona(ctx, PersonaInput{Pages: []PageText{p1, p2}})
		wu, _ := Heuristic{}.Persona(ctx, PersonaInput{Pages: []PageText{p1, p2}})
		if len(gu.Facts) == 0 || len(gu.Facts) != len(wu.Facts) {
			t.Fatalf("persona %+v, heuristic %+v", gu, wu)
		}
	}
	t.Run("bad json", func(t *testing.T) {
		var ops []string
		fake := &scripted{replies: map[string]string{"memoria_tiers_chain": `{"linked": tru`, "memoria_tiers_persona": `[]`}}
		m := &LLMModel{LLM: fake, Fallback: func(op string, _ error) { ops = append(ops, op) }}
		check(t, m)
		if strings.Join(ops, ",") != "chain,persona" {
			t.Fatalf("fallbacks %v", ops)
		}
	})
	t.Run("unsupported is remembered", func(t *testing.T) {
		fake := &scripted{err: llm.ErrUnsupported}
		m := &LLMModel{LLM: fake}
		check(t, m)
		if len(fake.reqs) != 1 {
			t.Fatalf("%d requests to a model without structured output", len(fake.reqs))
		}
	})
	t.Run("the offline model", func(t *testing.T) {
		check(t, &LLMModel{LLM: llm.NewOffline()})
	})
	t.Run("cancelled", func(t *testing.T) {
		c, cancel := context.WithCancel(ctx)
		cancel()
		m := &LLMModel{LLM: &scripted{err: context.Canceled}}
		if _, err := m.Chain(c, ChainInput{Page: p1}); !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
	})
}
