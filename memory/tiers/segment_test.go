package tiers

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

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
