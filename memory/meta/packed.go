package meta

import (
	"fmt"
	"math"
	"slices"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// A metadata record's evaluation metrics are stored packed (Marshal): not
// as the summary's map — each entry the metric's name and a double,
// 30 bytes, 339 of a record's 399 with the default archetypes' eleven
// metrics (at 1M memories 0.34 GB of the store's 1.86 GB of tables, read
// with every metadata record) — but as a field of the record's own,
// PackedField, that gives each metric by its number in PackedMetrics and
// its value in thousandths (what eumas.Aggregate rounds to): two or three
// bytes a metric. A summary with a metric not in the table, or a value
// that is not a whole number of thousandths (an import's), is stored as
// it is. Every reader of a record decodes both forms (Unmarshal,
// decodePlain; eumas's profiles, RangePacked).
//
// A binary older than the packing would read a packed record's evaluation
// without its metrics (an unknown field): the store's layout 4 has it
// refuse the store instead, and the migration to it packs an older
// store's records (memory/migrate).

// PackedField is the MemoryMeta field number of the packed metrics,
// reserved in memory.proto (TestPackedFieldIsFree) and not declared there:
// MemoryMeta is also the API's message, and the packing is the store's.
const PackedField protowire.Number = 16

// PackedMetrics are the metrics a record's packed field can name, by
// their number there: the default archetypes' (config/archetypes.yaml;
// TestPackedMetricsCoverTheDefaults). Append only: a number, once
// given, names its metric in every store written since
// (TestPackedMetricsAreStable).
var PackedMetrics = [...]string{
	"curiosity_trigger",
	"emotional_clarity",
	"emotional_depth",
	"empathy_level",
	"exploration_value",
	"growth_potential",
	"internal_emotional_state",
	"novelty_factor",
	"ontological_insight",
	"philosophical_depth",
	"self_coherence",
}

var packedNumber = func() map[string]uint64 {
	m := make(map[string]uint64, len(PackedMetrics))
	for i, name := range PackedMetrics {
		m[name] = uint64(i)
	}
	return m
}()

// maxThousandths bounds a packed value: beyond it a double no longer
// holds every whole number of thousandths.
const maxThousandths = 1 << 50

// thousandths is v as a whole number of thousandths, false when v is not
// one exactly (or is -0, NaN or infinite).
func thousandths(v float64) (int64, bool) {
	k := math.Round(v * 1000)
	if math.IsNaN(k) || math.Abs(k) > maxThousandths || float64(k)/1000 != v || v == 0 && math.Signbit(v) {
		return 0, false
	}
	return int64(k), true
}

// packMetrics appends to dst the packed form of metrics, ordered by
// number; false when one of them cannot be packed.
func packMetrics(dst []byte, metrics map[string]float64) ([]byte, bool) {
	type entry struct {
		n uint64
		k int64
	}
	entries := make([]entry, 0, len(metrics))
	for name, v := range metrics {
		n, known := packedNumber[name]
		k, whole := thousandths(v)
		if !known || !whole {
			return dst, false
		}
		entries = append(entries, entry{n, k})
	}
	slices.SortFunc(entries, func(a, b entry) int { return int(a.n) - int(b.n) })
	for _, e := range entries {
		dst = protowire.AppendVarint(dst, e.n)
		dst = protowire.AppendVarint(dst, protowire.EncodeZigZag(e.k))
	}
	return dst, true
}

// RangePacked calls fn with each metric of a packed field's value b, in
// order; an error when b does not parse or names a metric the table does
// not hold.
func RangePacked(b []byte, fn func(name string, value float64)) error {
	for len(b) > 0 {
		num, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return fmt.Errorf("packed metrics: %w", protowire.ParseError(n))
		}
		b = b[n:]
		k, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return fmt.Errorf("packed metrics: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if num >= uint64(len(PackedMetrics)) {
			return fmt.Errorf("packed metrics: metric number %d is not known", num)
		}
		fn(PackedMetrics[num], float64(protowire.DecodeZigZag(k))/1000)
	}
	return nil
}

// unpackInto adds the metrics of a packed field's value b to m's
// evaluation (made when m has none).
func unpackInto(m *messages.MemoryMeta, b []byte) error {
	if m.Evaluation == nil {
		m.Evaluation = &messages.EvalSummary{}
	}
	ev := m.Evaluation
	if ev.Metrics == nil {
		ev.Metrics = make(map[string]float64, len(b)/2)
	}
	return RangePacked(b, func(name string, v float64) { ev.Metrics[name] = v })
}

// Marshal encodes m as its metadata record is stored: its evaluation's
// metrics packed when they can be (PackedField), else as proto.Marshal
// does. m is not changed.
func Marshal(m *messages.MemoryMeta) ([]byte, error) {
	ev := m.GetEvaluation()
	if len(ev.GetMetrics()) == 0 {
		return proto.Marshal(m)
	}
	packed, ok := packMetrics(nil, ev.Metrics)
	if !ok {
		return proto.Marshal(m)
	}
	// Every field but the metrics (TestMarshalCopiesEveryField).
	rest := &messages.MemoryMeta{
		Sonas: m.Sonas, AgentId: m.AgentId, Kind: m.Kind, Backbone: m.Backbone, Archived: m.Archived,
		ExpiresAt: m.ExpiresAt, Importance: m.Importance, AccessCount: m.AccessCount,
		LastAccessTick: m.LastAccessTick, CreatedAt: m.CreatedAt, Labels: m.Labels, Seq: m.Seq,
		Insight: m.Insight, Joins: m.Joins,
		Evaluation: &messages.EvalSummary{Priority: ev.Priority, Failed: ev.Failed},
	}
	rest.ProtoReflect().SetUnknown(m.ProtoReflect().GetUnknown())
	b, err := proto.Marshal(rest)
	if err != nil {
		return nil, err
	}
	b = protowire.AppendTag(b, PackedField, protowire.BytesType)
	return protowire.AppendBytes(b, packed), nil
}

// Unmarshal decodes a stored metadata record into m, in either form
// (Marshal).
func Unmarshal(b []byte, m *messages.MemoryMeta) error {
	if err := proto.Unmarshal(b, m); err != nil {
		return err
	}
	unknown := m.ProtoReflect().GetUnknown()
	if len(unknown) == 0 {
		return nil
	}
	var rest []byte
	for len(unknown) > 0 {
		num, typ, n := protowire.ConsumeField(unknown)
		if n < 0 {
			return protowire.ParseError(n) // proto.Unmarshal parsed it
		}
		field := unknown[:n]
		unknown = unknown[n:]
		if num != PackedField || typ != protowire.BytesType {
			rest = append(rest, field...)
			continue
		}
		_, _, tn := protowire.ConsumeTag(field)
		v, _ := protowire.ConsumeBytes(field[tn:])
		if err := unpackInto(m, v); err != nil {
			return err
		}
	}
	m.ProtoReflect().SetUnknown(rest)
	return nil
}

// Put sets m as c's metadata record in tx (Marshal), leaving its hot
// state's record as it is (Write keeps the two in step).
func Put(tx store.Tx, c cid.Cid, m *messages.MemoryMeta) error {
	b, err := Marshal(m)
	if err != nil {
		return err
	}
	tx.Set(Key(c), b)
	return nil
}
