package eumas

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/internal/pbwire"
	"github.com/memoria-ai/memoria/messages"
)

// appendEval appends e's protobuf to b, as proto.Marshal writes it (its
// maps in Go's order of iteration, which proto.Marshal leaves to them
// too). An evaluation is written once per memory, and proto.Marshal reads
// its maps — each archetype's metrics and justifications — by reflection,
// which boxes every key and value it visits, twice (to size it, then to
// write it): at 10,000 sonas 7% of the objects the server allocated, and
// 2% of its CPU (README, stop 107). A message holding fields this build
// does not know (read from a newer one's record) is proto.Marshal's,
// which keeps them. TestMarshalEvalIsProtoMarshal holds it to
// proto.Marshal, every field set.
func appendEval(b []byte, e *messages.Evaluation) ([]byte, error) {
	if !known(e) {
		return proto.MarshalOptions{}.MarshalAppend(b, e)
	}
	for _, a := range e.Archetypes {
		b = pbwire.Message(b, 1, func(b []byte) []byte { return appendArchetype(b, a) })
	}
	for _, f := range e.Failures {
		b = pbwire.Message(b, 2, func(b []byte) []byte {
			return pbwire.String(pbwire.String(b, 1, f.Archetype), 2, f.Error)
		})
	}
	b = pbwire.Varint(b, 3, uint64(e.EvaluatedAt))
	return pbwire.String(b, 4, e.Evaluator), nil
}

// known reports whether e and the messages in it hold no unknown fields
// (nor a nil message in a list, which proto.Marshal writes as an empty one).
func known(e *messages.Evaluation) bool {
	if len(e.ProtoReflect().GetUnknown()) > 0 {
		return false
	}
	for _, a := range e.Archetypes {
		if a == nil || len(a.ProtoReflect().GetUnknown()) > 0 ||
			a.Annotations != nil && len(a.Annotations.ProtoReflect().GetUnknown()) > 0 ||
			a.Priority != nil && len(a.Priority.ProtoReflect().GetUnknown()) > 0 {
			return false
		}
	}
	for _, f := range e.Failures {
		if f == nil || len(f.ProtoReflect().GetUnknown()) > 0 {
			return false
		}
	}
	return true
}

func appendArchetype(b []byte, a *messages.ArchetypeEvaluation) []byte {
	b = pbwire.String(b, 1, a.Archetype)
	// A map's entry is a message of its key (1) and its value (2), both
	// written, as proto.Marshal writes them.
	for k, v := range a.Metrics {
		b = pbwire.Message(b, 2, func(b []byte) []byte {
			b = protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), k)
			return protowire.AppendFixed64(protowire.AppendTag(b, 2, protowire.Fixed64Type), math.Float64bits(v))
		})
	}
	for k, v := range a.Justifications {
		b = pbwire.Message(b, 3, func(b []byte) []byte {
			b = protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), k)
			return protowire.AppendString(protowire.AppendTag(b, 2, protowire.BytesType), v)
		})
	}
	if an := a.Annotations; an != nil {
		b = pbwire.Message(b, 4, func(b []byte) []byte {
			b = pbwire.String(b, 1, an.Spoken)
			b = pbwire.String(b, 2, an.Context)
			b = pbwire.String(b, 3, an.RelationshipImpact)
			b = pbwire.String(b, 4, an.Identity)
			b = pbwire.String(b, 5, an.Learning)
			return pbwire.String(b, 6, an.FutureDirections)
		})
	}
	if p := a.Priority; p != nil {
		// A double is left out when its bits are zero: -0 is written, as
		// proto.Marshal writes it.
		b = pbwire.Message(b, 5, func(b []byte) []byte {
			b = pbwire.Fixed64(b, 1, math.Float64bits(p.Score))
			for _, f := range p.Factors {
				b = protowire.AppendString(protowire.AppendTag(b, 2, protowire.BytesType), f)
			}
			return pbwire.Fixed64(b, 3, math.Float64bits(p.DecayRate))
		})
	}
	return pbwire.String(b, 6, a.PriorityJustification)
}
