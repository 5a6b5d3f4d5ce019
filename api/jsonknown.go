package api

import (
	"bytes"
	"fmt"
	"math"
	"strconv"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/memoria-ai/memoria/messages"
)

// writeKnown writes m when it is one of the messages every recalled
// memory is made of (RecalledMemory, Memory, Edge, MemoryMeta,
// EvalSummary, Priority, InsightMark, SonaJoin) from its Go fields, byte
// for byte as writeMessage writes it through protoreflect; ok is false for
// any other. Through protoreflect — each field's descriptor asked, each
// value boxed — rendering a recall's answer was 8% of a recall's CPU at
// 100,000 memories (README, stop 56). TestKnownAsReflected holds every
// field of these to protoreflect's bytes (reflectOnly), so a field added
// to one of them fails it until it is written here.
func writeKnown(b *bytes.Buffer, m protoreflect.Message) (ok bool, err error) {
	switch x := m.Interface().(type) {
	case *messages.RecalledMemory:
		return true, writeRecalled(b, x)
	case *messages.Memory:
		return true, writeMemory(b, x)
	case *messages.Edge:
		return true, writeEdge(b, x)
	case *messages.MemoryMeta:
		return true, writeMemoryMeta(b, x)
	case *messages.EvalSummary:
		return true, writeEvalSummary(b, x)
	case *messages.Priority:
		return true, writePriority(b, x)
	case *messages.InsightMark:
		return true, writeInsightMark(b, x)
	case *messages.SonaJoin:
		return true, writeSonaJoin(b, x)
	}
	return false, nil
}

// jsonObject writes one JSON object's fields in order, each key quoted
// as writeString quotes it (the proto field names need no escaping), and
// keeps the first error: a number that is not finite.
type jsonObject struct {
	b     *bytes.Buffer
	msg   string // the message's full name, for errors
	first bool
	err   error
}

func newObject(b *bytes.Buffer, msg string) *jsonObject {
	b.WriteByte('{')
	return &jsonObject{b: b, msg: msg, first: true}
}

func (o *jsonObject) key(name string) {
	if !o.first {
		o.b.WriteByte(',')
	}
	o.first = false
	o.b.WriteByte('"')
	o.b.WriteString(name)
	o.b.WriteString(`":`)
}

func (o *jsonObject) str(name, v string) {
	o.key(name)
	writeString(o.b, v)
}

func (o *jsonObject) strs(name string, v []string) {
	o.key(name)
	o.b.WriteByte('[')
	for i, s := range v {
		if i > 0 {
			o.b.WriteByte(',')
		}
		writeString(o.b, s)
	}
	o.b.WriteByte(']')
}

func (o *jsonObject) boolean(name string, v bool) {
	o.key(name)
	o.b.WriteString(strconv.FormatBool(v))
}

func (o *jsonObject) int(name string, v int64) {
	o.key(name)
	o.b.Write(strconv.AppendInt(o.b.AvailableBuffer(), v, 10))
}

func (o *jsonObject) uint(name string, v uint64) {
	o.key(name)
	o.b.Write(strconv.AppendUint(o.b.AvailableBuffer(), v, 10))
}

func (o *jsonObject) double(name string, v float64) {
	o.key(name)
	if !writeFloat64(o.b, v) {
		o.keep(fmt.Errorf("api: %s.%s is not a finite number", o.msg, name))
	}
}

// message writes a message field: null when unset.
func (o *jsonObject) message(name string, set bool, write func() error) {
	o.key(name)
	if !set {
		o.b.WriteString("null")
		return
	}
	o.keep(write())
}

// messageList writes a repeated message field, each element by write.
func messageList[T any](o *jsonObject, name string, xs []T, write func(*bytes.Buffer, T) error) {
	o.key(name)
	o.b.WriteByte('[')
	for i, x := range xs {
		if i > 0 {
			o.b.WriteByte(',')
		}
		o.keep(write(o.b, x))
	}
	o.b.WriteByte(']')
}

// keep keeps err if it is the first.
func (o *jsonObject) keep(err error) {
	if o.err == nil {
		o.err = err
	}
}

func (o *jsonObject) labels(name string, v map[string]string) {
	o.key(name)
	writeSortedMap(o.b, v, func(s string) error { writeString(o.b, s); return nil })
}

func (o *jsonObject) end() error {
	o.b.WriteByte('}')
	return o.err
}

func writeRecalled(b *bytes.Buffer, x *messages.RecalledMemory) error {
	o := newObject(b, "memoria.v1.RecalledMemory")
	o.str("cid", x.Cid)
	o.double("score", x.Score)
	o.str("via", x.Via)
	o.message("explain", x.Explain != nil, func() error { return writeMessage(b, x.Explain.ProtoReflect()) })
	o.message("memory", x.Memory != nil, func() error { return writeMemory(b, x.Memory) })
	o.message("rank", x.Rank != nil, func() error {
		b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(*x.Rank), 10))
		return nil
	})
	o.strs("collapsed", x.Collapsed)
	return o.end()
}

func writeMemory(b *bytes.Buffer, x *messages.Memory) error {
	o := newObject(b, "memoria.v1.Memory")
	o.str("cid", x.Cid)
	o.message("data", x.Data != nil, func() error {
		if err := writeStruct(b, x.Data); err != nil {
			return fmt.Errorf("api: google.protobuf.Struct %w", err)
		}
		return nil
	})
	o.message("timestamp", x.Timestamp != nil, func() error {
		b.Write(strconv.AppendInt(b.AvailableBuffer(), *x.Timestamp, 10))
		return nil
	})
	messageList(o, "edges", x.Edges, writeEdge)
	o.message("meta", x.Meta != nil, func() error { return writeMemoryMeta(b, x.Meta) })
	return o.end()
}

func writeEdge(b *bytes.Buffer, x *messages.Edge) error {
	o := newObject(b, "memoria.v1.Edge")
	o.message("target", x.GetTarget() != nil, func() error {
		b.WriteString(`{"/":`)
		writeString(b, x.Target.Cid)
		b.WriteByte('}')
		return nil
	})
	o.double("weight", x.GetWeight())
	return o.end()
}

func writeMemoryMeta(b *bytes.Buffer, x *messages.MemoryMeta) error {
	o := newObject(b, "memoria.v1.MemoryMeta")
	o.strs("sonas", x.Sonas)
	o.str("agent_id", x.AgentId)
	o.str("kind", x.Kind)
	o.boolean("backbone", x.Backbone)
	o.boolean("archived", x.Archived)
	o.int("expires_at", x.ExpiresAt)
	o.double("importance", x.Importance)
	o.int("access_count", x.AccessCount)
	o.int("last_access_tick", x.LastAccessTick)
	o.int("created_at", x.CreatedAt)
	o.labels("labels", x.Labels)
	o.uint("seq", x.Seq)
	o.message("insight", x.Insight != nil, func() error { return writeInsightMark(b, x.Insight) })
	o.message("evaluation", x.Evaluation != nil, func() error { return writeEvalSummary(b, x.Evaluation) })
	messageList(o, "joins", x.Joins, writeSonaJoin)
	return o.end()
}

func writeEvalSummary(b *bytes.Buffer, x *messages.EvalSummary) error {
	o := newObject(b, "memoria.v1.EvalSummary")
	o.key("metrics")
	o.keep(writeMetrics(b, "memoria.v1.EvalSummary.MetricsEntry.value", x.Metrics))
	o.message("priority", x.Priority != nil, func() error { return writePriority(b, x.Priority) })
	o.boolean("failed", x.Failed)
	return o.end()
}

func writePriority(b *bytes.Buffer, x *messages.Priority) error {
	o := newObject(b, "memoria.v1.Priority")
	o.double("score", x.Score)
	o.strs("factors", x.Factors)
	o.double("decay_rate", x.DecayRate)
	return o.end()
}

func writeInsightMark(b *bytes.Buffer, x *messages.InsightMark) error {
	o := newObject(b, "memoria.v1.InsightMark")
	o.str("category", x.Category)
	o.double("confidence", x.Confidence)
	return o.end()
}

func writeSonaJoin(b *bytes.Buffer, x *messages.SonaJoin) error {
	o := newObject(b, "memoria.v1.SonaJoin")
	o.str("sona", x.Sona)
	o.str("agent_id", x.AgentId)
	o.str("kind", x.Kind)
	o.labels("labels", x.Labels)
	o.int("joined_at", x.JoinedAt)
	return o.end()
}

// writeFloat64 writes f, a double, unless it is not finite (JSON has no
// such number): then it writes nothing and returns false.
func writeFloat64(b *bytes.Buffer, f float64) bool {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return false
	}
	b.Write(strconv.AppendFloat(b.AvailableBuffer(), f, 'g', -1, 64))
	return true
}
