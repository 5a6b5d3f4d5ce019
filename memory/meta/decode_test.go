package meta

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/messages"
)

// randomPlain is a record of the fields decodePlain reads, each set or not.
func randomPlain(rng *rand.Rand) *messages.MemoryMeta {
	m := &messages.MemoryMeta{}
	for range rng.IntN(3) {
		m.Sonas = append(m.Sonas, fmt.Sprintf("sona-%d", rng.IntN(5)))
	}
	pick := func() bool { return rng.IntN(2) == 0 }
	if pick() {
		m.AgentId = fmt.Sprintf("agent-%d", rng.IntN(3))
	}
	if pick() {
		m.Kind = []string{"note", "fact", "outcome", ""}[rng.IntN(4)]
	}
	m.Backbone, m.Archived = pick(), pick()
	if pick() {
		m.ExpiresAt = rng.Int64N(2e9) - 1e9
	}
	if pick() {
		m.Importance = rng.Float64()
	}
	if pick() {
		m.AccessCount, m.LastAccessTick = rng.Int64N(1000), rng.Int64N(1e6)
	}
	if pick() {
		m.CreatedAt, m.Seq = rng.Int64N(2e9), rng.Uint64()
	}
	if pick() {
		e := &messages.EvalSummary{Failed: pick()}
		switch rng.IntN(3) {
		case 0:
			e.Metrics = map[string]float64{}
			for range rng.IntN(14) {
				e.Metrics[fmt.Sprintf("metric-%d", rng.IntN(20))] = rng.Float64()
			}
		case 1: // what Marshal packs: the table's metrics, whole thousandths
			e.Metrics = map[string]float64{}
			for range rng.IntN(14) {
				e.Metrics[PackedMetrics[rng.IntN(len(PackedMetrics))]] = float64(rng.IntN(2001)-1000) / 1000
			}
		}
		if pick() {
			e.Priority = &messages.Priority{Score: rng.Float64(), DecayRate: rng.Float64()}
			for range rng.IntN(3) {
				e.Priority.Factors = append(e.Priority.Factors, fmt.Sprintf("factor %d", rng.IntN(9)))
			}
		}
		m.Evaluation = e
	}
	return m
}

// unmarshal is Unmarshal's reading of b, nil when it refuses it.
func unmarshal(b []byte) *messages.MemoryMeta {
	m := &messages.MemoryMeta{}
	if Unmarshal(b, m) != nil {
		return nil
	}
	return m
}

// decodePlain reads as Unmarshal does every record of the fields it
// knows — written by Marshal (its metrics packed or not) or by
// proto.Marshal, or with a field given twice, a map entry missing its
// name or value — and leaves every other record to it.
func TestDecodePlainIsUnmarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 51))
	for i := range 2000 {
		rec := randomPlain(rng)
		marshal := Marshal
		if i%2 == 1 {
			marshal = func(m *messages.MemoryMeta) ([]byte, error) { return proto.Marshal(m) }
		}
		raw, err := marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := decodePlain(raw)
		if want := unmarshal(raw); !ok || !proto.Equal(got, want) || !proto.Equal(got, rec) {
			t.Fatalf("record %d (%x): decoded %v (%v), Unmarshal %v, written %v", i, raw, got, ok, want, rec)
		}
	}
	tag := func(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	str := func(num protowire.Number, s string) []byte {
		return protowire.AppendString(tag(num, protowire.BytesType), s)
	}
	msg := func(num protowire.Number, parts ...[]byte) []byte {
		var body []byte
		for _, p := range parts {
			body = append(body, p...)
		}
		return protowire.AppendBytes(tag(num, protowire.BytesType), body)
	}
	join := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(tag(num, protowire.VarintType), v)
	}
	for name, raw := range map[string][]byte{
		"a kind given twice":             join(str(3, "note"), str(3, "fact")),
		"a metric's name given twice":    msg(14, msg(1, str(1, "a"), protowire.AppendFixed64(tag(2, protowire.Fixed64Type), 7), str(1, "b"))),
		"a metric without its value":     msg(14, msg(1, str(1, "novelty"))),
		"a metric without its name":      msg(14, msg(1, protowire.AppendFixed64(tag(2, protowire.Fixed64Type), 3))),
		"a metric given twice":           msg(14, msg(1, str(1, "a")), msg(1, str(1, "a"), protowire.AppendFixed64(tag(2, protowire.Fixed64Type), 3))),
		"an empty evaluation":            msg(14),
		"a negative expiry":              varint(6, uint64(1<<64-5)),
		"a bool of another value than 1": varint(4, 7),
		"nothing":                        {},
		"packed metrics":                 join(msg(14), msg(16, []byte{0, 2, 10, 1})),
		"packed metrics alone":           msg(16, []byte{1, 0}),
		"a packed metric given twice":    join(msg(14), msg(16, []byte{3, 2, 3, 4})),
	} {
		got, ok := decodePlain(raw)
		if want := unmarshal(raw); !ok || want == nil || !proto.Equal(got, want) {
			t.Errorf("%s (%x): decoded %v (%v), Unmarshal %v", name, raw, got, ok, want)
		}
	}
	for name, raw := range map[string][]byte{
		"labels":                      msg(11, str(1, "k"), str(2, "v")),
		"an insight":                  msg(13, str(1, "pattern")),
		"a join":                      msg(15, str(1, "sona")),
		"an unknown field":            varint(99, 1),
		"an evaluation given twice":   join(msg(14, varint(3, 1)), msg(14, msg(2))),
		"a priority given twice":      msg(14, msg(2, protowire.AppendFixed64(tag(1, protowire.Fixed64Type), 1)), msg(2)),
		"an unknown evaluation field": msg(14, varint(9, 1)),
		"a kind that is not UTF-8":    str(3, "\xff"),
		"a metric name not UTF-8":     msg(14, msg(1, str(1, "\xfe"))),
		"a factor not UTF-8":          msg(14, msg(2, str(2, "\xfe"))),
		"a truncated field":           tag(7, protowire.Fixed64Type),
		"a sona as a number":          varint(1, 3),
		"an importance as a varint":   varint(7, 3),
		"packed metrics given twice":  join(msg(16, []byte{0, 2}), msg(16, []byte{1, 2})),
		"an evaluation after packed":  join(msg(16, []byte{0, 2}), msg(14)),
		"a packed metric not known":   msg(16, []byte{byte(len(PackedMetrics)), 2}),
		"packed metrics truncated":    msg(16, []byte{0}),
		"packed metrics as a number":  varint(16, 3),
	} {
		if got, ok := decodePlain(raw); ok {
			t.Errorf("%s (%x): decoded %v, not left to Unmarshal", name, raw, got)
		}
	}
}

// A record decoded by hand shares its strings with one proto.Unmarshal
// read and intern shared.
func TestDecodePlainInterns(t *testing.T) {
	rec := &messages.MemoryMeta{Sonas: []string{"shared-sona"}, Kind: "note",
		Evaluation: &messages.EvalSummary{Metrics: map[string]float64{"shared-metric": 1}}}
	plain, err := proto.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.Labels = map[string]string{"k": "v"} // left to proto.Unmarshal
	labelled, err := proto.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	a, errA := decodeMeta(plain, cid.Undef)
	b, errB := decodeMeta(labelled, cid.Undef)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	var ma, mb string
	for k := range a.Evaluation.Metrics {
		ma = k
	}
	for k := range b.Evaluation.Metrics {
		mb = k
	}
	if !same(a.Sonas[0], b.Sonas[0]) || !same(a.Kind, b.Kind) || !same(ma, mb) {
		t.Fatalf("the two records hold their own copies: sona %v, kind %v, metric %v", same(a.Sonas[0], b.Sonas[0]), same(a.Kind, b.Kind), same(ma, mb))
	}
}

// A record of one sona decodes into one object (its sona's place in the
// record's), with three more for its evaluation and its metrics' map: the
// collector marks them while the metadata cache holds the record (the
// sonas a slice of their own made them two and five).
func TestDecodePlainIsFewObjects(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  *messages.MemoryMeta
		want float64
	}{
		{"one sona", &messages.MemoryMeta{Sonas: []string{"sona"}, Kind: "note", Importance: 0.5, CreatedAt: 1}, 1},
		{"evaluated", &messages.MemoryMeta{Sonas: []string{"sona"}, Evaluation: &messages.EvalSummary{Metrics: map[string]float64{"m": 1}}}, 4},
	} {
		raw, err := proto.Marshal(tc.rec)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := decodePlain(raw); !ok || !proto.Equal(got, tc.rec) {
			t.Fatalf("%s: decoded %v (%v), want %v", tc.name, got, ok, tc.rec)
		}
		if n := testing.AllocsPerRun(100, func() { decodePlain(raw) }); n > tc.want {
			t.Errorf("%s: %v objects a decode, want at most %v", tc.name, n, tc.want)
		}
	}
}

// FuzzDecodePlain: whatever decodePlain reads, Unmarshal reads the same.
func FuzzDecodePlain(f *testing.F) {
	rng := rand.New(rand.NewPCG(2, 51))
	for range 8 {
		raw, _ := Marshal(randomPlain(rng))
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := decodePlain(raw)
		if !ok {
			return
		}
		if want := unmarshal(raw); want == nil || !proto.Equal(got, want) {
			t.Fatalf("%x: decoded %v, Unmarshal %v", raw, got, want)
		}
	})
}
