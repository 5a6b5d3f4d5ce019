package eumas

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/messages"
)

// Heuristic evaluates offline and deterministically: a metric rises with
// the number of its cue words in the text, 1 − e^(−0.7·hits) (one cue
// 0.50, two 0.75, three 0.88); an archetype's priority is the chance that
// any of its focus metrics holds, 1 − Π(1 − v), and its decay rate is
// 1 − priority. Justifications name the cues found.
type Heuristic struct {
	archetypes []heuristicArchetype
}

type heuristicArchetype struct {
	config.Archetype
	cues  map[string][]string // stem → metrics it shows
	words map[string]string   // stem → the cue as configured
}

// NewHeuristic prepares the archetypes' cue indexes.
func NewHeuristic(as []config.Archetype) *Heuristic {
	h := &Heuristic{}
	for _, a := range as {
		ha := heuristicArchetype{Archetype: a, cues: map[string][]string{}, words: map[string]string{}}
		for _, m := range a.Metrics {
			for _, c := range m.Cues {
				for _, t := range llm.Tokenize(c) {
					if !slices.Contains(ha.cues[t], m.Name) {
						ha.cues[t] = append(ha.cues[t], m.Name)
					}
					if _, ok := ha.words[t]; !ok {
						ha.words[t] = c
					}
				}
			}
		}
		h.archetypes = append(h.archetypes, ha)
	}
	return h
}

// HeuristicName marks the evaluations the heuristic made.
const HeuristicName = "heuristic"

// Evaluate implements Evaluator.
func (h *Heuristic) Evaluate(ctx context.Context, in Input) (*messages.Evaluation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tokens := llm.Tokenize(in.Text)
	e := &messages.Evaluation{Evaluator: HeuristicName}
	for _, a := range h.archetypes {
		e.Archetypes = append(e.Archetypes, a.evaluate(in, tokens))
	}
	return e, nil
}

func (a *heuristicArchetype) evaluate(in Input, tokens []string) *messages.ArchetypeEvaluation {
	hits := map[string][]string{}
	for _, t := range tokens {
		for _, m := range a.cues[t] {
			if w := a.words[t]; !slices.Contains(hits[m], w) {
				hits[m] = append(hits[m], w)
			}
		}
	}
	ev := &messages.ArchetypeEvaluation{
		Archetype:      a.Name,
		Metrics:        make(map[string]float64, len(a.Metrics)),
		Justifications: make(map[string]string, len(a.Metrics)),
	}
	for _, m := range a.Metrics {
		found := hits[m.Name]
		ev.Metrics[m.Name] = round3(1 - math.Exp(-0.7*float64(len(found))))
		if len(found) == 0 {
			ev.Justifications[m.Name] = "no cue of it in the text"
		} else {
			ev.Justifications[m.Name] = "cues: " + strings.Join(found, ", ")
		}
	}
	focus := a.Focus
	if len(focus) == 0 {
		for _, m := range a.Metrics {
			focus = append(focus, m.Name)
		}
	}
	miss := 1.0
	var factors []string
	for _, f := range focus {
		v := ev.Metrics[f]
		miss *= 1 - v
		if v > 0 {
			factors = append(factors, f)
		}
	}
	slices.SortStableFunc(factors, func(x, y string) int {
		if ev.Metrics[x] != ev.Metrics[y] {
			if ev.Metrics[x] > ev.Metrics[y] {
				return -1
			}
			return 1
		}
		return 0
	})
	score := round3(1 - miss)
	ev.Priority = &messages.Priority{Score: score, Factors: factors, DecayRate: round3(1 - score)}
	if len(factors) == 0 {
		ev.PriorityJustification = "none of its focus metrics shows"
	} else {
		ev.PriorityJustification = "shows " + strings.Join(factors, ", ")
	}
	ev.Annotations = &messages.Annotations{Spoken: spoken(a.Name, factors, in.Text)}
	if in.Kind != "" {
		ev.Annotations.Context = "a " + in.Kind + " memory"
	}
	return ev
}

// spoken is the heuristic's one-line reflection.
func spoken(archetype string, factors []string, text string) string {
	first := text
	if ss := llm.Sentences(text); len(ss) > 0 {
		first = ss[0]
	}
	if r := []rune(first); len(r) > 120 {
		first = string(r[:120]) + "…"
	}
	if len(factors) == 0 {
		return fmt.Sprintf("%s notes nothing that stands out in %q", archetype, first)
	}
	return fmt.Sprintf("%s notes %s in %q", archetype, strings.ReplaceAll(strings.Join(factors, ", "), "_", " "), first)
}
