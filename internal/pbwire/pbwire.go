// Package pbwire appends protobuf fields by hand, for the encoders that
// write a message without the reflection of proto.Marshal: the OTLP
// exporter's spans (internal/otlp) and the evaluation records
// (memory/eumas). The scalar fields are left out at their zero value, as
// proto3 writes them.
package pbwire

import "google.golang.org/protobuf/encoding/protowire"

// Message appends field num holding the message fill appends, with its
// length before it: fill writes the body, which then moves right by the
// length's bytes (one while the body is under 128 bytes).
func Message(b []byte, num protowire.Number, fill func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	at := len(b)
	b = fill(b)
	n := len(b) - at
	size := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, size)...)
	copy(b[at+size:], b[at:at+n])
	protowire.AppendVarint(b[at:at], uint64(n))
	return b
}

// String appends string field num, unless s is empty.
func String(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

// Bytes appends bytes field num, even when v is empty.
func Bytes(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

// Varint appends varint field num, unless v is 0.
func Varint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

// Fixed64 appends fixed64 field num (a double as its bits), unless v is 0.
func Fixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), v)
}

// Fixed32 appends fixed32 field num, unless v is 0.
func Fixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed32(protowire.AppendTag(b, num, protowire.Fixed32Type), v)
}
