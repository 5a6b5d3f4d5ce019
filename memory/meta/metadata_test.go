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
	full := fullRecord(t)
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
		// Change everything the view holds: the record stays as it was.
		before := proto.Clone(rec)
		if len(v.Sonas) > 0 {
			v.Sonas[0] = "changed"
		}
		if v.Labels != nil {
			v.Labels["a"] = "changed"
		}
		for _, j := range v.Joins {
			j.Labels["x"] = "changed"
		}
		if e := v.Evaluation; e != nil {
			e.Metrics["m"] = -1
			if e.Priority != nil {
				e.Priority.Factors[0] = "changed"
			}
		}
		if !proto.Equal(rec, before) {
			t.Fatalf("%s: the view shares the record's parts: changing it made the record %v", name, rec)
		}
	}
}

// fullRecord is a metadata record with every field of MemoryMeta set (the
// descriptor is checked: a field added to it fails its callers until the
// fixture — and what they test — covers it).
func fullRecord(t *testing.T) *messages.MemoryMeta {
	t.Helper()
	full := &messages.MemoryMeta{Sonas: []string{"s1", "s2"}, AgentId: "ag", Kind: "fact", Backbone: true, Archived: true,
		ExpiresAt: 1700009999, Importance: 0.25, AccessCount: 3, LastAccessTick: 12, CreatedAt: 1700000000,
		Labels: map[string]string{"a": "1", "b": "2"}, Seq: 42,
		Insight: &messages.InsightMark{Category: "pattern", Confidence: 0.8},
		Evaluation: &messages.EvalSummary{Metrics: map[string]float64{"novelty": 0.5}, Failed: true,
			Priority: &messages.Priority{Score: 0.7, Factors: []string{"goal"}, DecayRate: 0.4}},
		Joins: []*messages.SonaJoin{{Sona: "s2", AgentId: "other", Kind: "note", Labels: map[string]string{"x": "y"}, JoinedAt: 1700000500}}}
	fields := full.ProtoReflect().Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		if !full.ProtoReflect().Has(fields.Get(i)) {
			t.Fatalf("the fixture does not set MemoryMeta's %s: set every field", fields.Get(i).Name())
		}
	}
	return full
}

// The cache's record of a memory whose hot state a commit patched is the
// record with the hot fields replaced — every other field as it was
// (unknown ones too) — and the record it came from is left as it was.
func TestWithHotCopiesEveryField(t *testing.T) {
	rec := fullRecord(t)
	rec.ProtoReflect().SetUnknown([]byte{0xa8, 0x1f, 0x01}) // field 500, varint 1
	before := proto.Clone(rec)
	h := Hot{Importance: 0.9, AccessCount: 77, LastAccessTick: 1234}
	got := withHot(rec, h)
	want := proto.Clone(rec).(*messages.MemoryMeta)
	h.into(want)
	if !proto.Equal(got, want) || !bytes.Equal(got.ProtoReflect().GetUnknown(), want.ProtoReflect().GetUnknown()) {
		t.Fatalf("withHot: %v, want %v", got, want)
	}
	if !proto.Equal(rec, before) {
		t.Fatalf("withHot changed the record it copied: %v, was %v", rec, before)
	}
}
