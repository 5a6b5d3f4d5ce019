package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/messages"
)

func marshal(t *testing.T, m proto.Message) string {
	t.Helper()
	out, err := MarshalJSON(m)
	if err != nil {
		t.Fatalf("MarshalJSON(%v): %v", m, err)
	}
	if !json.Valid(out) {
		t.Fatalf("MarshalJSON(%v) is not valid JSON: %s", m, out)
	}
	return string(out)
}

// decodeAny decodes JSON with numbers as json.Number.
func decodeAny(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

func TestMarshalInt64AsNumbers(t *testing.T) {
	got := marshal(t, &messages.Health{Status: "ok", Sonas: 3, Memories: math.MaxInt64, Indexed: -1})
	want := `{"status":"ok","sonas":3,"memories":9223372036854775807,"indexed":-1,"reason":null}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Zero scalars are written, not omitted.
	if got := marshal(t, &messages.Health{}); got != `{"status":"","sonas":0,"memories":0,"indexed":0,"reason":null}` {
		t.Fatalf("zero Health = %s", got)
	}
	if got := marshal(t, &messages.InsertResponse{Cid: "c", Seq: proto.Int64(1 << 60), Existed: false}); got != `{"cid":"c","seq":1152921504606846976,"existed":false,"deduplicated":false,"similarity":null,"threshold":null,"replayed":false}` {
		t.Fatalf("InsertResponse = %s", got)
	}
}

func TestMarshalNulls(t *testing.T) {
	// An unset message field is null.
	if got := marshal(t, &messages.ErrorResponse{}); got != `{"error":null}` {
		t.Fatalf("ErrorResponse{} = %s", got)
	}
	if got := marshal(t, &messages.ChatResponse{}); got != `{"input":null,"response":null,"recalled":[]}` {
		t.Fatalf("ChatResponse{} = %s", got)
	}
	// An unset proto3 optional is null; a set one is its value, even zero.
	got := marshal(t, &messages.Sona{Uuid: "u", Name: "n"})
	if want := `{"uuid":"u","name":"n","head":null,"length":0,"created_at":0,"last_memory":null}`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	got = marshal(t, &messages.Sona{Head: proto.String(""), LastMemory: proto.String("m")})
	if want := `{"uuid":"","name":"","head":"","length":0,"created_at":0,"last_memory":"m"}`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := marshal(t, &messages.InsertResponse{Seq: proto.Int64(0)}); got != `{"cid":"","seq":0,"existed":false,"deduplicated":false,"similarity":null,"threshold":null,"replayed":false}` {
		t.Fatalf("seq 0 = %s", got)
	}
	if got := marshal(t, &messages.InsertResponse{Existed: true}); got != `{"cid":"","seq":null,"existed":true,"deduplicated":false,"similarity":null,"threshold":null,"replayed":false}` {
		t.Fatalf("seq unset = %s", got)
	}
	if got := marshal(t, &messages.ListSonasResponse{}); got != `{"items":[],"next_cursor":null}` {
		t.Fatalf("ListSonasResponse{} = %s", got)
	}
}

func TestMarshalEmptyCollections(t *testing.T) {
	got := marshal(t, &messages.Memory{Cid: "c"})
	want := `{"cid":"c","data":null,"timestamp":null,"edges":[],"meta":null}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	got = marshal(t, &messages.MemoryMeta{})
	m := decodeAny(t, got).(map[string]any)
	if !reflect.DeepEqual(m["sonas"], []any{}) || !reflect.DeepEqual(m["labels"], map[string]any{}) {
		t.Fatalf("empty repeated/map fields: %s", got)
	}
	if len(m) != 15 {
		t.Fatalf("MemoryMeta{} has %d keys, want all 15: %s", len(m), got)
	}
}

func TestMarshalMapKeysSorted(t *testing.T) {
	meta := &messages.MemoryMeta{Labels: map[string]string{"zeta": "1", "alpha": "2", "Mid": "3", "b": "", "a\"q": "x"}}
	got := marshal(t, meta)
	want := `"labels":{"Mid":"3","a\"q":"x","alpha":"2","b":"","zeta":"1"}`
	if !strings.Contains(got, want) {
		t.Fatalf("labels not sorted/escaped: %s", got)
	}
	// The output is the same every time.
	for range 20 {
		if again := marshal(t, meta); again != got {
			t.Fatalf("unstable output:\n%s\n%s", got, again)
		}
	}
}

// The maps written straight from their Go maps (labels, evaluation
// metrics: writeMapField) are the bytes protoreflect's path writes
// (writeMap), whatever their keys and values; a number that is not finite
// is an error on both.
func TestMarshalMapsAsReflected(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	keys := []string{"a", "b", "Mid", "zeta", "", "a\"q", "<tag>", "é", "日本", "\x01", "novelty_factor"}
	floats := []float64{0, 1, -0.5, 1e-7, 1e21, 0.1 + 0.2, 123456789.125, math.SmallestNonzeroFloat64}
	for i := range 200 {
		labels, metrics := map[string]string{}, map[string]float64{}
		for range rng.IntN(len(keys) + 1) {
			labels[keys[rng.IntN(len(keys))]] = keys[rng.IntN(len(keys))]
			metrics[keys[rng.IntN(len(keys))]] = floats[rng.IntN(len(floats))]
		}
		if i%3 == 0 {
			labels, metrics = nil, nil
		}
		for _, m := range []proto.Message{
			&messages.MemoryMeta{Labels: labels},
			&messages.SonaJoin{Labels: labels},
			&messages.EvalSummary{Metrics: metrics},
		} {
			mapAsReflected(t, m)
		}
	}
	// More names than the known order holds: each map's sorted again.
	for i := range 3 * knownMetrics {
		mapAsReflected(t, &messages.EvalSummary{Metrics: map[string]float64{fmt.Sprintf("m%03d", i): 1, fmt.Sprintf("m%03d", (i*7)%(3*knownMetrics)): 0.5, "a": 2}})
	}
	if !metricsFull.Load() {
		t.Errorf("%d metric names met, the known order not full", 3*knownMetrics)
	}
	ev := (&messages.EvalSummary{Metrics: map[string]float64{"x": math.Inf(1)}}).ProtoReflect()
	if err := writeMapField(new(bytes.Buffer), ev, ev.Descriptor().Fields().ByName("metrics")); err == nil {
		t.Fatal("an infinite metric rendered")
	}
}

// mapAsReflected checks that m's map field (an EvalSummary's metrics,
// else labels) is written as protoreflect's path writes it.
func mapAsReflected(t *testing.T, m proto.Message) {
	t.Helper()
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName(map[bool]protoreflect.Name{true: "metrics", false: "labels"}[r.Descriptor().Name() == "EvalSummary"])
	var fast, reflected bytes.Buffer
	if err := writeMapField(&fast, r, fd); err != nil {
		t.Fatal(err)
	}
	if err := writeMap(&reflected, fd, r.Get(fd).Map()); err != nil {
		t.Fatal(err)
	}
	if fast.String() != reflected.String() {
		t.Fatalf("%s.%s: %s, protoreflect's path %s", r.Descriptor().Name(), fd.Name(), fast.String(), reflected.String())
	}
}

func TestMarshalLink(t *testing.T) {
	e := &messages.Edge{Target: &messages.Link{Cid: "bafyabc"}, Weight: 0.5}
	if got := marshal(t, e); got != `{"target":{"/":"bafyabc"},"weight":0.5}` {
		t.Fatalf("Edge = %s", got)
	}
	if got := marshal(t, &messages.Link{Cid: "bafy\"x"}); got != `{"/":"bafy\"x"}` {
		t.Fatalf("Link = %s", got)
	}
	if got := marshal(t, &messages.Edge{}); got != `{"target":null,"weight":0}` {
		t.Fatalf("Edge{} = %s", got)
	}
}

func TestMarshalStruct(t *testing.T) {
	data, err := structpb.NewStruct(map[string]any{
		"kind": "file", "name": "a<b>&c", "content": map[string]any{"/": "bafkq"},
		"n": 1.5, "list": []any{"x", true, nil}, "nested": map[string]any{"deep": map[string]any{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := marshal(t, &messages.Memory{Cid: "c", Data: data, Timestamp: proto.Int64(7)})
	var parsed struct {
		Data      map[string]any `json:"data"`
		Timestamp json.Number    `json:"timestamp"`
	}
	dec := json.NewDecoder(strings.NewReader(got))
	dec.UseNumber()
	if err := dec.Decode(&parsed); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"kind": "file", "name": "a<b>&c", "content": map[string]any{"/": "bafkq"},
		"n": json.Number("1.5"), "list": []any{"x", true, nil}, "nested": map[string]any{"deep": map[string]any{}},
	}
	if !reflect.DeepEqual(parsed.Data, want) {
		t.Fatalf("data passed through as %v, want %v", parsed.Data, want)
	}
	if parsed.Timestamp != "7" {
		t.Fatalf("timestamp %q", parsed.Timestamp)
	}
	// A bare Struct and Value are their plain JSON.
	if got := decodeAny(t, marshal(t, data)); !reflect.DeepEqual(got, want) {
		t.Fatalf("Struct = %v", got)
	}
	if got := marshal(t, structpb.NewStringValue("x")); strings.TrimSpace(got) != `"x"` {
		t.Fatalf("Value = %s", got)
	}
}

func TestMarshalFloats(t *testing.T) {
	got := marshal(t, &messages.Explain{Relevance: 0.1, KindWeight: 1, Recency: 1e-9, Importance: 0, SonaSimilarity: 123456789.25})
	m := decodeAny(t, got).(map[string]any)
	for k, want := range map[string]float64{"relevance": 0.1, "kind_weight": 1, "recency": 1e-9, "importance": 0, "sona_similarity": 123456789.25} {
		n, ok := m[k].(json.Number)
		if !ok {
			t.Fatalf("%s is %T in %s", k, m[k], got)
		}
		if f, _ := n.Float64(); f != want {
			t.Fatalf("%s = %v, want %v", k, f, want)
		}
	}
	// float32 values render at float32 precision.
	got = marshal(t, &messages.AppendMemory{Embedding: []float32{0.1, -2.5, 1e-7}})
	if !strings.Contains(got, `"embedding":[0.1,-2.5,1e-07]`) {
		t.Fatalf("float32 list = %s", got)
	}
	// Bytes are base64.
	if !strings.Contains(marshal(t, &messages.AppendMemory{Block: []byte{0xff, 0, 1}}), `"block":"/wAB"`) {
		t.Fatal("bytes are not standard base64")
	}
}

func TestMarshalNonFinite(t *testing.T) {
	for _, m := range []proto.Message{
		&messages.ScoredRef{Cid: "c", Score: math.NaN()},
		&messages.ScoredRef{Cid: "c", Score: math.Inf(1)},
		&messages.Edge{Weight: math.Inf(-1)},
		&messages.ChatResponse{Recalled: []*messages.ScoredRef{{Score: 1}, {Score: math.NaN()}}},
		&messages.AppendMemory{Embedding: []float32{float32(math.NaN())}},
		&messages.Memory{Data: &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewNumberValue(math.NaN())}}},
	} {
		if out, err := MarshalJSON(m); err == nil {
			t.Fatalf("MarshalJSON(%v) = %s, want an error", m, out)
		}
	}
}

func TestMarshalErrorResponseShape(t *testing.T) {
	rec := httptest.NewRecorder()
	writeError(rec, http.StatusTeapot, "code_x", `msg "quoted" <b>`)
	if rec.Code != http.StatusTeapot || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("writeError: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var body map[string]map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(body, map[string]map[string]string{"error": {"code": "code_x", "message": `msg "quoted" <b>`}}) {
		t.Fatalf("body %v", body)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	data, err := structpb.NewStruct(map[string]any{"kind": "text", "content": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []proto.Message{
		&messages.Sona{Uuid: "u", Name: "alice", Length: 3, CreatedAt: 1700000000, Head: proto.String("bafyhead")},
		&messages.Sona{Uuid: "u", Name: "empty"},
		&messages.InsertRequest{
			Sona: "alice", Data: data, Kind: "fact", AgentId: "a", Timestamp: proto.Int64(math.MaxInt64),
			Labels: map[string]string{"b": "2", "a": "1"},
			Edges:  []*messages.Edge{{Target: &messages.Link{Cid: "bafy1"}, Weight: 0.25}, {Target: &messages.Link{Cid: "bafy2"}, Weight: 1}},
		},
		&messages.InsertRequest{Sona: "s"},
		&messages.ChatRequest{Content: "hi", Name: "bob", AgentId: "x", K: 5, BudgetChars: 100},
		&messages.RecallResponse{Memories: []*messages.RecalledMemory{{
			Cid: "c", Score: 0.75, Via: "hit", Explain: &messages.Explain{Relevance: 0.5},
			Memory: &messages.Memory{Cid: "c", Data: data, Edges: []*messages.Edge{{Target: &messages.Link{Cid: "t"}, Weight: 1}},
				Meta: &messages.MemoryMeta{Sonas: []string{"u"}, Kind: "note", CreatedAt: 5, Labels: map[string]string{"k": "v"}}},
		}}},
		&messages.ListMemoriesResponse{NextCursor: proto.String("")},
		&messages.ListSonasResponse{Items: []*messages.Sona{{Uuid: "a"}}, NextCursor: proto.String("a")},
		&messages.Health{Status: "ok", Sonas: 1, Memories: 2, Indexed: 2},
		&messages.ErrorResponse{Error: &messages.ErrorBody{Code: "c", Message: "m"}},
		&messages.ErrorResponse{},
		&messages.AppendMemory{Sona: "s", Block: []byte{1, 2, 3}, Embedding: []float32{0.5, -1}},
	} {
		out := marshal(t, m)
		back := m.ProtoReflect().New().Interface()
		if err := UnmarshalJSON([]byte(out), back); err != nil {
			t.Fatalf("UnmarshalJSON(%s): %v", out, err)
		}
		if !proto.Equal(back, m) {
			t.Fatalf("round trip of %s gave %v, want %v", out, back, m)
		}
		if again := marshal(t, back); again != out {
			t.Fatalf("second marshal differs:\n%s\n%s", out, again)
		}
	}
}

func TestUnmarshalStrict(t *testing.T) {
	for _, tc := range []struct {
		in string
		m  proto.Message
	}{
		{`{"name":"a","extra":1}`, &messages.CreateSonaRequest{}},
		{`{"name":1}`, &messages.CreateSonaRequest{}},
		{`{"k":"five","content":"x"}`, &messages.ChatRequest{}},
		{`{"k":1.5,"content":"x"}`, &messages.ChatRequest{}},
		{`{"k":3000000000,"content":"x"}`, &messages.ChatRequest{}},
		{`[]`, &messages.ChatRequest{}},
		{`{"content":"x"} trailing`, &messages.ChatRequest{}},
		{`{"data":"text"}`, &messages.InsertRequest{}},
		{`{"labels":{"a":1}}`, &messages.InsertRequest{}},
		{`{"edges":[{"target":"bafy"}]}`, &messages.InsertRequest{}},
	} {
		if err := UnmarshalJSON([]byte(tc.in), tc.m); err == nil {
			t.Fatalf("UnmarshalJSON(%s) into %T succeeded: %v", tc.in, tc.m, tc.m)
		}
	}
	// Both spellings of field names are accepted, and int64 as a string.
	var req messages.ChatRequest
	if err := UnmarshalJSON([]byte(`{"content":"x","agentId":"a","budget_chars":9}`), &req); err != nil {
		t.Fatal(err)
	}
	if req.AgentId != "a" || req.BudgetChars != 9 {
		t.Fatalf("%v", &req)
	}
	var ins messages.InsertRequest
	if err := UnmarshalJSON([]byte(`{"timestamp":"12","edges":[{"target":{"/":"bafy"},"weight":1}]}`), &ins); err != nil {
		t.Fatal(err)
	}
	if ins.GetTimestamp() != 12 || ins.Edges[0].GetTarget().GetCid() != "bafy" {
		t.Fatalf("%v", &ins)
	}
	if !bytes.Contains([]byte(marshal(t, &ins)), []byte(`"timestamp":12`)) {
		t.Fatal("timestamp not rendered as a number")
	}
}

// TestMarshalStructIsStable: the same value always renders the same bytes
// (protojson varies its whitespace from run to run on purpose).
func TestMarshalStructIsStable(t *testing.T) {
	data, err := structpb.NewStruct(map[string]any{"kind": "text", "content": "a, b", "n": 1.5, "list": []any{"x", map[string]any{"/": "bafy"}}})
	if err != nil {
		t.Fatal(err)
	}
	m := &messages.Memory{Cid: "c", Data: data}
	first, err := MarshalJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cid":"c","data":{"content":"a, b","kind":"text","list":["x",{"/":"bafy"}],"n":1.5},"timestamp":null,"edges":[],"meta":null}`
	if string(first) != want {
		t.Fatalf("got  %s\nwant %s", first, want)
	}
	for i := 0; i < 20; i++ {
		if again, _ := MarshalJSON(m); string(again) != string(first) {
			t.Fatalf("unstable rendering:\n%s\n%s", first, again)
		}
	}
}

// recallResponse is a recall's answer of n memories as the server renders
// them: data, metadata with an evaluation of eleven metrics.
func recallResponse(n int) *messages.RecallResponse {
	metrics := map[string]float64{}
	for _, m := range []string{"curiosity_trigger", "emotional_clarity", "emotional_depth", "empathy_level", "exploration_value",
		"growth_potential", "internal_emotional_state", "novelty_factor", "ontological_insight", "philosophical_depth", "self_coherence"} {
		metrics[m] = float64(len(m)) / 40
	}
	resp := &messages.RecallResponse{}
	for i := range n {
		data, _ := structpb.NewStruct(map[string]any{"kind": "other", "name": "user",
			"content": strings.Repeat("lbonli ahpklojc nad amje iloifgb ", 3+i%3)})
		c := "bafyreigch6thtomouywubtzdvm5fxozfvscfcpt7n257qoi4tywzme2eiu"
		resp.Memories = append(resp.Memories, &messages.RecalledMemory{Cid: c, Score: 0.5388236677223863, Via: "hit", Rank: proto.Int32(int32(i + 1)),
			Memory: &messages.Memory{Cid: c, Data: data, Timestamp: proto.Int64(1795844497),
				Edges: []*messages.Edge{{Target: &messages.Link{Cid: c}, Weight: 0.25}},
				Meta: &messages.MemoryMeta{Sonas: []string{"0341c06c-66c1-416b-afd8-92fc081e8b0d"}, Kind: "note", Importance: 0.9407080707067969,
					AccessCount: 98, LastAccessTick: 197, CreatedAt: 1795844497, Seq: 13,
					Evaluation: &messages.EvalSummary{Metrics: metrics, Priority: &messages.Priority{DecayRate: 1}}}}})
	}
	return resp
}

// BenchmarkMarshalRecall renders a recall's answer of 30 memories (about
// 40 kB of JSON), as POST /sona/{uuid}/recall does (writeJSON).
func BenchmarkMarshalRecall(b *testing.B) {
	resp := recallResponse(30)
	b.ReportAllocs()
	for b.Loop() {
		writeJSON(httptest.NewRecorder(), http.StatusOK, resp)
	}
}

// Strings and Struct values render byte for byte as encoding/json renders
// them (the writer's fast paths skip it).
func TestMarshalAsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "Maya", " ", `"`, `\`, "<", ">", "&", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "日本",
		"\u2028", "\u2029", "\xff", "\xe2\x82", "😀", "/", "'", "{", "}"}
	randString := func() string {
		var sb strings.Builder
		for range rng.IntN(8) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return sb.String()
	}
	numbers := []float64{0, 1, -1, 0.5, 1e-6, 1e-7, 9.99e-7, -3e-9, 1e20, 1e21, 1.5e300, 123456789, 0.1 + 0.2, math.SmallestNonzeroFloat64, math.MaxFloat64}
	var value func(depth int) *structpb.Value
	value = func(depth int) *structpb.Value {
		switch n := rng.IntN(7); {
		case n == 0 && depth < 3:
			fields := map[string]*structpb.Value{}
			for range rng.IntN(4) {
				fields[randString()] = value(depth + 1)
			}
			return structpb.NewStructValue(&structpb.Struct{Fields: fields})
		case n == 1 && depth < 3:
			var l []*structpb.Value
			for range rng.IntN(4) {
				l = append(l, value(depth+1))
			}
			return structpb.NewListValue(&structpb.ListValue{Values: l})
		case n == 2:
			return structpb.NewNumberValue(numbers[rng.IntN(len(numbers))] * float64(1-2*rng.IntN(2)))
		case n == 3:
			return structpb.NewBoolValue(rng.IntN(2) == 0)
		case n == 4:
			return structpb.NewNullValue()
		default:
			return structpb.NewStringValue(randString())
		}
	}
	for range 3000 {
		s := randString()
		var b bytes.Buffer
		writeString(&b, s)
		if want, _ := json.Marshal(s); b.String() != string(want) {
			t.Fatalf("%q: %s, want %s", s, b.String(), want)
		}
		v := value(0)
		b.Reset()
		if err := writeStructValue(&b, v); err != nil {
			t.Fatal(err)
		}
		if want, _ := json.Marshal(v.AsInterface()); b.String() != string(want) {
			t.Fatalf("%v:\n got %s\nwant %s", v, b.String(), want)
		}
	}
}

// Every message writeKnown writes is written byte for byte as
// protoreflect's path writes it: with every field set (two of each list
// and map, every nested message), with none set, and with each field
// alone. A field added to one of these messages and not to its writer
// fails here.
func TestKnownAsReflected(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, m := range []proto.Message{
		&messages.RecalledMemory{}, &messages.Memory{}, &messages.Edge{}, &messages.MemoryMeta{},
		&messages.EvalSummary{}, &messages.Priority{}, &messages.InsightMark{}, &messages.SonaJoin{},
	} {
		if ok, _ := writeKnown(new(bytes.Buffer), m.ProtoReflect()); !ok {
			t.Fatalf("%T is not written by writeKnown", m)
		}
		knownAsReflected(t, m) // nothing set
		full := proto.Clone(m)
		fill(full.ProtoReflect(), rng, 0)
		knownAsReflected(t, full)
		fields := m.ProtoReflect().Descriptor().Fields()
		for i := range fields.Len() {
			one := proto.Clone(m).ProtoReflect()
			one.Set(fields.Get(i), full.ProtoReflect().Get(fields.Get(i)))
			knownAsReflected(t, one.Interface())
		}
	}
	// A non-finite number fails both ways.
	for _, m := range []proto.Message{
		&messages.MemoryMeta{Importance: math.NaN()},
		&messages.Memory{Meta: &messages.MemoryMeta{Evaluation: &messages.EvalSummary{Metrics: map[string]float64{"x": math.Inf(-1)}}}},
		&messages.RecalledMemory{Memory: &messages.Memory{Edges: []*messages.Edge{{Weight: math.Inf(1)}}}},
	} {
		if _, err := MarshalJSON(m); err == nil {
			t.Errorf("%v rendered", m)
		}
		reflectOnly.Store(true)
		_, err := MarshalJSON(m)
		reflectOnly.Store(false)
		if err == nil {
			t.Errorf("%v rendered through protoreflect", m)
		}
	}
}

// knownAsReflected checks that m renders the same with writeKnown and
// through protoreflect alone.
func knownAsReflected(t *testing.T, m proto.Message) {
	t.Helper()
	fast, err := MarshalJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	reflectOnly.Store(true)
	reflected, err := MarshalJSON(m)
	reflectOnly.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fast, reflected) {
		t.Fatalf("%T:\n      known %s\nprotoreflect %s", m, fast, reflected)
	}
}

// fill sets every field of m to a value other than its default: two
// entries of each list and map, nested messages filled in turn (to a
// depth), strings that need escaping among them.
func fill(m protoreflect.Message, rng *rand.Rand, depth int) {
	strs := []string{"note", `a"b<c>&`, "é日本", "bafyreigch6thtomouywubtzdvm5fxozfvscfcpt7n257qoi4tywzme2eiu", "x\ny"}
	scalar := func(fd protoreflect.FieldDescriptor) protoreflect.Value {
		switch fd.Kind() {
		case protoreflect.BoolKind:
			return protoreflect.ValueOfBool(true)
		case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
			return protoreflect.ValueOfInt32(int32(rng.IntN(1000) + 1))
		case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
			return protoreflect.ValueOfInt64(rng.Int64N(1<<40) - 1<<39 + 1)
		case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
			return protoreflect.ValueOfUint32(uint32(rng.IntN(1000) + 1))
		case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
			return protoreflect.ValueOfUint64(rng.Uint64()>>1 + 1)
		case protoreflect.FloatKind:
			return protoreflect.ValueOfFloat32(rng.Float32() + 0.5)
		case protoreflect.DoubleKind:
			return protoreflect.ValueOfFloat64([]float64{0.1 + 0.2, 1e-7, 123456789.125, 0.9407080707067969}[rng.IntN(4)])
		case protoreflect.StringKind:
			return protoreflect.ValueOfString(strs[rng.IntN(len(strs))])
		case protoreflect.BytesKind:
			return protoreflect.ValueOfBytes([]byte{1, 2, 3})
		case protoreflect.EnumKind:
			return protoreflect.ValueOfEnum(fd.Enum().Values().Get(fd.Enum().Values().Len() - 1).Number())
		}
		panic(fd.FullName())
	}
	if s, ok := m.Interface().(*structpb.Struct); ok {
		s.Fields = map[string]*structpb.Value{"kind": structpb.NewStringValue("text"), "content": structpb.NewStringValue(strs[rng.IntN(len(strs))])}
		return
	}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range 2 {
				if fd.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					fill(e.Message(), rng, depth+1)
					l.Append(e)
				} else {
					l.Append(scalar(fd))
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for _, k := range []string{"zeta", "alpha"} {
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					v := mp.NewValue()
					fill(v.Message(), rng, depth+1)
					mp.Set(protoreflect.ValueOfString(k).MapKey(), v)
				} else {
					mp.Set(protoreflect.ValueOfString(k).MapKey(), scalar(fd.MapValue()))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth < 4 {
				fill(m.Mutable(fd).Message(), rng, depth+1)
			}
		default:
			m.Set(fd, scalar(fd))
		}
	}
}
