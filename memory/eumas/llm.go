package eumas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/messages"
)

// LLM evaluates with a language model: one JSON-schema'd call per
// archetype. A reply that does not fit — not the schema's JSON, a metric
// missing, unknown or outside 0..1, an empty justification, a priority out
// of range — or a failed call is asked once more, telling the model what
// was wrong; a second failure is recorded in Evaluation.Failures and
// nothing of that archetype is kept. A model without structured output
// (llm.ErrUnsupported, remembered) hands the whole evaluation to the
// heuristic.
type LLM struct {
	llm        llm.LLM
	archetypes []archetypePrompt
	heuristic  *Heuristic
	maxTokens  int
	clock      func() int64
	// Failed, when set, hears every archetype that failed twice.
	Failed func(archetype string, err error)

	unsupported atomic.Bool
}

type archetypePrompt struct {
	config.Archetype
	system string
	schema []byte
}

// NewLLM prepares the archetypes' prompts and schemas. maxTokens caps
// each reply (0: 1024); now stamps the evaluations (unix seconds).
func NewLLM(model llm.LLM, as []config.Archetype, maxTokens int, now func() int64) *LLM {
	if maxTokens <= 0 {
		maxTokens = 1024
	}
	e := &LLM{llm: model, heuristic: NewHeuristic(as), maxTokens: maxTokens, clock: now}
	for _, a := range as {
		e.archetypes = append(e.archetypes, archetypePrompt{Archetype: a, system: systemPrompt(a), schema: schema(a)})
	}
	return e
}

// Evaluate implements Evaluator.
func (e *LLM) Evaluate(ctx context.Context, in Input) (*messages.Evaluation, error) {
	if e.unsupported.Load() {
		return e.heuristic.Evaluate(ctx, in)
	}
	out := &messages.Evaluation{}
	for i := range e.archetypes {
		a := &e.archetypes[i]
		ev, model, err := e.ask(ctx, a, in)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, llm.ErrUnsupported):
			e.unsupported.Store(true)
			return e.heuristic.Evaluate(ctx, in)
		case err != nil:
			out.Failures = append(out.Failures, &messages.EvalFailure{Archetype: a.Name, Error: err.Error()})
			if e.Failed != nil {
				e.Failed(a.Name, err)
			}
		default:
			out.Archetypes = append(out.Archetypes, ev)
			out.Evaluator = model
		}
	}
	if e.clock != nil {
		out.EvaluatedAt = e.clock()
	}
	return out, nil
}

// ask gets one archetype's evaluation, asking twice at most.
func (e *LLM) ask(ctx context.Context, a *archetypePrompt, in Input) (*messages.ArchetypeEvaluation, string, error) {
	user := "Memory to evaluate"
	if in.Kind != "" {
		user += " (kind: " + in.Kind + ")"
	}
	user += ":\n" + in.Text
	msgs := []llm.Message{{Role: llm.RoleSystem, Content: a.system}, {Role: llm.RoleUser, Content: user}}
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		var resp llm.Response
		resp, err = e.llm.Complete(ctx, llm.Request{
			Messages:  msgs,
			MaxTokens: e.maxTokens,
			Schema:    &llm.Schema{Name: "memoria_eumas_evaluation", JSON: a.schema},
		})
		if errors.Is(err, llm.ErrUnsupported) || ctx.Err() != nil {
			return nil, "", err
		}
		if err == nil {
			var ev *messages.ArchetypeEvaluation
			if ev, err = parse(a.Archetype, resp); err == nil {
				return ev, resp.Model, nil
			}
			msgs = append(msgs,
				llm.Message{Role: llm.RoleAssistant, Content: resp.Content},
				llm.Message{Role: llm.RoleUser, Content: "That reply is invalid: " + err.Error() + ". Reply again with one JSON object that follows the schema."})
		}
	}
	return nil, "", err
}

// reply is the schema's JSON.
type reply struct {
	Metrics map[string]struct {
		Value         *float64 `json:"value"`
		Justification string   `json:"justification"`
	} `json:"metrics"`
	Annotations *struct {
		Spoken             string `json:"spoken"`
		Context            string `json:"context"`
		RelationshipImpact string `json:"relationship_impact"`
		Identity           string `json:"identity"`
		Learning           string `json:"learning"`
		FutureDirections   string `json:"future_directions"`
	} `json:"annotations"`
	Priority *struct {
		Score     *float64 `json:"score"`
		Factors   []string `json:"factors"`
		DecayRate *float64 `json:"decay_rate"`
	} `json:"priority"`
	PriorityJustification string `json:"priority_justification"`
}

// parse validates a reply against the archetype's metrics.
func parse(a config.Archetype, resp llm.Response) (*messages.ArchetypeEvaluation, error) {
	if resp.StopReason == llm.StopMaxTokens {
		return nil, errors.New("reply cut at max tokens")
	}
	var r reply
	dec := json.NewDecoder(strings.NewReader(llm.Unfence(resp.Content)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("not the schema's JSON: %v", err)
	}
	ev := &messages.ArchetypeEvaluation{
		Archetype:             a.Name,
		Metrics:               make(map[string]float64, len(a.Metrics)),
		Justifications:        make(map[string]string, len(a.Metrics)),
		PriorityJustification: strings.TrimSpace(r.PriorityJustification),
	}
	for _, m := range a.Metrics {
		got, ok := r.Metrics[m.Name]
		switch {
		case !ok || got.Value == nil:
			return nil, fmt.Errorf("metric %s is missing", m.Name)
		case !unit(*got.Value):
			return nil, fmt.Errorf("metric %s is %v, outside 0..1", m.Name, *got.Value)
		case strings.TrimSpace(got.Justification) == "":
			return nil, fmt.Errorf("metric %s has no justification", m.Name)
		}
		ev.Metrics[m.Name] = *got.Value
		ev.Justifications[m.Name] = strings.TrimSpace(got.Justification)
	}
	if len(r.Metrics) != len(a.Metrics) {
		for k := range r.Metrics {
			if _, ok := ev.Metrics[k]; !ok {
				return nil, fmt.Errorf("metric %s is not one of the archetype's", k)
			}
		}
	}
	p := r.Priority
	switch {
	case p == nil || p.Score == nil || p.DecayRate == nil:
		return nil, errors.New("priority needs score and decay_rate")
	case !unit(*p.Score):
		return nil, fmt.Errorf("priority score %v is outside 0..1", *p.Score)
	case !unit(*p.DecayRate):
		return nil, fmt.Errorf("priority decay_rate %v is outside 0..1", *p.DecayRate)
	case r.Annotations == nil:
		return nil, errors.New("annotations are missing")
	}
	ev.Priority = &messages.Priority{Score: *p.Score, DecayRate: *p.DecayRate}
	for _, f := range p.Factors {
		if f = strings.TrimSpace(f); f != "" {
			ev.Priority.Factors = append(ev.Priority.Factors, f)
		}
	}
	an := r.Annotations
	ev.Annotations = &messages.Annotations{Spoken: an.Spoken, Context: an.Context, RelationshipImpact: an.RelationshipImpact,
		Identity: an.Identity, Learning: an.Learning, FutureDirections: an.FutureDirections}
	return ev, nil
}

func unit(v float64) bool { return !math.IsNaN(v) && v >= 0 && v <= 1 }

func systemPrompt(a config.Archetype) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are %s. %s\nYou evaluate a new memory of an AI agent. ", a.Name, strings.TrimSpace(a.Personality))
	b.WriteString("For each metric give a value from 0 to 1 and a one-sentence justification. ")
	b.WriteString("Annotate the memory: a spoken reflection, its context, its impact on relationships, what it says about identity, what it teaches, and directions to explore. ")
	b.WriteString("Give its priority: a score from 0 to 1, the factors behind it, and a decay_rate from 0 (it should fade slowest) to 1 (fastest), with a justification.")
	if len(a.Focus) > 0 {
		fmt.Fprintf(&b, " Your priority weighs above all: %s.", strings.Join(a.Focus, ", "))
	}
	b.WriteString("\nMetrics:\n")
	for _, m := range a.Metrics {
		fmt.Fprintf(&b, "- %s: %s\n", m.Name, m.Definition)
	}
	b.WriteString("Reply with one JSON object only.")
	return b.String()
}

// schema is the archetype's reply schema (strict-mode friendly: every
// property required, no additional properties).
func schema(a config.Archetype) []byte {
	obj := func(props map[string]any) map[string]any {
		req := make([]string, 0, len(props))
		for k := range props {
			req = append(req, k)
		}
		slices.Sort(req)
		return map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}
	}
	str := map[string]any{"type": "string"}
	num := map[string]any{"type": "number", "minimum": 0, "maximum": 1}
	metrics := map[string]any{}
	for _, m := range a.Metrics {
		metrics[m.Name] = obj(map[string]any{"value": num, "justification": str})
	}
	s := obj(map[string]any{
		"metrics": obj(metrics),
		"annotations": obj(map[string]any{"spoken": str, "context": str, "relationship_impact": str,
			"identity": str, "learning": str, "future_directions": str}),
		"priority":               obj(map[string]any{"score": num, "factors": map[string]any{"type": "array", "items": str}, "decay_rate": num}),
		"priority_justification": str,
	})
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return b
}
