package prompt

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

// promptFixture is a step's recall and tiers: three recalled memories (one
// of them also on a short-term page), two short-term pages, a mid-term
// page and a persona.
func promptFixture(t *testing.T) ([]*recall.Recalled, *tiers.Recall) {
	const day = int64(86400)
	t0 := int64(1_700_000_000)
	mem := func(m *model.Memory, score float64) *recall.Recalled {
		c, _, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return &recall.Recalled{CID: c, Memory: m, Meta: &messages.MemoryMeta{}, Score: score}
	}
	caroline := mem(TextMemory("I went to an LGBTQ support group yesterday.", "Caroline", t0, nil), 0.9)
	mel := mem(ResponseMemory("Mel", llm.Response{Content: "That sounds brave. How did it feel?"}, t0+60, nil), 0.5)
	note := mem(TextMemory("Caroline paints on Sundays.", "", t0+day, nil), 0.2)
	latest := mem(TextMemory("I am thinking about adoption agencies.", "Caroline", t0+3*day, nil), 0.6)
	reply := mem(ResponseMemory("Mel", llm.Response{Content: "Which agencies have you looked at?"}, t0+3*day+30, nil), 0)
	page := func(seq uint64, q, r *recall.Recalled) tiers.PageText {
		return tiers.PageText{
			Page:  &messages.Page{Seq: seq, Q: q.CID.String(), R: r.CID.String(), T: *r.Memory.Timestamp},
			QName: model.Speaker(q.Memory), Q: model.Said(q.Memory), RName: model.Speaker(r.Memory), R: model.Said(r.Memory), RSelf: r.Memory.Data.Self != nil,
		}
	}
	older := mem(TextMemory("My friend Tom moved to Sweden.", "Caroline", t0-30*day, nil), 0)
	olderReply := mem(ResponseMemory("Mel", llm.Response{Content: "Do you miss him?"}, t0-30*day+20, nil), 0)
	tr := &tiers.Recall{
		STM: []tiers.PageText{page(7, caroline, mel), page(8, latest, reply)},
		MTM: []tiers.RecalledPage{{PageText: page(1, older, olderReply), Segment: 1, Score: 0.7}},
		Persona: &tiers.Persona{
			User: tiers.UserPersona{
				Profile: map[string]string{"Caroline.location": "Sweden", "Caroline.gender": "woman"},
				Knowledge: []*tiers.Fact{
					{Text: "Caroline goes to an LGBTQ support group."},
					{Text: "Caroline wants to adopt children."},
				},
				Traits: []*tiers.Trait{{Dimension: "need for belonging", Level: 0.4375}},
			},
			Agent: tiers.AgentPersona{
				Profile: map[string]string{"role": "a supportive friend"},
				Traits:  []*tiers.Fact{{Text: "Mel suggests talking to other adoptive parents."}},
			},
		},
	}
	return []*recall.Recalled{caroline, mel, note}, tr
}

// TestPromptGolden renders prompts from testdata/prompt: with and without
// tiers, and cut to context budgets; regenerate with
// `go test ./memory/prompt -run TestPromptGolden -rewrite`.
func TestPromptGolden(t *testing.T) {
	recalled, tr := promptFixture(t)
	datadriven.RunTest(t, "testdata/prompt", func(t *testing.T, d *datadriven.TestData) string {
		in := Input{SonaName: "Mel", Recalled: recalled, Input: "Which agency did I pick?", InputName: "Caroline", MaxTokens: 100}
		for _, a := range d.CmdArgs {
			switch a.Key {
			case "tiers":
				in.Tiers = tr
			case "context_tokens":
				n, err := strconv.Atoi(a.Vals[0])
				if err != nil {
					d.Fatalf(t, "context_tokens: %v", err)
				}
				in.ContextTokens = n
			default:
				d.Fatalf(t, "unknown argument %s", a.Key)
			}
		}
		req := Build(in)
		var b strings.Builder
		fmt.Fprintf(&b, "tokens≈%d\n", EstimateTokens(req.Messages))
		for _, m := range req.Messages {
			name := ""
			if m.Name != "" {
				name = "(" + m.Name + ")"
			}
			fmt.Fprintf(&b, "%s%s: %s\n", m.Role, name, m.Content)
		}
		return b.String()
	})
}

func TestPromptNeverDropsTheInputAndIsDeterministic(t *testing.T) {
	recalled, tr := promptFixture(t)
	in := Input{SonaName: "Mel", Recalled: recalled, Tiers: tr, Input: strings.Repeat("long input ", 200), MaxTokens: 100, ContextTokens: 150}
	persona := tr.Persona.Clone()
	a, b := Build(in), Build(in)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("the same input built two prompts")
	}
	last := a.Messages[len(a.Messages)-1]
	if last.Content != in.Input || len(a.Messages) != 2 {
		t.Fatalf("over budget the prompt is the system message and the input, got %d messages", len(a.Messages))
	}
	// The fixture was not changed by cutting.
	if len(tr.Persona.User.Knowledge) != 2 || len(tr.STM) != 2 || !reflect.DeepEqual(tr.Persona, persona) {
		t.Fatal("Build modified its input")
	}
}

// fit counts each piece once and takes it off as it goes: at every
// budget, it drops what dropping pieces one by one and counting the whole
// prompt again each time drops.
func TestFitDropsWhatCountingTheWholePromptDrops(t *testing.T) {
	recalled, tr := promptFixture(t)
	whole := func(in Input) []llm.Message {
		p := newPromptParts(in)
		budget := in.ContextTokens - in.MaxTokens
		over := func() bool { return EstimateTokens(p.messages()) > budget }
		for over() && len(p.recalled) > 0 {
			worst := 0
			for i, r := range p.recalled {
				if r.Score < p.recalled[worst].Score {
					worst = i
				}
			}
			p.recalled = slices.Delete(p.recalled, worst, worst+1)
		}
		for over() && len(p.mtm) > 0 {
			p.mtm = p.mtm[:len(p.mtm)-1]
		}
		for over() && (len(p.persona.User.Knowledge) > 0 || len(p.persona.Agent.Traits) > 0) {
			if u := &p.persona.User; len(u.Knowledge) >= len(p.persona.Agent.Traits) {
				u.Knowledge = u.Knowledge[:len(u.Knowledge)-1]
			} else {
				p.persona.Agent.Traits = p.persona.Agent.Traits[:len(p.persona.Agent.Traits)-1]
			}
		}
		for over() && len(p.stm) > 0 {
			p.stm = p.stm[1:]
		}
		return p.messages()
	}
	in := Input{SonaName: "Mel", Recalled: recalled, Tiers: tr, Input: "Which agency did I pick?", InputName: "Caroline", MaxTokens: 100}
	full := EstimateTokens(Build(in).Messages)
	shapes := map[int]bool{}
	for budget := 0; budget <= full+1; budget++ {
		in.ContextTokens = in.MaxTokens + budget
		got, want := Build(in).Messages, whole(in)
		if !slices.Equal(got, want) {
			t.Fatalf("budget %d: %d messages, want %d:\n%v\nwant\n%v", budget, len(got), len(want), got, want)
		}
		shapes[len(got)] = true
	}
	if len(shapes) < 4 {
		t.Fatalf("the budgets cut the prompt to %d lengths only", len(shapes))
	}
}
