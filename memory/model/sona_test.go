package model

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/messages"
)

// A stored sona record parses to its domain state and back to the same
// record; an empty chain has no CIDs; a CID that does not parse is
// base.ErrCorrupt.
func TestSonaRecordRoundTrip(t *testing.T) {
	act := mustCIDOf(t, CodecDagCBOR, []byte{1})
	mem := mustCIDOf(t, CodecDagCBOR, []byte{2})
	for _, rec := range []*messages.Sona{
		{Uuid: "u1", Name: "mira", Length: 3, CreatedAt: 1700000000, Head: proto.String(act.String()), LastMemory: proto.String(mem.String())},
		{Uuid: "u2", Name: "empty", CreatedAt: 1700000001},
	} {
		s, err := SonaOf(rec)
		if err != nil {
			t.Fatal(err)
		}
		if (s.Head == nil) != (rec.Head == nil) || (s.Head != nil && !s.Head.Equals(act)) || (s.LastMemory != nil && !s.LastMemory.Equals(mem)) {
			t.Fatalf("%s: parsed %+v", rec.Uuid, s)
		}
		if back := s.Record(); !proto.Equal(back, rec) {
			t.Fatalf("%s: record %v, want %v", rec.Uuid, back, rec)
		}
	}
	for _, rec := range []*messages.Sona{
		{Uuid: "u3", Head: proto.String("bafy-not-a-cid")},
		{Uuid: "u4", Head: proto.String(act.String()), LastMemory: proto.String("zz")},
	} {
		if _, err := SonaOf(rec); !errors.Is(err, base.ErrCorrupt) {
			t.Fatalf("%s: %v, want base.ErrCorrupt", rec.Uuid, err)
		}
	}
}
