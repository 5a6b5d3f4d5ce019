package tiers

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/messages"
)

// A stored segment record reads to its domain value and back to the same
// bytes; a copy shares nothing with what it was copied from.
func TestSegmentRecordRoundTrip(t *testing.T) {
	det := proto.MarshalOptions{Deterministic: true}
	for _, rec := range []*messages.Segment{
		{Id: 7, Summary: "trips", Keywords: []string{"kyoto", "train"}, Weights: []*messages.Keyword{{Term: "kyoto", Weight: 2.5}, {Term: "train", Weight: 1}},
			Embedding: []float32{0.6, 0.8}, NVisit: 3, LInteraction: 2, LastAccess: 1700000100, CreatedAt: 1700000000, PageCount: 4,
			PromotedThrough: 9, Promotions: 1},
		{Id: 1},
	} {
		seg := SegmentOf(rec)
		want, err := det.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := det.Marshal(seg.Record())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("segment %d: record %v, want %v", rec.Id, seg.Record(), rec)
		}
		c := seg.clone()
		Join(c, &messages.Page{Seq: 10, Embedding: []float32{1, 0}}, []Keyword{{Term: "kyoto", Weight: 1}})
		if again, _ := det.Marshal(seg.Record()); !bytes.Equal(again, want) {
			t.Fatalf("segment %d: joining a copy changed the original: %v", rec.Id, seg.Record())
		}
	}
}

// A stored persona record (as the LPM writes it: user and agent present)
// reads to its domain value and back to the same bytes; a clone shares
// nothing with what it was cloned from.
func TestPersonaRecordRoundTrip(t *testing.T) {
	det := proto.MarshalOptions{Deterministic: true}
	for name, rec := range map[string]*messages.Persona{
		"full": {User: &messages.UserPersona{Profile: map[string]string{"name": "Caroline", "location": "Lisbon"},
			Knowledge: []*messages.Fact{{Text: "Caroline paints.", Embedding: []float32{0.6, 0.8}, T: 1700000000, Segment: 3, Source: "bafyq"}},
			Traits:    []*messages.Trait{{Dimension: "music", Group: "interests", Level: 0.4375, Evidence: "plays", UpdatedAt: 1700000100}}},
			Agent:   &messages.AgentPersona{Traits: []*messages.Fact{{Text: "Mel listens.", Embedding: []float32{1, 0}, T: 1700000200, Segment: 4, Source: "bafyr"}}},
			Updates: 7},
		"empty": {User: &messages.UserPersona{}, Agent: &messages.AgentPersona{}},
	} {
		p := PersonaOf(rec)
		want, err := det.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := det.Marshal(p.Record())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: record %v, want %v", name, p.Record(), rec)
		}
		c := p.Clone()
		ApplyPersona(c, PersonaUpdate{Profile: map[string]string{"name": "Other"}, Facts: []Statement{{Text: "new"}},
			AgentTraits: []Statement{{Text: "also new"}}, Traits: []TraitObservation{{Dimension: "music", Level: 0}}},
			config.Default().Tiers, 9, 1800000000)
		for _, f := range c.User.Knowledge {
			if len(f.Embedding) > 0 {
				f.Embedding[0] = 9
			}
		}
		if again, _ := det.Marshal(p.Record()); !bytes.Equal(again, want) {
			t.Fatalf("%s: changing a clone changed the original: %v", name, p.Record())
		}
	}
}

// distinct keeps each token's first appearance, in order, for a
// sentence's few tokens (scanned) as for a long text's (a set).
func TestDistinct(t *testing.T) {
	for _, n := range []int{0, 1, 5, 32, 33, 200} {
		var ts, want []string
		for i := range n {
			w := fmt.Sprint("w", i%7, "-", i%11) // repeats, first seen in order
			if !slices.Contains(want, w) {
				want = append(want, w)
			}
			ts = append(ts, w)
		}
		if got := distinct(ts); !slices.Equal(got, want) {
			t.Fatalf("%d tokens: %q, want %q", n, got, want)
		}
	}
}
