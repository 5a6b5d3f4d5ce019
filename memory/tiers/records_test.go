package tiers

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/messages"
)

// A stored segment record reads to its domain value and back to the same
// bytes; a copy shares nothing with what it was copied from.
func TestSegmentRecordRoundTrip(t *testing.T) {
	det := proto.MarshalOptions{Deterministic: true}
	for _, rec := range []*messages.Segment{
		{Id: 7, Summary: "trips", Keywords: []string{"kyoto", "train"}, Weights: []*messages.Keyword{{Term: "kyoto", Weight: 2.5}, {Term: "train", Weight: 1}},
			Embedding8: PackEmbedding([]float32{0.6, 0.8}), NVisit: 3, LInteraction: 2, LastAccess: 1700000100, CreatedAt: 1700000000, PageCount: 4,
			PromotedThrough: 9, Promotions: 1},
		{Id: 1},
	} {
		seg, err := SegmentOf(rec)
		if err != nil {
			t.Fatal(err)
		}
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

// A segment record an older build wrote, its embedding as floats, reads
// to them, and is written back packed; a packed embedding that is cut or
// whose scale is not a finite non-negative number is corrupt.
func TestSegmentRecordOfFloats(t *testing.T) {
	seg, err := SegmentOf(&messages.Segment{Id: 3, Embedding: []float32{0.6, -0.8}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seg.Embedding, []float32{0.6, -0.8}) {
		t.Fatalf("embedding %v, want the record's floats", seg.Embedding)
	}
	rec := seg.Record()
	if len(rec.Embedding) != 0 || !bytes.Equal(rec.Embedding8, PackEmbedding([]float32{0.6, -0.8})) {
		t.Fatalf("written back as %v / %x, want packed alone", rec.Embedding, rec.Embedding8)
	}
	for name, b := range map[string][]byte{
		"a scale alone": {0, 0, 0, 0},
		"cut scale":     {1, 2},
		"negative":      append(binary.LittleEndian.AppendUint32(nil, math.Float32bits(-1)), 1),
		"NaN":           append(binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.NaN()))), 1),
		"infinite":      append(binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.Inf(1)))), 1),
	} {
		if _, err := SegmentOf(&messages.Segment{Id: 4, Embedding8: b}); !errors.Is(err, base.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// A packed embedding is 4 bytes and one a dimension; unpacked, each
// component is within half the scale of what was packed, a unit vector's
// cosine with another within 0.005 of the floats', and packing it again
// gives the same bytes a dimension. Zero and non-finite components pack
// as 0.
func TestPackEmbedding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	unit := func() []float32 {
		v := make([]float32, 384)
		var n float64
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			n += float64(v[i]) * float64(v[i])
		}
		for i := range v {
			v[i] /= float32(math.Sqrt(n))
		}
		return v
	}
	for range 200 {
		a, b := unit(), unit()
		pa := PackEmbedding(a)
		if len(pa) != 4+len(a) {
			t.Fatalf("%d bytes, want %d", len(pa), 4+len(a))
		}
		ua, err := UnpackEmbedding(pa)
		if err != nil {
			t.Fatal(err)
		}
		scale := math.Float32frombits(binary.LittleEndian.Uint32(pa))
		for i := range a {
			if d := math.Abs(float64(ua[i] - a[i])); d > float64(scale)/2*1.001 {
				t.Fatalf("component %d: %v unpacked from %v (scale %v)", i, ua[i], a[i], scale)
			}
		}
		ub, _ := UnpackEmbedding(PackEmbedding(b))
		if d := math.Abs(base.Cosine(ua, ub) - base.Cosine(a, b)); d > 0.005 {
			t.Fatalf("cosine off by %v", d)
		}
		if again := PackEmbedding(ua); !bytes.Equal(again[4:], pa[4:]) {
			t.Fatalf("packed again: %x, want %x", again[4:], pa[4:])
		}
	}
	if PackEmbedding(nil) != nil {
		t.Fatal("nil packed to bytes")
	}
	v, err := UnpackEmbedding(PackEmbedding([]float32{0, 0, 0}))
	if err != nil || !slices.Equal(v, []float32{0, 0, 0}) {
		t.Fatalf("zeros: %v, %v", v, err)
	}
	v, err = UnpackEmbedding(PackEmbedding([]float32{float32(math.NaN()), float32(math.Inf(-1)), 0.5, -1}))
	if err != nil || v[0] != 0 || v[1] != 0 || v[3] != -1 || math.Abs(float64(v[2])-0.5) > 1.0/254 {
		t.Fatalf("non-finite components: %v, %v", v, err)
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
