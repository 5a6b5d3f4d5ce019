package consensus

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/messages"
)

func TestDecideConsensus(t *testing.T) {
	upper, lower := 0.76, 0.44
	for _, tc := range []struct {
		signal float64
		agents int
		high   bool
		want   string
	}{
		{0.80, 2, false, StatusCommitted},
		{0.76, 3, false, StatusCommitted}, // crossing is reaching
		{0.80, 2, true, StatusPending},    // high stakes: 0.76 × 1.25 = 0.95
		{0.96, 2, true, StatusCommitted},
		{0.60, 2, false, StatusPending},
		{0.30, 2, false, StatusConflict},
		{0.30, 1, false, StatusPending}, // one agent cannot diverge
		{1.00, 1, false, StatusPending}, // nor agree
	} {
		u := upper
		if tc.high {
			u *= 1.25
		}
		if got := Decide(tc.signal, tc.agents, u, lower); got != tc.want {
			t.Errorf("signal %v agents %d high %v: %s, want %s", tc.signal, tc.agents, tc.high, got, tc.want)
		}
	}
}

func TestSignalIsMeanPairwiseCosine(t *testing.T) {
	v := func(x, y float32) *messages.Version { return &messages.Version{Embedding: []float32{x, y}} }
	got := Signal([]*messages.Version{v(1, 0), v(1, 0), v(0, 1)}) // pairs: 1, 0, 0
	if got < 0.333 || got > 0.334 {
		t.Fatalf("signal %v, want 1/3", got)
	}
	if Signal([]*messages.Version{v(1, 0)}) != 0 {
		t.Fatal("one version has no signal")
	}
}

// A stored conflict record reads to its domain value and back to the same
// bytes; a conflict without versions too.
func TestConflictRecordRoundTrip(t *testing.T) {
	det := proto.MarshalOptions{Deterministic: true}
	for _, rec := range []*messages.Conflict{
		{ConflictId: "c1", ConceptKey: "weather", Signal: 0.31, Threshold: 0.76, CreatedAt: 1700000000, Versions: []*messages.Version{
			{AgentId: "a", Content: "calm", At: 1700000000, Embedding: []float32{0.6, 0.8}},
			{AgentId: "b", Content: "storm", At: 1700000005, Embedding: []float32{-1, 0}},
		}},
		{ConflictId: "c2", ConceptKey: "k"},
	} {
		c := ConflictOf(rec)
		if c.ID != rec.ConflictId || len(c.Versions) != len(rec.Versions) {
			t.Fatalf("%s: read %+v", rec.ConflictId, c)
		}
		want, err := det.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := det.Marshal(c.Record())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: record %v, want %v", rec.ConflictId, c.Record(), rec)
		}
	}
}
