package recall

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/messages"
)

// plainFields reads what a full decode reads of the fields it keeps,
// past the fields it skips (maps, nested messages, repeated messages).
func TestPlainFieldsAgreeWithProto(t *testing.T) {
	for i, m := range []*messages.MemoryMeta{
		{},
		{Sonas: []string{"a", "b"}, AgentId: "ag", Kind: "fact", Importance: 0.5, AccessCount: 3, LastAccessTick: 9, CreatedAt: 1700000000, Seq: 12,
			Labels: map[string]string{"x": "y", "z": ""}, Evaluation: &messages.EvalSummary{Metrics: map[string]float64{"m": 0.25, "n": 1}},
			Joins: []*messages.SonaJoin{{Sona: "b", AgentId: "ag2", Labels: map[string]string{"k": "v"}, JoinedAt: 5}}},
		{Sonas: []string{"s"}, Backbone: true},
		{Sonas: []string{"s"}, Archived: true, Evaluation: &messages.EvalSummary{Failed: true}},
		{Sonas: []string{"s"}, ExpiresAt: 1 << 40},
		{Sonas: []string{"s"}, Insight: &messages.InsightMark{}},
		{Sonas: []string{"s"}, Insight: &messages.InsightMark{Confidence: 0.9}},
	} {
		raw, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := plainFields(raw)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		want := &messages.MemoryMeta{Sonas: m.Sonas, Backbone: m.Backbone, Archived: m.Archived, ExpiresAt: m.ExpiresAt, CreatedAt: m.CreatedAt}
		if m.Insight != nil {
			want.Insight = &messages.InsightMark{}
		}
		if !proto.Equal(got, want) {
			t.Errorf("%d: %v, want %v", i, got, want)
		}
	}
	if _, err := plainFields([]byte{0x0a, 0x05, 'a'}); err == nil { // a string cut short
		t.Error("a damaged record decodes")
	}
}
