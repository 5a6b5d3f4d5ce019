package eumas

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/messages"
)

// queue is an llm.LLM that answers each call with the next scripted reply
// and records the requests.
type queue struct {
	mu      sync.Mutex
	replies []string
	err     error
	reqs    []llm.Request
}

func (q *queue) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reqs = append(q.reqs, req)
	if q.err != nil {
		return llm.Response{}, q.err
	}
	if len(q.replies) == 0 {
		return llm.Response{}, llm.ErrEmptyRequest
	}
	r := q.replies[0]
	q.replies = q.replies[1:]
	return llm.Response{Content: r, Model: "scripted-1", StopReason: llm.StopEndTurn}, nil
}

func archetypes() []config.Archetype {
	return []config.Archetype{
		{Name: "ella", Focus: []string{"joy"}, Metrics: []config.Metric{
			{Name: "joy", Definition: "gladness", Cues: []string{"happy", "glad", "delighted"}},
			{Name: "grief", Definition: "sorrow", Cues: []string{"sad", "loss"}},
		}},
		{Name: "scout", Metrics: []config.Metric{
			{Name: "joy", Definition: "gladness", Cues: []string{"fun"}},
			{Name: "novelty", Definition: "newness", Cues: []string{"new", "first"}},
		}},
	}
}

// answer is a valid reply for the metrics given.
func answer(metrics map[string]float64, score, decay float64) string {
	m := map[string]any{}
	for k, v := range metrics {
		m[k] = map[string]any{"value": v, "justification": "because " + k}
	}
	b, _ := json.Marshal(map[string]any{
		"metrics":                m,
		"annotations":            map[string]string{"spoken": "s", "context": "c", "relationship_impact": "r", "identity": "i", "learning": "l", "future_directions": "f"},
		"priority":               map[string]any{"score": score, "factors": []string{"joy"}, "decay_rate": decay},
		"priority_justification": "it matters",
	})
	return string(b)
}

func TestHeuristicIsDeterministicAndCountsCues(t *testing.T) {
	h := NewHeuristic(archetypes())
	ctx := context.Background()
	e, err := h.Evaluate(ctx, Input{Text: "I was so happy and glad about the new puppy, my first!", Kind: "fact"})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := h.Evaluate(ctx, Input{Text: "I was so happy and glad about the new puppy, my first!", Kind: "fact"})
	if a, b := Aggregate(e), Aggregate(again); a.String() != b.String() {
		t.Fatalf("not deterministic:\n%v\n%v", a, b)
	}
	ella := e.Archetypes[0]
	if got := ella.Metrics["joy"]; got != round3(1-math.Exp(-1.4)) { // happy, glad
		t.Errorf("ella joy = %v", got)
	}
	if got := ella.Metrics["grief"]; got != 0 {
		t.Errorf("ella grief = %v", got)
	}
	if got := ella.Justifications["joy"]; got != "cues: happy, glad" {
		t.Errorf("justification = %q", got)
	}
	if p := ella.Priority; p.Score != ella.Metrics["joy"] || p.DecayRate != round3(1-p.Score) || len(p.Factors) != 1 {
		t.Errorf("priority = %v", p)
	}
	scout := e.Archetypes[1]
	if got := scout.Metrics["novelty"]; got != round3(1-math.Exp(-1.4)) { // new, first
		t.Errorf("scout novelty = %v", got)
	}
	agg := Aggregate(e)
	if want := round3((ella.Metrics["joy"] + scout.Metrics["joy"]) / 2); agg.Metrics["joy"] != want {
		t.Errorf("aggregate joy = %v, want the mean %v", agg.Metrics["joy"], want)
	}
	if agg.Failed || agg.Priority.Score <= 0 {
		t.Errorf("aggregate = %v", agg)
	}
}

func TestProfileIsUnitAndNilWithoutSignal(t *testing.T) {
	names := []string{"a", "b", "c"}
	p := Profile(&messages.EvalSummary{Metrics: map[string]float64{"a": 0.3, "c": 0.4}}, names)
	if len(p) != 3 || math.Abs(float64(p[0])-0.6) > 1e-6 || p[1] != 0 || math.Abs(float64(p[2])-0.8) > 1e-6 {
		t.Errorf("profile = %v", p)
	}
	if p := Profile(&messages.EvalSummary{Metrics: map[string]float64{"a": 0}}, names); p != nil {
		t.Errorf("zero profile = %v, want nil", p)
	}
	if p := Profile(&messages.EvalSummary{Failed: true}, names); p != nil {
		t.Errorf("failed profile = %v, want nil", p)
	}
	if got := DecayMultiplier(nil); got != 1 {
		t.Errorf("unevaluated decay multiplier = %v", got)
	}
	if got := DecayMultiplier(&messages.EvalSummary{Priority: &messages.Priority{DecayRate: 0}}); got != 0.5 {
		t.Errorf("decay_rate 0 multiplier = %v", got)
	}
}

func TestLLMEvaluatorValidatesAndRetriesOnce(t *testing.T) {
	ctx := context.Background()
	good := answer(map[string]float64{"joy": 0.9, "grief": 0.1}, 0.8, 0.2)
	for _, tc := range []struct {
		name    string
		replies []string
		failed  string // the failure recorded for ella, "" when she answered
	}{
		{"valid", []string{good}, ""},
		{"fenced", []string{"```json\n" + good + "\n```"}, ""},
		{"malformed then valid", []string{"{not json", good}, ""},
		{"out of range twice", []string{answer(map[string]float64{"joy": 1.5, "grief": 0.1}, 0.8, 0.2), answer(map[string]float64{"joy": 0.9, "grief": -0.1}, 0.8, 0.2)}, "grief is -0.1, outside 0..1"},
		{"missing metric twice", []string{answer(map[string]float64{"joy": 0.9}, 0.8, 0.2), answer(map[string]float64{"joy": 0.9}, 0.8, 0.2)}, "metric grief is missing"},
		{"unknown metric twice", []string{answer(map[string]float64{"joy": 0.9, "grief": 0.1, "rage": 1}, 0.8, 0.2), answer(map[string]float64{"joy": 0.9, "grief": 0.1, "rage": 1}, 0.8, 0.2)}, "rage is not one of"},
		{"priority out of range twice", []string{answer(map[string]float64{"joy": 0.9, "grief": 0.1}, 2, 0.2), answer(map[string]float64{"joy": 0.9, "grief": 0.1}, 0.8, 7)}, "decay_rate 7"},
		{"extra field twice", []string{`{"metrics":{},"mood":1}`, `{"metrics":{},"mood":1}`}, "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &queue{replies: tc.replies}
			var heard []string
			e := NewLLM(q, archetypes()[:1], 0, func() int64 { return 42 })
			e.Failed = func(a string, err error) { heard = append(heard, a) }
			ev, err := e.Evaluate(ctx, Input{Text: "a happy day", Kind: "fact"})
			if err != nil {
				t.Fatal(err)
			}
			if ev.EvaluatedAt != 42 {
				t.Errorf("evaluated_at = %d", ev.EvaluatedAt)
			}
			if tc.failed == "" {
				if len(ev.Archetypes) != 1 || len(ev.Failures) != 0 {
					t.Fatalf("evaluation = %v", ev)
				}
				a := ev.Archetypes[0]
				if a.Metrics["joy"] != 0.9 || a.Justifications["grief"] != "because grief" || a.Priority.Score != 0.8 || a.Annotations.Learning != "l" || ev.Evaluator != "scripted-1" {
					t.Errorf("archetype evaluation = %v", a)
				}
				return
			}
			if len(ev.Archetypes) != 0 || len(ev.Failures) != 1 || !strings.Contains(ev.Failures[0].Error, tc.failed) {
				t.Fatalf("evaluation = %v, want one failure containing %q", ev, tc.failed)
			}
			if len(q.reqs) != 2 {
				t.Errorf("asked %d times, want 2", len(q.reqs))
			}
			if last := q.reqs[1].Messages[len(q.reqs[1].Messages)-1].Content; !strings.Contains(last, "invalid") {
				t.Errorf("the retry does not say what was wrong: %q", last)
			}
			if len(heard) != 1 || heard[0] != "ella" {
				t.Errorf("Failed heard %v", heard)
			}
			if s := Aggregate(ev); !s.Failed || len(s.Metrics) != 0 {
				t.Errorf("aggregate of a failed evaluation = %v", s)
			}
		})
	}
}

func TestLLMEvaluatorSchemaAndPrompt(t *testing.T) {
	q := &queue{replies: []string{answer(map[string]float64{"joy": 0.5, "grief": 0.5}, 0.5, 0.5)}}
	if _, err := NewLLM(q, archetypes()[:1], 0, nil).Evaluate(context.Background(), Input{Text: "x", Kind: "note"}); err != nil {
		t.Fatal(err)
	}
	req := q.reqs[0]
	var s struct {
		Required   []string
		Properties struct {
			Metrics struct{ Required []string }
		}
	}
	if err := json.Unmarshal(req.Schema.JSON, &s); err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Required, ",") != "annotations,metrics,priority,priority_justification" || strings.Join(s.Properties.Metrics.Required, ",") != "grief,joy" {
		t.Errorf("schema = %s", req.Schema.JSON)
	}
	if sys := req.Messages[0].Content; !strings.Contains(sys, "You are ella") || !strings.Contains(sys, "- joy: gladness") {
		t.Errorf("system prompt = %q", sys)
	}
	if user := req.Messages[1].Content; user != "Memory to evaluate (kind: note):\nx" {
		t.Errorf("user prompt = %q", user)
	}
}

func TestLLMEvaluatorFallsBackWithoutStructuredOutput(t *testing.T) {
	q := &queue{err: llm.ErrUnsupported}
	e := NewLLM(q, archetypes(), 0, nil)
	for range 2 {
		ev, err := e.Evaluate(context.Background(), Input{Text: "so happy"})
		if err != nil {
			t.Fatal(err)
		}
		if ev.Evaluator != HeuristicName || len(ev.Archetypes) != 2 || ev.Archetypes[0].Metrics["joy"] == 0 {
			t.Fatalf("evaluation = %v", ev)
		}
	}
	if len(q.reqs) != 1 {
		t.Errorf("the model was asked %d times; ErrUnsupported should be remembered", len(q.reqs))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewLLM(&queue{}, archetypes(), 0, nil).Evaluate(ctx, Input{Text: "x"}); err == nil {
		t.Error("a cancelled evaluation returned no error")
	}
}

// The offline model really has no structured output: the heuristic answers.
func TestLLMEvaluatorWithOfflineModel(t *testing.T) {
	ev, err := NewLLM(llm.NewOffline(), archetypes(), 0, nil).Evaluate(context.Background(), Input{Text: "a new and fun thing"})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Evaluator != HeuristicName || Aggregate(ev).Metrics["novelty"] == 0 {
		t.Errorf("evaluation = %v", ev)
	}
}
