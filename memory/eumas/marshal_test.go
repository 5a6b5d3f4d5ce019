package eumas

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/memoria-ai/memoria/messages"
)

// appendEval writes what proto.Marshal writes: evaluations with every
// field of every message set (a field added to the messages and not to
// appendEval fails here) or left unset, empty strings, -0 and empty
// messages, read back equal and as long; with maps of one entry at most,
// whose order cannot differ, the same bytes.
func TestMarshalEvalIsProtoMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 2000 {
		e := &messages.Evaluation{}
		entries := 1 + i%5 // maps of up to one entry in the first fifth of the rounds
		if i < 400 {
			entries = 1
		}
		fillMessage(t, e.ProtoReflect(), rng, entries)
		got, err := appendEval(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		want, err := proto.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("round %d: %d bytes, proto.Marshal %d: %v", i, len(got), len(want), e)
		}
		if i < 400 && !bytes.Equal(got, want) {
			t.Fatalf("round %d: %x, proto.Marshal %x: %v", i, got, want, e)
		}
		var back messages.Evaluation
		if err := proto.Unmarshal(got, &back); err != nil || !proto.Equal(&back, e) {
			t.Fatalf("round %d: read back %v (%v), want %v", i, &back, err, e)
		}
	}
	// A nil message in a list is proto.Marshal's (an empty message).
	nils := &messages.Evaluation{Archetypes: []*messages.ArchetypeEvaluation{nil, {Archetype: "a"}}, Failures: []*messages.EvalFailure{nil}}
	if got, err := appendEval(nil, nils); err != nil {
		t.Fatal(err)
	} else if want, _ := proto.Marshal(nils); !bytes.Equal(got, want) {
		t.Fatalf("with nil messages: %x, proto.Marshal %x", got, want)
	}
	// Fields this build does not know (a newer one's record) are kept.
	e := &messages.Evaluation{Evaluator: "heuristic", Archetypes: []*messages.ArchetypeEvaluation{{Archetype: "a"}}}
	e.Archetypes[0].ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "new"))
	got, err := appendEval(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	var back messages.Evaluation
	if err := proto.Unmarshal(got, &back); err != nil || !proto.Equal(&back, e) {
		t.Fatalf("an unknown field not kept: read back %v (%v), want %v", &back, err, e)
	}
}

// fillMessage sets a random part of m's fields (each with a chance of a
// quarter of being left unset), maps to at most entries entries.
func fillMessage(t *testing.T, m protoreflect.Message, rng *rand.Rand, entries int) {
	t.Helper()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if rng.IntN(4) == 0 {
			continue
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range rng.IntN(entries + 1) {
				mp.Set(protoreflect.ValueOfString(randomString(rng)).MapKey(), randomScalar(t, fd.MapValue(), rng))
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range rng.IntN(4) {
				if fd.Message() != nil {
					fillMessage(t, l.AppendMutable().Message(), rng, entries)
				} else {
					l.Append(randomScalar(t, fd, rng))
				}
			}
		case fd.Message() != nil:
			fillMessage(t, m.Mutable(fd).Message(), rng, entries) // may stay empty: an empty message, set
		default:
			m.Set(fd, randomScalar(t, fd, rng))
		}
	}
}

func randomScalar(t *testing.T, fd protoreflect.FieldDescriptor, rng *rand.Rand) protoreflect.Value {
	t.Helper()
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(randomString(rng))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64([]float64{0, math.Copysign(0, -1), 1, rng.Float64(), -rng.NormFloat64() * 1e6}[rng.IntN(5)])
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64([]int64{0, -1, rng.Int64(), -rng.Int64(), 1_700_000_000}[rng.IntN(5)])
	}
	t.Fatalf("field %s: the test fills no %v", fd.FullName(), fd.Kind())
	return protoreflect.Value{}
}

func randomString(rng *rand.Rand) string {
	return []string{"", "a", "novelty", "the memory speaks of Lisbon — é", string(make([]byte, 200))}[rng.IntN(5)]
}
