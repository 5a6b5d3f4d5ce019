package eumas

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/messages"
)

// marshalEval is e's protobuf, as proto.Marshal writes it (its maps in
// Go's order of iteration, which proto.Marshal leaves to them too). An
// evaluation is written once per memory, and proto.Marshal reads its maps —
// each archetype's metrics and justifications — by reflection, which
// boxes every key and value it visits, twice (to size it, then to write
// it): at 10,000 sonas 7% of the objects the server allocated, and 2% of
// its CPU (README, stop 107). A message holding fields this build does
// not know (read from a newer one's record) is proto.Marshal's, which
// keeps them. TestMarshalEvalIsProtoMarshal holds it to proto.Marshal,
// every field set.
func marshalEval(e *messages.Evaluation) ([]byte, error) {
	if !known(e) {
		return proto.Marshal(e)
	}
	return appendEvaluation(make([]byte, 0, evaluationSize(e)), e), nil
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

// evaluationSize is the size of e's protobuf, and appendEvaluation
// appends it, each message after its size (...Size, which the append...
// functions follow field by field).
func evaluationSize(e *messages.Evaluation) int {
	n := 0
	for _, a := range e.Archetypes {
		n += sizeMessage(1, archetypeSize(a))
	}
	for _, f := range e.Failures {
		n += sizeMessage(2, sizeString(1, f.Archetype)+sizeString(2, f.Error))
	}
	if e.EvaluatedAt != 0 {
		n += protowire.SizeTag(3) + protowire.SizeVarint(uint64(e.EvaluatedAt))
	}
	return n + sizeString(4, e.Evaluator)
}

func appendEvaluation(b []byte, e *messages.Evaluation) []byte {
	for _, a := range e.Archetypes {
		b = appendArchetype(appendMessageHead(b, 1, archetypeSize(a)), a)
	}
	for _, f := range e.Failures {
		b = appendMessageHead(b, 2, sizeString(1, f.Archetype)+sizeString(2, f.Error))
		b = appendString(appendString(b, 1, f.Archetype), 2, f.Error)
	}
	if e.EvaluatedAt != 0 {
		b = protowire.AppendVarint(protowire.AppendTag(b, 3, protowire.VarintType), uint64(e.EvaluatedAt))
	}
	return appendString(b, 4, e.Evaluator)
}

func archetypeSize(a *messages.ArchetypeEvaluation) int {
	n := sizeString(1, a.Archetype)
	for k, v := range a.Metrics {
		n += sizeMessage(2, metricEntrySize(k, v))
	}
	for k, v := range a.Justifications {
		n += sizeMessage(3, justificationEntrySize(k, v))
	}
	if a.Annotations != nil {
		n += sizeMessage(4, annotationsSize(a.Annotations))
	}
	if a.Priority != nil {
		n += sizeMessage(5, prioritySize(a.Priority))
	}
	return n + sizeString(6, a.PriorityJustification)
}

func appendArchetype(b []byte, a *messages.ArchetypeEvaluation) []byte {
	b = appendString(b, 1, a.Archetype)
	// A map's entry is a message of its key (1) and its value (2), both
	// written, as proto.Marshal writes them.
	for k, v := range a.Metrics {
		b = appendMessageHead(b, 2, metricEntrySize(k, v))
		b = protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), k)
		b = protowire.AppendFixed64(protowire.AppendTag(b, 2, protowire.Fixed64Type), math.Float64bits(v))
	}
	for k, v := range a.Justifications {
		b = appendMessageHead(b, 3, justificationEntrySize(k, v))
		b = protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), k)
		b = protowire.AppendString(protowire.AppendTag(b, 2, protowire.BytesType), v)
	}
	if an := a.Annotations; an != nil {
		b = appendMessageHead(b, 4, annotationsSize(an))
		b = appendString(b, 1, an.Spoken)
		b = appendString(b, 2, an.Context)
		b = appendString(b, 3, an.RelationshipImpact)
		b = appendString(b, 4, an.Identity)
		b = appendString(b, 5, an.Learning)
		b = appendString(b, 6, an.FutureDirections)
	}
	if p := a.Priority; p != nil {
		b = appendMessageHead(b, 5, prioritySize(p))
		b = appendDouble(b, 1, p.Score)
		for _, f := range p.Factors {
			b = protowire.AppendString(protowire.AppendTag(b, 2, protowire.BytesType), f)
		}
		b = appendDouble(b, 3, p.DecayRate)
	}
	return appendString(b, 6, a.PriorityJustification)
}

func metricEntrySize(k string, _ float64) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(len(k)) + protowire.SizeTag(2) + protowire.SizeFixed64()
}

func justificationEntrySize(k, v string) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(len(k)) + protowire.SizeTag(2) + protowire.SizeBytes(len(v))
}

func annotationsSize(an *messages.Annotations) int {
	return sizeString(1, an.Spoken) + sizeString(2, an.Context) + sizeString(3, an.RelationshipImpact) +
		sizeString(4, an.Identity) + sizeString(5, an.Learning) + sizeString(6, an.FutureDirections)
}

func prioritySize(p *messages.Priority) int {
	n := sizeDouble(1, p.Score) + sizeDouble(3, p.DecayRate)
	for _, f := range p.Factors {
		n += protowire.SizeTag(2) + protowire.SizeBytes(len(f))
	}
	return n
}

// sizeMessage is the size of a message field of num whose message is n
// bytes.
func sizeMessage(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

func appendMessageHead(b []byte, num protowire.Number, n int) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.BytesType), uint64(n))
}

// sizeString and appendString are a proto3 string field: none when empty.
func sizeString(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

// sizeDouble and appendDouble are a proto3 double field: none when its
// bits are zero (-0 is written, as proto.Marshal writes it).
func sizeDouble(num protowire.Number, v float64) int {
	if math.Float64bits(v) == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeFixed64()
}

func appendDouble(b []byte, num protowire.Number, v float64) []byte {
	if math.Float64bits(v) == 0 {
		return b
	}
	return protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), math.Float64bits(v))
}
