package assoc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
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
		if rng.Intn(2) == 0 {
			target = memoryCID(rng).Bytes() // the prefix the compact form leaves out
		}
		list.Links = append(list.Links, &messages.Association{
			Type:      types[rng.Intn(len(types))],
			Strength:  strengths[rng.Intn(len(strengths))],
			UpdatedAt: times[rng.Intn(len(times))],
			Target:    target,
		})
	}
	return list
}

// memoryCID is a CID as a memory's: v1, DAG-CBOR, SHA2-256.
func memoryCID(rng *rand.Rand) cid.Cid {
	b := make([]byte, 16)
	rng.Read(b)
	c, err := model.SumCID(cid.DagCBOR, b)
	if err != nil {
		panic(err)
	}
	return c
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

// TestCompactFormRoundTrips: what appendEntries writes decodeEntries
// reads back as it was — types known and not, targets with and without
// the CID prefix the form leaves out, times on either side of the
// first's (wrapping) —, and proto.Unmarshal cannot read: no message
// starts with its mark.
func TestCompactFormRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := range 2000 {
		list := randomList(rng)
		want := entriesOf(list)
		raw := appendEntries(nil, want)
		if len(want) == 0 && len(raw) != 0 {
			t.Fatalf("list %d: an empty list written as %x", i, raw)
		}
		back, err := decodeEntries(raw, nil, &builtTargets{})
		if err != nil || !sameEntries(back, want) {
			t.Fatalf("list %d: read %v (%v) of %x, want %v", i, back, err, raw, want)
		}
		if len(raw) > 0 && proto.Unmarshal(raw, &messages.Associations{}) == nil {
			t.Fatalf("list %d: proto.Unmarshal read the compact form %x", i, raw)
		}
		var walked []Entry
		if err := eachEntry(raw, &builtTargets{}, func(e Entry) bool {
			e.Target = bytes.Clone(e.Target) // valid until the next
			walked = append(walked, e)
			return true
		}); err != nil || !sameEntries(walked, want) {
			t.Fatalf("list %d: walked %v (%v), want %v", i, walked, err, want)
		}
	}
}

// TestCompactFormIsSmaller: a full list of a memory's links as the
// advances make them is two thirds of the message it was.
func TestCompactFormIsSmaller(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	list := &messages.Associations{}
	for i := range MaxLinks {
		list.Links = append(list.Links, &messages.Association{
			Type:      []string{Causal, Similar, Sequential}[i%3],
			Strength:  rng.Float64(),
			UpdatedAt: 1_764_000_000 + rng.Int63n(600),
			Target:    memoryCID(rng).Bytes(),
		})
	}
	old, err := proto.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	raw := Marshal(list)
	if len(raw)*3 > len(old)*2 {
		t.Fatalf("%d links: %d bytes in the compact form, %d as a message", MaxLinks, len(raw), len(old))
	}
	t.Logf("%d links: %d bytes, %d as a message", MaxLinks, len(raw), len(old))
}

// TestMarshalUnmarshal: Marshal writes a message's list in the compact
// form, in its order, and Unmarshal reads either form as that message.
func TestMarshalUnmarshal(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for i := range 500 {
		list := randomList(rng)
		for _, raw := range [][]byte{Marshal(list), mustMarshal(t, list)} {
			got, err := Unmarshal(raw)
			if err != nil || !sameEntries(entriesOf(got), entriesOf(list)) {
				t.Fatalf("list %d: %x read as %v (%v), want %v", i, raw, got, err, list)
			}
		}
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	raw, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestCompactFormCorrupt: a compact list cut short anywhere, of another
// form, or with a head's reserved bits set, is corrupt, never read as
// fewer links; a cut at a link's end is the shorter list it spells.
func TestCompactFormCorrupt(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	es := []Entry{
		{Target: memoryCID(rng).Bytes(), Type: Causal, Strength: 0.5, UpdatedAt: 100},
		{Target: []byte("other"), Type: "named", Strength: 0.25, UpdatedAt: 90},
	}
	raw := appendEntries(nil, es)
	first := len(appendEntries(nil, es[:1]))
	for n := 1; n < len(raw); n++ {
		got, err := decodeEntries(raw[:n], nil, &builtTargets{})
		if n == first {
			if err != nil || !sameEntries(got, es[:1]) {
				t.Errorf("cut at the first link's end: %v (%v)", got, err)
			}
			continue
		}
		if !errors.Is(err, base.ErrCorrupt) {
			t.Errorf("cut at %d of %d: %v (%v), want corrupt", n, len(raw), got, err)
		}
	}
	other := bytes.Clone(raw)
	other[1] = 2
	head := 2 + len(binary.AppendVarint(nil, es[0].UpdatedAt)) // after the mark, the form and the base
	reserved := bytes.Clone(raw)
	reserved[head] |= 0x10
	badType := bytes.Clone(raw)
	badType[head] = badType[head]&^headType | 7
	for name, bad := range map[string][]byte{"another form": other, "reserved bits": reserved, "unknown type code": badType} {
		if _, err := decodeEntries(bad, nil, &builtTargets{}); !errors.Is(err, base.ErrCorrupt) {
			t.Errorf("%s: %v, want corrupt", name, err)
		}
	}
}

// FuzzDecodeCompact: whatever a compact list decodes to, written again
// and read, is the same.
func FuzzDecodeCompact(f *testing.F) {
	rng := rand.New(rand.NewSource(6))
	for range 8 {
		f.Add(appendEntries(nil, entriesOf(randomList(rng))))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := decodeEntries(raw, nil, &builtTargets{})
		if err != nil {
			return
		}
		back, err := decodeEntries(appendEntries(nil, got), nil, &builtTargets{})
		if err != nil || !sameEntries(back, got) {
			t.Fatalf("%x: read %v, written again read %v (%v)", raw, got, back, err)
		}
	})
}

// TestDecodeEntriesReadsAsUnmarshal: a list in the form of every build
// before the compact one is read as proto.Unmarshal reads it: fields it does not know are passed
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
	got, err := decodeEntries(raw, nil, &builtTargets{})
	if err != nil || !sameEntries(got, entriesOf(list)) || got[0].Type != Causal {
		t.Fatalf("read %v (%v), want %v", got, err, entriesOf(list))
	}
	for _, bad := range [][]byte{{0x0a}, {0x0a, 0x05, 0x01}, {0x0a, 0x02, 0x0a, 0x09}, {0xff}} {
		if _, err := decodeEntries(bad, nil, &builtTargets{}); err == nil {
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
		got, err := decodeEntries(raw, nil, &builtTargets{})
		if err != nil || !sameEntries(got, entriesOf(list)) {
			t.Fatalf("%x: read %v (%v), proto.Unmarshal %v", raw, got, err, entriesOf(list))
		}
	})
}
