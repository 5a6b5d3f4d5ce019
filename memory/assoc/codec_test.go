package assoc

import (
	"bytes"
	"math"
	"math/rand"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/messages"
)

// randomList is a list with the values proto3 treats specially: zero
// (left out), negative zero, negative times, an empty target, a type
// not among the known ones.
func randomList(rng *rand.Rand) *messages.Associations {
	types := []string{"", Similar, CoAccess, Sequential, Causal, Related, "other"}
	strengths := []float64{0, math.Copysign(0, -1), 1, 0.25, rng.Float64(), math.Inf(1)}
	times := []int64{0, 1, -1, 1 << 40, math.MinInt64, rng.Int63()}
	list := &messages.Associations{}
	for range rng.Intn(MaxLinks + 2) {
		target := make([]byte, rng.Intn(3)*18)
		rng.Read(target)
		list.Links = append(list.Links, &messages.Association{
			Type:      types[rng.Intn(len(types))],
			Strength:  strengths[rng.Intn(len(strengths))],
			UpdatedAt: times[rng.Intn(len(times))],
			Target:    target,
		})
	}
	return list
}

func entriesOf(list *messages.Associations) []Entry {
	var es []Entry
	for _, l := range list.Links {
		es = append(es, Entry{Target: l.Target, Type: l.Type, Strength: l.Strength, UpdatedAt: l.UpdatedAt})
	}
	return es
}

func sameEntries(a, b []Entry) bool {
	return slices.EqualFunc(a, b, func(x, y Entry) bool {
		return bytes.Equal(x.Target, y.Target) && x.Type == y.Type && math.Float64bits(x.Strength) == math.Float64bits(y.Strength) && x.UpdatedAt == y.UpdatedAt
	})
}

// TestEntriesCodecIsTheMessages: the hand-written codec writes the bytes
// proto.Marshal writes of the same list — so Update still sees an
// unchanged list as unchanged, whichever wrote it — and reads back what
// proto.Unmarshal reads.
func TestEntriesCodecIsTheMessages(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := range 2000 {
		list := randomList(rng)
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(list)
		if err != nil {
			t.Fatal(err)
		}
		got := appendEntries(nil, entriesOf(list))
		if !bytes.Equal(got, want) {
			t.Fatalf("list %d: appendEntries wrote\n%x\nproto.Marshal\n%x", i, got, want)
		}
		back, err := decodeEntries(want, nil)
		if err != nil || !sameEntries(back, entriesOf(list)) {
			t.Fatalf("list %d: decodeEntries read %v (%v), want %v", i, back, err, entriesOf(list))
		}
	}
}

// TestDecodeEntriesReadsAsUnmarshal: fields it does not know are passed
// over, a field given twice takes its last value, and what is not a
// message is corrupt.
func TestDecodeEntriesReadsAsUnmarshal(t *testing.T) {
	var link []byte
	link = protowire.AppendTag(link, fieldType, protowire.BytesType)
	link = protowire.AppendString(link, "first")
	link = protowire.AppendTag(link, 9, protowire.VarintType) // unknown
	link = protowire.AppendVarint(link, 5)
	link = protowire.AppendTag(link, fieldType, protowire.BytesType)
	link = protowire.AppendString(link, Causal)
	link = protowire.AppendTag(link, fieldTarget, protowire.BytesType)
	link = protowire.AppendBytes(link, []byte("t"))
	var raw []byte
	raw = protowire.AppendTag(raw, 7, protowire.Fixed32Type) // unknown
	raw = protowire.AppendFixed32(raw, 1)
	raw = protowire.AppendTag(raw, fieldLinks, protowire.BytesType)
	raw = protowire.AppendBytes(raw, link)

	list := &messages.Associations{}
	if err := proto.Unmarshal(raw, list); err != nil {
		t.Fatal(err)
	}
	got, err := decodeEntries(raw, nil)
	if err != nil || !sameEntries(got, entriesOf(list)) || got[0].Type != Causal {
		t.Fatalf("read %v (%v), want %v", got, err, entriesOf(list))
	}
	for _, bad := range [][]byte{{0x0a}, {0x0a, 0x05, 0x01}, {0x0a, 0x02, 0x0a, 0x09}, {0xff}} {
		if _, err := decodeEntries(bad, nil); err == nil {
			t.Errorf("%x read without an error", bad)
		}
	}
}

// FuzzDecodeEntries: whatever proto.Unmarshal reads as a list,
// decodeEntries reads the same.
func FuzzDecodeEntries(f *testing.F) {
	rng := rand.New(rand.NewSource(2))
	for range 8 {
		raw, _ := proto.Marshal(randomList(rng))
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		list := &messages.Associations{}
		if proto.Unmarshal(raw, list) != nil {
			return
		}
		got, err := decodeEntries(raw, nil)
		if err != nil || !sameEntries(got, entriesOf(list)) {
			t.Fatalf("%x: read %v (%v), proto.Unmarshal %v", raw, got, err, entriesOf(list))
		}
	})
}
