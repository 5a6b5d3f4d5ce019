package otlp

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/memoria-ai/memoria/internal/pbwire"
)

// The field numbers of opentelemetry-proto (v1.x, stable):
// collector/trace/v1/trace_service.proto, trace/v1/trace.proto,
// common/v1/common.proto, resource/v1/resource.proto.

// encodeRequest is the protobuf ExportTraceServiceRequest of spans, all
// of one resource (one provider's): one ResourceSpans, a ScopeSpans per
// instrumentation scope in the order first seen.
func encodeRequest(res []attribute.KeyValue, spans []sdktrace.ReadOnlySpan) []byte {
	type scoped struct {
		name, version, schema string
		spans                 []sdktrace.ReadOnlySpan
	}
	var scopes []*scoped
	index := map[[3]string]*scoped{}
	for _, s := range spans {
		is := s.InstrumentationScope()
		k := [3]string{is.Name, is.Version, is.SchemaURL}
		sc := index[k]
		if sc == nil {
			sc = &scoped{name: is.Name, version: is.Version, schema: is.SchemaURL}
			index[k] = sc
			scopes = append(scopes, sc)
		}
		sc.spans = append(sc.spans, s)
	}
	var rs []byte
	rs = pbwire.Message(rs, 1, func(b []byte) []byte { return keyValues(b, 1, res) }) // ResourceSpans.resource
	for _, sc := range scopes {
		rs = pbwire.Message(rs, 2, func(b []byte) []byte { // ResourceSpans.scope_spans
			b = pbwire.Message(b, 1, func(b []byte) []byte { // ScopeSpans.scope
				b = pbwire.String(b, 1, sc.name)
				return pbwire.String(b, 2, sc.version)
			})
			for _, s := range sc.spans {
				b = pbwire.Message(b, 2, func(b []byte) []byte { return span(b, s) })
			}
			return pbwire.String(b, 3, sc.schema)
		})
	}
	return pbwire.Bytes(nil, 1, rs)
}

// span is a trace.v1.Span's fields.
func span(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = pbwire.Bytes(b, 1, tid[:])
	b = pbwire.Bytes(b, 2, sid[:])
	b = pbwire.String(b, 3, sc.TraceState().String())
	flags := uint32(sc.TraceFlags()) | 0x100 // SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
	if p := s.Parent(); p.IsValid() {
		psid := p.SpanID()
		b = pbwire.Bytes(b, 4, psid[:])
		if p.IsRemote() {
			flags |= 0x200 // SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
		}
	}
	b = pbwire.String(b, 5, s.Name())
	b = pbwire.Varint(b, 6, uint64(s.SpanKind())) // the API's kinds have OTLP's numbers
	b = pbwire.Fixed64(b, 7, unixNano(s.StartTime().UnixNano()))
	b = pbwire.Fixed64(b, 8, unixNano(s.EndTime().UnixNano()))
	b = keyValues(b, 9, s.Attributes())
	b = pbwire.Varint(b, 10, uint64(s.DroppedAttributes()))
	for _, e := range s.Events() {
		b = pbwire.Message(b, 11, func(b []byte) []byte {
			b = pbwire.Fixed64(b, 1, unixNano(e.Time.UnixNano()))
			b = pbwire.String(b, 2, e.Name)
			b = keyValues(b, 3, e.Attributes)
			return pbwire.Varint(b, 4, uint64(e.DroppedAttributeCount))
		})
	}
	b = pbwire.Varint(b, 12, uint64(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = pbwire.Message(b, 13, func(b []byte) []byte {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = pbwire.Bytes(b, 1, ltid[:])
			b = pbwire.Bytes(b, 2, lsid[:])
			b = pbwire.String(b, 3, l.SpanContext.TraceState().String())
			b = keyValues(b, 4, l.Attributes)
			b = pbwire.Varint(b, 5, uint64(l.DroppedAttributeCount))
			lflags := uint32(l.SpanContext.TraceFlags()) | 0x100
			if l.SpanContext.IsRemote() {
				lflags |= 0x200
			}
			return pbwire.Fixed32(b, 6, lflags)
		})
	}
	b = pbwire.Varint(b, 14, uint64(s.DroppedLinks()))
	if st := s.Status(); st.Code != codes.Unset {
		b = pbwire.Message(b, 15, func(b []byte) []byte {
			b = pbwire.String(b, 2, st.Description)
			code := uint64(1) // STATUS_CODE_OK
			if st.Code == codes.Error {
				code = 2 // STATUS_CODE_ERROR
			}
			return pbwire.Varint(b, 3, code)
		})
	}
	return pbwire.Fixed32(b, 16, flags)
}

func unixNano(n int64) uint64 { return uint64(max(n, 0)) }

// keyValues appends each attribute as a common.v1.KeyValue in field num.
func keyValues(b []byte, num protowire.Number, kvs []attribute.KeyValue) []byte {
	for _, kv := range kvs {
		b = pbwire.Message(b, num, func(b []byte) []byte {
			b = pbwire.String(b, 1, string(kv.Key))
			return pbwire.Message(b, 2, func(b []byte) []byte { return anyValue(b, kv.Value) })
		})
	}
	return b
}

// anyValue is a common.v1.AnyValue's fields. Its oneof is written even when
// it holds the zero value, so false, 0 and "" stay typed.
func anyValue(b []byte, v attribute.Value) []byte {
	array := func(n int, each func(b []byte, i int) []byte) []byte {
		return pbwire.Message(b, 5, func(b []byte) []byte { // array_value: ArrayValue.values
			for i := range n {
				b = pbwire.Message(b, 1, func(b []byte) []byte { return each(b, i) })
			}
			return b
		})
	}
	switch v.Type() {
	case attribute.BOOL:
		return protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		return protowire.AppendVarint(protowire.AppendTag(b, 3, protowire.VarintType), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return protowire.AppendFixed64(protowire.AppendTag(b, 4, protowire.Fixed64Type), math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		return protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), v.AsString())
	case attribute.BYTESLICE:
		return pbwire.Bytes(b, 7, v.AsByteSlice())
	case attribute.BOOLSLICE:
		s := v.AsBoolSlice()
		return array(len(s), func(b []byte, i int) []byte { return anyValue(b, attribute.BoolValue(s[i])) })
	case attribute.INT64SLICE:
		s := v.AsInt64Slice()
		return array(len(s), func(b []byte, i int) []byte { return anyValue(b, attribute.Int64Value(s[i])) })
	case attribute.FLOAT64SLICE:
		s := v.AsFloat64Slice()
		return array(len(s), func(b []byte, i int) []byte { return anyValue(b, attribute.Float64Value(s[i])) })
	case attribute.STRINGSLICE:
		s := v.AsStringSlice()
		return array(len(s), func(b []byte, i int) []byte { return anyValue(b, attribute.StringValue(s[i])) })
	case attribute.SLICE:
		s := v.AsSlice()
		return array(len(s), func(b []byte, i int) []byte { return anyValue(b, s[i]) })
	case attribute.MAP:
		return pbwire.Message(b, 6, func(b []byte) []byte { return keyValues(b, 1, v.AsMap()) }) // kvlist_value
	}
	return b // EMPTY: an AnyValue with nothing set
}
