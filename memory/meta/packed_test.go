package meta

import (
	"math"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/messages"
)

// The packed field's number is none of MemoryMeta's, and memory.proto
// reserves it.
func TestPackedFieldIsFree(t *testing.T) {
	d := (&messages.MemoryMeta{}).ProtoReflect().Descriptor()
	if f := d.Fields().ByNumber(PackedField); f != nil {
		t.Fatalf("field %d is MemoryMeta's %s: the packed metrics need another number", PackedField, f.Name())
	}
	if !d.ReservedRanges().Has(PackedField) {
		t.Fatalf("memory.proto does not reserve field %d for the packed metrics", PackedField)
	}
}

// A number, once given, names its metric for good: stores written since
// hold it. New metrics are appended.
func TestPackedMetricsAreStable(t *testing.T) {
	given := []string{"curiosity_trigger", "emotional_clarity", "emotional_depth", "empathy_level",
		"exploration_value", "growth_potential", "internal_emotional_state", "novelty_factor",
		"ontological_insight", "philosophical_depth", "self_coherence"}
	if len(PackedMetrics) < len(given) || !slices.Equal(PackedMetrics[:len(given)], given) {
		t.Fatalf("PackedMetrics %v no longer begins with %v", PackedMetrics, given)
	}
}

// Every metric of the default archetypes has a number: their records are
// packed.
func TestPackedMetricsCoverTheDefaults(t *testing.T) {
	for _, a := range config.Default().Evaluation.Archetypes {
		for _, m := range a.Metrics {
			if _, ok := packedNumber[m.Name]; !ok {
				t.Errorf("archetype %s's metric %q has no number in PackedMetrics", a.Name, m.Name)
			}
		}
	}
}

// Marshal keeps every field of a record (a field added to MemoryMeta
// fails this test until Marshal copies it), and Unmarshal gives it back.
func TestMarshalCopiesEveryField(t *testing.T) {
	m := &messages.MemoryMeta{
		Sonas: []string{"a", "b"}, AgentId: "agent", Kind: "fact", Backbone: true, Archived: true,
		ExpiresAt: 7, Importance: 0.5, AccessCount: 3, LastAccessTick: 9, CreatedAt: 11,
		Labels: map[string]string{"k": "v"}, Seq: 13, Insight: &messages.InsightMark{Category: "pattern"},
		Evaluation: &messages.EvalSummary{Metrics: map[string]float64{"novelty_factor": 0.25, "self_coherence": 1},
			Priority: &messages.Priority{Score: 0.3, DecayRate: 0.4, Factors: []string{"f"}}, Failed: true},
		Joins: []*messages.SonaJoin{{Sona: "b", AgentId: "other", JoinedAt: 12}},
	}
	fields := m.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); !m.ProtoReflect().Has(f) {
			t.Fatalf("the test's record leaves %s unset: set it, and have Marshal copy it", f.Name())
		}
	}
	b, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := proto.Marshal(m)
	if len(b) >= len(plain) {
		t.Fatalf("packed %d bytes, proto.Marshal %d", len(b), len(plain))
	}
	got := &messages.MemoryMeta{}
	if err := Unmarshal(b, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, m) || len(got.ProtoReflect().GetUnknown()) != 0 {
		t.Fatalf("Unmarshal(Marshal(m)) = %v, want %v", got, m)
	}
}

// The default archetypes' eleven metrics take a tenth of the bytes; a
// summary that cannot be packed is stored as it is, and read back alike.
func TestMarshalPacksWhatItCan(t *testing.T) {
	all := map[string]float64{}
	for i, name := range PackedMetrics {
		all[name] = float64(i*37%1001) / 1000
	}
	rec := func(metrics map[string]float64) *messages.MemoryMeta {
		return &messages.MemoryMeta{Sonas: []string{"f57cab28-ee08-4627-9133-d9352c5faaf8"}, Kind: "note", CreatedAt: 1796184077,
			Seq: 957617, Evaluation: &messages.EvalSummary{Metrics: metrics, Priority: &messages.Priority{DecayRate: 1}}}
	}
	b, _ := Marshal(rec(all))
	plain, _ := proto.Marshal(rec(all))
	if len(b) > len(plain)/3 {
		t.Errorf("eleven metrics packed: %d bytes, %d unpacked", len(b), len(plain))
	}
	with := func(name string, v float64) map[string]float64 {
		m := map[string]float64{"novelty_factor": 0.5}
		m[name] = v
		return m
	}
	for what, metrics := range map[string]map[string]float64{
		"a metric not in the table":  with("custom", 0.5),
		"a value not in thousandths": with("self_coherence", 0.1234),
		"a negative zero":            with("self_coherence", math.Copysign(0, -1)),
		"an infinite value":          with("self_coherence", math.Inf(1)),
		"a value too large":          with("self_coherence", 1e300),
	} {
		m := rec(metrics)
		b, err := Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if det, _ := (proto.MarshalOptions{Deterministic: true}).Marshal(unmarshal(b)); string(det) != string(plain) {
			t.Errorf("%s: stored %x, want it as proto.Marshal writes it", what, b)
		}
	}
	// Whole thousandths in the double's whole range of them.
	for _, v := range []float64{0, 0.001, -0.001, 1, 0.999, 123456.789, -2.5, float64(maxThousandths) / 1000} {
		b, err := Marshal(rec(map[string]float64{"empathy_level": v}))
		if err != nil {
			t.Fatal(err)
		}
		got := unmarshal(b)
		if got == nil || got.Evaluation.Metrics["empathy_level"] != v || math.Signbit(got.Evaluation.Metrics["empathy_level"]) != math.Signbit(v) {
			t.Errorf("%v: read back %v", v, got)
		}
		if _, ok := thousandths(v); !ok {
			t.Errorf("%v is not taken as whole thousandths", v)
		}
	}
}

// Marshal leaves the record it is given as it was (records read through
// the cache are shared).
func TestMarshalChangesNothing(t *testing.T) {
	m := &messages.MemoryMeta{Kind: "note", Evaluation: &messages.EvalSummary{Metrics: map[string]float64{"novelty_factor": 0.5}}}
	before := proto.Clone(m)
	if _, err := Marshal(m); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(m, before) {
		t.Fatalf("Marshal changed its record: %v, was %v", m, before)
	}
}
