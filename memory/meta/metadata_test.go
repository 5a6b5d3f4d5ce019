package meta

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/messages"
)

// The API's view of a stored metadata record read by Of is that record,
// byte for byte, whichever fields are set: every field is named (the
// record's descriptor is checked, so a field added to MemoryMeta fails
// here until the view decides about it); nothing is shared with the
// record.
func TestMetadataViewIsTheRecord(t *testing.T) {
	full := &messages.MemoryMeta{Sonas: []string{"s1", "s2"}, AgentId: "ag", Kind: "fact", Backbone: true, Archived: true,
		ExpiresAt: 1700009999, Importance: 0.25, AccessCount: 3, LastAccessTick: 12, CreatedAt: 1700000000,
		Labels: map[string]string{"a": "1", "b": "2"}, Seq: 42,
		Insight: &messages.InsightMark{Category: "pattern", Confidence: 0.8},
		Evaluation: &messages.EvalSummary{Metrics: map[string]float64{"novelty": 0.5}, Failed: true,
			Priority: &messages.Priority{Score: 0.7, Factors: []string{"goal"}, DecayRate: 0.4}},
		Joins: []*messages.SonaJoin{{Sona: "s2", AgentId: "other", Kind: "note", Labels: map[string]string{"x": "y"}, JoinedAt: 1700000500}}}
	fields := full.ProtoReflect().Descriptor().Fields()
	set := 0
	for i := 0; i < fields.Len(); i++ {
		if full.ProtoReflect().Has(fields.Get(i)) {
			set++
		}
	}
	if set != fields.Len() {
		t.Fatalf("the fixture sets %d of MemoryMeta's %d fields: set them all", set, fields.Len())
	}
	det := proto.MarshalOptions{Deterministic: true}
	for name, rec := range map[string]*messages.MemoryMeta{
		"full":     full,
		"empty":    {},
		"no prio":  {Evaluation: &messages.EvalSummary{Metrics: map[string]float64{"m": 1}}},
		"one sona": {Sonas: []string{"s"}, Kind: "note", CreatedAt: 5},
	} {
		want, err := det.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		v := Of(rec).View()
		got, err := det.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || !proto.Equal(v, rec) {
			t.Fatalf("%s: view %v, want %v", name, v, rec)
		}
		if len(rec.Sonas) > 0 {
			v.Sonas[0] = "changed"
			if rec.Sonas[0] == "changed" {
				t.Fatalf("%s: the view shares the record's sonas", name)
			}
		}
	}
}
