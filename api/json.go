package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/messages"
)

// MarshalJSON renders an API payload as JSON with Memoria's conventions,
// which differ from protojson's where clients care:
//
//   - keys are the proto field names (snake_case, as the .proto files write them);
//   - 64-bit integers are JSON numbers, not strings;
//   - repeated fields are always present ([] when empty), maps likewise ({});
//   - a field with presence that is unset (a message, or a proto3
//     `optional` scalar) is null; other scalars are always written;
//   - memoria.v1.Link is {"/": "<cid>"} and google.protobuf.Struct/Value
//     are the plain JSON they hold.
func MarshalJSON(m proto.Message) ([]byte, error) {
	var b bytes.Buffer
	if err := writeMessage(&b, m.ProtoReflect()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// UnmarshalJSON parses a request payload strictly: unknown fields and
// malformed values are errors. Field names may be snake_case or camelCase.
func UnmarshalJSON(data []byte, m proto.Message) error {
	return protojson.UnmarshalOptions{}.Unmarshal(data, m)
}

// jsonProblem says what is wrong with JSON that UnmarshalJSON refused
// (what: "the body", "the manifest") in words for whoever wrote it: where
// the JSON breaks (byte offset, line and column), or which field holds
// what, rather than protojson's "proto: unexpected EOF".
func jsonProblem(what string, body []byte, err error) string {
	var syn *json.SyntaxError
	if jerr := json.Unmarshal(body, new(json.RawMessage)); errors.As(jerr, &syn) {
		if strings.HasPrefix(syn.Error(), "unexpected end") {
			return fmt.Sprintf("%s is not valid JSON: unexpected end at byte %d", what, len(body))
		}
		line, col := lineColumn(body, syn.Offset)
		return fmt.Sprintf("%s is not valid JSON: %s, at byte %d (line %d, column %d)", what, syn.Error(), syn.Offset, line, col)
	}
	msg := protoPrefix.ReplaceAllString(err.Error(), "")
	where := ""
	if m := protoPosition.FindStringSubmatch(msg); m != nil {
		where, msg = fmt.Sprintf(" (line %s, column %s)", m[1], m[2]), m[3]
	}
	if m := protoBadValue.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("field %q takes %s, not %s", m[2], valueKinds[m[1]], m[3])
	} else if msg == "unexpected EOF" {
		// protojson's word for what encoding/json lets through, such as a
		// lone UTF-16 surrogate in a string.
		msg = "a string holds an escape that is not a character (a lone UTF-16 surrogate?)"
	}
	return msg + where
}

var (
	protoPrefix   = regexp.MustCompile(`^proto:[ \x{00a0}]`) // protobuf picks the space at random
	protoPosition = regexp.MustCompile(`^(?:syntax error )?\(line (\d+):(\d+)\): (.*)$`)
	protoBadValue = regexp.MustCompile(`^invalid value for (\w+) field (\w+): (.*)$`)
	valueKinds    = map[string]string{
		"int32": "a 32-bit whole number", "sint32": "a 32-bit whole number", "sfixed32": "a 32-bit whole number",
		"uint32": "a 32-bit whole number ≥ 0", "fixed32": "a 32-bit whole number ≥ 0",
		"int64": "a 64-bit whole number", "sint64": "a 64-bit whole number", "sfixed64": "a 64-bit whole number",
		"uint64": "a 64-bit whole number ≥ 0", "fixed64": "a 64-bit whole number ≥ 0",
		"float": "a number", "double": "a number", "bool": "true or false", "string": "a string",
		"bytes": "base64 text", "enum": "one of its names",
	}
)

// lineColumn is the 1-based line and column of the byte encoding/json's
// SyntaxError.Offset points at (it counts the bytes read, the bad one
// included).
func lineColumn(b []byte, off int64) (line, col int) {
	i := int(min(max(off-1, 0), int64(len(b))))
	before := b[:i]
	return bytes.Count(before, []byte("\n")) + 1, i - bytes.LastIndexByte(before, '\n')
}

// reflectOnly has every message written through protoreflect, none by
// writeKnown: for the tests that hold the two to the same bytes.
var reflectOnly atomic.Bool

func writeMessage(b *bytes.Buffer, m protoreflect.Message) error {
	desc := m.Descriptor()
	switch desc.FullName() {
	case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue":
		// The plain JSON they hold, byte for byte as encoding/json writes
		// it (not protojson, whose whitespace is deliberately unstable:
		// the same value renders the same bytes).
		var err error
		switch x := m.Interface().(type) {
		case *structpb.Struct:
			err = writeStruct(b, x)
		case *structpb.Value:
			err = writeStructValue(b, x)
		case *structpb.ListValue:
			err = writeStructList(b, x)
		}
		if err != nil {
			return fmt.Errorf("api: %s %w", desc.FullName(), err)
		}
		return nil
	case "memoria.v1.Link":
		b.WriteString(`{"/":`)
		writeString(b, m.Get(desc.Fields().ByName("cid")).String())
		b.WriteByte('}')
		return nil
	}
	if !reflectOnly.Load() {
		if ok, err := writeKnown(b, m); ok {
			return err
		}
	}
	b.WriteByte('{')
	fields := desc.Fields()
	first := true
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() && !m.Has(fd) {
			continue // only the set member of a real oneof
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeString(b, string(fd.Name()))
		b.WriteByte(':')
		switch {
		case fd.IsList():
			if err := writeList(b, fd, m.Get(fd).List()); err != nil {
				return err
			}
		case fd.IsMap():
			if err := writeMapField(b, m, fd); err != nil {
				return err
			}
		case fd.HasPresence() && !m.Has(fd):
			b.WriteString("null")
		default:
			if err := writeValue(b, fd, m.Get(fd)); err != nil {
				return err
			}
		}
	}
	b.WriteByte('}')
	return nil
}

func writeList(b *bytes.Buffer, fd protoreflect.FieldDescriptor, l protoreflect.List) error {
	b.WriteByte('[')
	for i := 0; i < l.Len(); i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writeValue(b, fd, l.Get(i)); err != nil {
			return err
		}
	}
	b.WriteByte(']')
	return nil
}

// writeMapField writes m's map field fd: the maps every recalled memory
// carries — its evaluation's metrics, its labels — straight from their Go
// maps, others through protoreflect (writeMap), whose Range boxes every
// key and value (a tenth of rendering a recall's answer). Both write the
// same bytes (TestMarshalMapsAsReflected).
func writeMapField(b *bytes.Buffer, m protoreflect.Message, fd protoreflect.FieldDescriptor) error {
	switch x := m.Interface().(type) {
	case *messages.EvalSummary:
		if fd.Name() == "metrics" {
			return writeMetrics(b, string(fd.MapValue().FullName()), x.Metrics)
		}
	case interface{ GetLabels() map[string]string }: // MemoryMeta, SonaJoin
		if fd.Name() == "labels" {
			return writeSortedMap(b, x.GetLabels(), func(s string) error { writeString(b, s); return nil })
		}
	}
	return writeMap(b, fd, m.Get(fd).Map())
}

// metricNames are the metric names the evaluations written so far have
// held, sorted, at most knownMetrics of them (metricsFull: more were met).
// An evaluation's metrics are written in their order, a lookup each: the
// same few names in every evaluation, and iterating and sorting each
// map's keys took two fifths of rendering a recall's answer (README,
// stop 53).
var (
	metricNames   atomic.Pointer[[]string]
	metricNamesMu sync.Mutex // held to change metricNames
	metricsFull   atomic.Bool
)

const knownMetrics = 64

// writeMetrics writes an evaluation's metrics mp (values of the field
// named name) as writeSortedMap does.
func writeMetrics(b *bytes.Buffer, name string, mp map[string]float64) error {
	value := func(f float64) error {
		if !writeFloat64(b, f) {
			return fmt.Errorf("api: %s is not a finite number", name)
		}
		return nil
	}
	if names := metricNames.Load(); names != nil && len(mp) <= len(*names) {
		start := b.Len()
		n, err := writeMapIn(b, *names, mp, value)
		if err != nil || n == len(mp) {
			return err
		}
		b.Truncate(start) // a name it does not know
	}
	if !metricsFull.Load() {
		learnMetricNames(mp)
	}
	return writeSortedMap(b, mp, value)
}

// learnMetricNames adds the names of mp to metricNames.
func learnMetricNames(mp map[string]float64) {
	metricNamesMu.Lock()
	defer metricNamesMu.Unlock()
	var names []string
	if p := metricNames.Load(); p != nil {
		names = slices.Clone(*p)
	}
	for k := range mp {
		if _, ok := slices.BinarySearch(names, k); !ok {
			names = append(names, k)
			slices.Sort(names)
		}
	}
	if len(names) > knownMetrics {
		metricsFull.Store(true) // each map's names sorted from now on
		return
	}
	metricNames.Store(&names)
}

// writeSortedMap writes mp as a JSON object, its keys sorted, each value
// by value.
func writeSortedMap[V any](b *bytes.Buffer, mp map[string]V, value func(V) error) error {
	var buf [16]string
	keys := buf[:0]
	for k := range mp {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	_, err := writeMapIn(b, keys, mp, value)
	return err
}

// writeMapIn writes as a JSON object the entries of mp under keys, in
// their order (a key mp does not hold is passed over); n is how many.
func writeMapIn[V any](b *bytes.Buffer, keys []string, mp map[string]V, value func(V) error) (n int, err error) {
	b.WriteByte('{')
	for _, k := range keys {
		v, ok := mp[k]
		if !ok {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		writeString(b, k)
		b.WriteByte(':')
		if err := value(v); err != nil {
			return n, err
		}
	}
	b.WriteByte('}')
	return n, nil
}

func writeMap(b *bytes.Buffer, fd protoreflect.FieldDescriptor, mp protoreflect.Map) error {
	type entry struct {
		name string
		val  protoreflect.Value
	}
	keys := make([]entry, 0, mp.Len())
	mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		keys = append(keys, entry{k.String(), v})
		return true
	})
	slices.SortFunc(keys, func(x, y entry) int { return strings.Compare(x.name, y.name) })
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, k.name)
		b.WriteByte(':')
		if err := writeValue(b, fd.MapValue(), k.val); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

func writeValue(b *bytes.Buffer, fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return writeMessage(b, v.Message())
	case protoreflect.BoolKind:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return writeDouble(b, fd, v.Float())
	case protoreflect.StringKind:
		writeString(b, v.String())
	case protoreflect.BytesKind:
		writeString(b, base64.StdEncoding.EncodeToString(v.Bytes()))
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			writeString(b, string(ev.Name()))
		} else {
			b.WriteString(strconv.Itoa(int(v.Enum())))
		}
	default:
		return fmt.Errorf("api: cannot render %s of kind %s", fd.FullName(), fd.Kind())
	}
	return nil
}

// writeDouble writes f, the value of a float or double field fd; a number
// that is not finite is an error (JSON has none).
func writeDouble(b *bytes.Buffer, fd protoreflect.FieldDescriptor, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("api: %s is not a finite number", fd.FullName())
	}
	bits := 64
	if fd.Kind() == protoreflect.FloatKind {
		bits = 32
	}
	b.Write(strconv.AppendFloat(b.AvailableBuffer(), f, 'g', -1, bits))
	return nil
}

// writeString writes s as a JSON string exactly as encoding/json does
// (HTML characters escaped, invalid UTF-8 replaced): itself between
// quotes when it holds nothing to escape, the common case.
func writeString(b *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			out, _ := json.Marshal(s) // a string always marshals
			b.Write(out)
			return
		}
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}

// writeStruct, writeStructValue and writeStructList write what a
// google.protobuf.Struct, Value or ListValue holds as encoding/json
// writes its AsMap, AsInterface or AsSlice: keys sorted, numbers in its
// format. A number that is not finite is an error (JSON has none;
// structpb would render it as a string).
func writeStruct(b *bytes.Buffer, s *structpb.Struct) error {
	return writeSortedMap(b, s.GetFields(), func(v *structpb.Value) error { return writeStructValue(b, v) })
}

func writeStructList(b *bytes.Buffer, l *structpb.ListValue) error {
	b.WriteByte('[')
	for i, v := range l.GetValues() {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writeStructValue(b, v); err != nil {
			return err
		}
	}
	b.WriteByte(']')
	return nil
}

func writeStructValue(b *bytes.Buffer, v *structpb.Value) error {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		writeString(b, k.StringValue)
	case *structpb.Value_NumberValue:
		return writeNumber(b, k.NumberValue)
	case *structpb.Value_BoolValue:
		b.WriteString(strconv.FormatBool(k.BoolValue))
	case *structpb.Value_StructValue:
		return writeStruct(b, k.StructValue)
	case *structpb.Value_ListValue:
		return writeStructList(b, k.ListValue)
	default: // null, or no kind: AsInterface's nil
		b.WriteString("null")
	}
	return nil
}

// writeNumber writes f as encoding/json writes a float64.
func writeNumber(b *bytes.Buffer, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return errors.New("holds a non-finite number")
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	out := strconv.AppendFloat(b.AvailableBuffer(), f, format, -1, 64)
	if n := len(out); format == 'e' && n >= 4 && out[n-4] == 'e' && out[n-3] == '-' && out[n-2] == '0' {
		out[n-2] = out[n-1] // e-09 to e-9, as encoding/json
		out = out[:n-1]
	}
	b.Write(out)
	return nil
}
