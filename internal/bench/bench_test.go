package bench

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/loadgen"
	"github.com/memoria-ai/memoria/internal/metrics"
)

func TestSizes(t *testing.T) {
	for s, want := range map[string]int{"10000": 10000, "10k": 10000, "1.5k": 1500, "1m": 1_000_000, "2.5M": 2_500_000, " 300K ": 300_000} {
		if n, err := ParseSize(s); err != nil || n != want {
			t.Errorf("ParseSize(%q) = %d, %v", s, n, err)
		}
	}
	for _, bad := range []string{"", "0", "-5", "1.2345k", "x", "10kk", "2g", "1e12"} {
		if _, err := ParseSize(bad); !errors.Is(err, ErrOptions) {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	for _, n := range []int{1, 999, 1000, 1500, 10_000, 123_456, 300_000, 1_000_000, 2_500_000} {
		if got, err := ParseSize(FormatSize(n)); err != nil || got != n {
			t.Errorf("%d → %q → %d, %v", n, FormatSize(n), got, err)
		}
	}
}

func TestSteps(t *testing.T) {
	for _, c := range []struct {
		from, to int
		want     []int
	}{
		{0, 300_000, []int{10_000, 20_000, 50_000, 100_000, 200_000, 300_000}},
		{10_000, 100_000, []int{20_000, 50_000, 100_000}},
		{0, 500, []int{500}},
		{100_000, 1_000_000, []int{200_000, 500_000, 1_000_000}},
	} {
		if got := steps(c.from, c.to); !slices.Equal(got, c.want) {
			t.Errorf("steps(%d, %d) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}

func TestQuiet(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64, cpu time.Duration) loadgen.ProcSample {
		return loadgen.ProcSample{At: t0.Add(time.Duration(s * float64(time.Second))), CPU: cpu}
	}
	q := &quiet{share: 0.1}
	// busy (a whole core) for 4 s, then 20 ms of CPU a second
	cpu := time.Duration(0)
	for s := 0.0; s <= 4; s += 0.5 {
		if _, ok := q.add(at(s, cpu)); ok {
			t.Fatalf("quiet while busy at %.1f s", s)
		}
		cpu += 500 * time.Millisecond
	}
	cpu -= 500 * time.Millisecond
	var got time.Time
	for s := 4.5; s <= 10; s += 0.5 {
		cpu += 10 * time.Millisecond
		if start, ok := q.add(at(s, cpu)); ok {
			got = start
			break
		}
	}
	if want := t0.Add(4 * time.Second); !got.Equal(want) {
		t.Fatalf("quiet from %v, want %v", got.Sub(t0), want.Sub(t0))
	}
}

func TestExactSearchAndRecallAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vecs := make([][]float32, 500)
	for i := range vecs {
		vecs[i] = unit(rng, 16)
	}
	q := vecs[42]
	got := exactSearch(vecs, q, 10)
	if len(got) != 10 || got[0] != 42 {
		t.Fatalf("exact search %v", got)
	}
	// best first, and nothing outside beats the tenth
	dot := func(a, b []float32) (s float32) {
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	for i := 1; i < len(got); i++ {
		if dot(q, vecs[got[i]]) > dot(q, vecs[got[i-1]])+1e-6 {
			t.Fatalf("not best first: %v", got)
		}
	}
	for id, v := range vecs {
		if !slices.Contains(got, id) && dot(q, v) > dot(q, vecs[got[9]])+1e-6 {
			t.Fatalf("%d is nearer than the tenth", id)
		}
	}
	if r := *recallAt([][]int{got, got}, [][]int{got, got[:5]}); r != 0.75 {
		t.Fatalf("recall@10 %v", r)
	}
}

func unit(rng *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	var n float32
	for i := range v {
		v[i] = float32(rng.NormFloat64())
		n += v[i] * v[i]
	}
	for i := range v {
		v[i] /= float32(math.Sqrt(float64(n)))
	}
	return v
}

func TestCorpora(t *testing.T) {
	a, b := NewSynthetic(3), NewSynthetic(3)
	if a.Text(17) != b.Text(17) || a.Text(17) == a.Text(18) || NewSynthetic(4).Text(17) == a.Text(17) {
		t.Fatal("synthetic texts are not a function of seed and index")
	}
	if n := len(strings.Fields(a.Text(5))); n < 6 || n > 20 {
		t.Fatalf("%d words", n)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	text := "one two three four five six seven"
	q := strings.Fields(Query(text, rng))
	if len(q) != queryWords {
		t.Fatalf("query %v", q)
	}
	pos := -1
	for _, w := range q { // words of the text, in its order
		i := slices.Index(strings.Fields(text), w)
		if i <= pos {
			t.Fatalf("query %v out of the text's order", q)
		}
		pos = i
	}
	if Query("short text", rng) != "short text" {
		t.Fatal("a short text is its own query")
	}

	dir := t.TempDir()
	conv := `{"speaker_a":"Ann","speaker_b":"Bo","session_1_date_time":"1:56 pm on 8 May, 2023",
	 "session_1":[{"speaker":"Ann","dia_id":"D1:1","text":"I planted tomatoes in the garden today"},
	              {"speaker":"Bo","dia_id":"D1:2","text":"Lovely, which kind of tomatoes?"}],
	 "qa":[]}`
	if err := os.WriteFile(filepath.Join(dir, "conv-1.json"), []byte(conv), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := LoadLoCoMo(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if l.Text(0) != "Ann: I planted tomatoes in the garden today" || l.Text(1) != "Bo: Lovely, which kind of tomatoes?" {
		t.Fatalf("turns %q, %q", l.Text(0), l.Text(1))
	}
	// past the turns: the same turn, perturbed, reproducibly
	if r := l.Text(2); r == l.Text(0) || len(strings.Fields(r)) != len(strings.Fields(l.Text(0))) || r != l.Text(2) {
		t.Fatalf("repetition %q of %q", r, l.Text(0))
	}
	if _, err := LoadLoCoMo(t.TempDir(), 1); err == nil {
		t.Fatal("an empty directory was read as LoCoMo")
	}
}

func sampleReport() *Report {
	f := func(v float64) *float64 { return &v }
	rep := &Report{Format: ReportFormat, StartedAt: time.Unix(1_800_000_000, 0).UTC(), Seconds: 60,
		Machine: Machine{CPUs: 2, LoadStart: [3]float64{1, 1, 1}}, Settings: Settings{Corpus: "synthetic"}}
	for _, n := range []int{10_000, 100_000, 300_000} {
		x := float64(n) / 10_000
		rep.Results = append(rep.Results,
			Result{Scenario: Recall, Name: "POST /sona/{uuid}/recall", Path: "http", StoreSize: n, Clients: 1, Ops: 100,
				PerSecond: 100 / x, P50Ms: 5 * x, P99Ms: 9 * x, MaxMs: 12 * x, HitRate: f(0.9), RSS: &RSS{Start: 1 << 20, Peak: 3 << 20, End: 2 << 20, EndFile: 1 << 20}},
			Result{Scenario: ANN, Name: "memoria HNSW <own>", Path: "in-process", StoreSize: n, Clients: 1, Ops: 200,
				PerSecond: 3000, P50Ms: 0.2, P99Ms: 0.4, MaxMs: 1, RecallAt10: f(0.9), BuildSeconds: f(x)},
			Result{Scenario: Restart, Name: "restart after SIGTERM", Path: "http", StoreSize: n, Restart: &RestartFigures{
				Signal: "SIGTERM", HealthzMs: 100 * x, SteadyMs: 900 * x, IdleMs: 1000 * x}})
	}
	rep.Results = append(rep.Results, Result{Scenario: Insert, Name: "POST /memories", Path: "http", StoreSize: 5000, Clients: 64,
		Ops: 5000, PerSecond: 500, P50Ms: 100, P99Ms: 300, MaxMs: 400})
	return rep
}

func TestWriteSVG(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSVG(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&b)
	elems := map[string]int{}
	var texts []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			elems[v.Name.Local]++
		case xml.CharData:
			texts = append(texts, string(v))
		}
	}
	all := strings.Join(texts, "|")
	// three panels; recall p50, p99 and the ANN's: lines of three points
	if elems["svg"] != 1 || elems["polyline"] < 7 || !strings.Contains(all, "restart against store size") ||
		!strings.Contains(all, "memoria HNSW <own> p50") || !strings.Contains(all, "100k") || strings.Contains(all, "POST /memories") {
		t.Fatalf("elements %v, texts %q", elems, all)
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	rep := sampleReport()
	rep.Notes = []string{"a note"}
	rep.Results = append(rep.Results, Result{Scenario: Advance, Name: "POST /sona/{uuid}/chat", Path: "http", Clients: 64,
		Rate: 750, Unsent: 12, Ops: 7488, PerSecond: 748.8})
	tenth := func(perSecond, cpu float64) loadgen.Interval {
		return loadgen.Interval{PerSecond: perSecond, ServerCPUPerRequestMs: cpu, P99Ms: 900, RSS: 3 << 30}
	}
	long := Result{Scenario: Advance, Name: "POST /sona/{uuid}/chat", Path: "http", Clients: 64, Ops: 1000, PerSecond: 174.9}
	for i := range 10 {
		long.Stretches = append(long.Stretches, tenth(900-80*float64(i), 2+float64(i)))
	}
	long.Stretches = append(long.Stretches, tenth(5, 40)) // in flight at the end
	rep.Results = append(rep.Results, long)
	WriteTable(&b, rep)
	out := b.String()
	for _, want := range []string{"first tenth 900.0 /s 2.00 ms CPU/op, last 180.0 /s 11.00 ms CPU/op p99 900.0 ms RSS 3072 MiB", "POST /sona/{uuid}/recall", "hit 0.90", "recall@10 0.900", "300k after SIGTERM", "note: a note", "1→3→2", "of the end's RSS 1 MiB mapped files",
		"offered 750/s (open loop), 12 due but not sent: the server behind the rate"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

func TestOptions(t *testing.T) {
	o := Options{Binary: "memoria", Dir: "d", Sizes: []int{100_000, 10_000, 100_000}}
	if err := o.fill(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Sizes, []int{10_000, 100_000}) || !slices.Equal(o.Scenarios, Scenarios) || o.Duration != DefaultDuration ||
		o.Config == nil || o.Corpus.Name() != "synthetic" || !slices.Equal(o.clients(Recall), []int{1, 16}) {
		t.Fatalf("%+v", o)
	}
	o.Clients = []int{8}
	if !slices.Equal(o.clients(Advance), []int{8}) {
		t.Fatal("--clients does not replace a scenario's own")
	}
	for _, bad := range []Options{{Dir: "d"}, {Binary: "m"}, {Binary: "m", Dir: "d", Scenarios: []string{"nope"}},
		{Binary: "m", Dir: "d", Clients: []int{0}}, {Binary: "m", Dir: "d", Sizes: []int{0}}, {Binary: "m", Dir: "d", Trace: true}} {
		if err := bad.fill(); !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// TestMergeLoad: the growth of the store in parts (a window, then
// top-ups) adds up to one report.
func TestMergeLoad(t *testing.T) {
	a := &loadgen.Report{Requests: 900, Seconds: 3, ServerCPUSeconds: 1.8, PeakRSS: 200,
		Routes: []loadgen.RouteReport{{Route: "POST /memories", P50Ms: 10}},
		Memory: []loadgen.MemorySample{{At: "start"}, {At: "end"}}}
	b := &loadgen.Report{Requests: 100, Seconds: 1, Errors: 2, ServerCPUSeconds: 0.2, PeakRSS: 300,
		Routes: []loadgen.RouteReport{{Route: "POST /memories", P50Ms: 99}},
		Memory: []loadgen.MemorySample{{At: "start"}, {At: "end", ProcMemory: loadgen.ProcMemory{RSS: 7}}}}
	if mergeLoad(nil, a) != a {
		t.Fatal("the first part is not the whole")
	}
	m := mergeLoad(a, b)
	if m.Requests != 1000 || m.Errors != 2 || m.Seconds != 4 || m.PerSecond != 250 || m.ServerCPUPerRequestMs != 2 ||
		m.PeakRSS != 300 || m.Routes[0].P50Ms != 10 || len(m.Memory) != 3 || m.Memory[2].RSS != 7 {
		t.Fatalf("%+v", m)
	}
}

// The collector's figures come from the runtime's figures' differences
// over the window: its share of the CPU time used (not of the time there
// was), per operation what was allocated; none from a server without them
// or for a window without operations.
func TestCollectorFigures(t *testing.T) {
	reading := func(alloc, cycles, gc, total, idle, live float64) *serverReading {
		return &serverReading{values: map[string]float64{
			"go_memstats_alloc_bytes_total": alloc, "go_gc_duration_seconds_count": cycles,
			"go_cpu_classes_gc_total_cpu_seconds_total": gc, "go_cpu_classes_total_cpu_seconds_total": total,
			"go_cpu_classes_idle_cpu_seconds_total": idle, "go_gc_heap_live_bytes": live}}
	}
	// 10 s on 2 cores: 20 s of CPU, 4 idle, 16 used, 4 of them the
	// collector's; 100 MiB allocated over 1,000 operations.
	before, after := reading(1<<30, 7, 1, 100, 30, 4e8), reading(1<<30+100<<20, 19, 5, 120, 34, 5e8)
	got := collectorFigures(before, after, 1000)
	want := CollectorFigures{CPUShare: 0.25, Cycles: 12, AllocKBPerOp: 102.4, LiveBytes: 5e8}
	if got == nil || math.Abs(got.CPUShare-want.CPUShare) > 1e-9 || got.Cycles != want.Cycles ||
		math.Abs(got.AllocKBPerOp-want.AllocKBPerOp) > 1e-9 || got.LiveBytes != want.LiveBytes {
		t.Fatalf("figures %+v, want %+v", got, want)
	}
	if got := collectorFigures(before, after, 0); got != nil {
		t.Fatalf("no operation: %+v, want none", got)
	}
	old := reading(1<<30+100<<20, 19, 5, 120, 34, 5e8)
	delete(old.values, "go_cpu_classes_gc_total_cpu_seconds_total") // a server older than stop 50
	if got := collectorFigures(before, old, 1000); got != nil {
		t.Fatalf("a figure missing: %+v, want none", got)
	}
}

// The committer's figures come from its counters' differences over the
// window's wall time; none when a reading lacks a counter or no commit
// was made.
func TestCommitterFigures(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	reading := func(sec float64, commits, ops, busy, commit float64) *serverReading {
		return &serverReading{at: at.Add(time.Duration(sec * float64(time.Second))), values: map[string]float64{
			"memoria_store_commits_total": commits, "memoria_store_committed_ops_total": ops,
			"memoria_store_committer_busy_seconds_total": busy, "memoria_store_commit_seconds_total": commit}}
	}
	got := committerFigures(reading(0, 10, 100, 1, 0.5), reading(10, 110, 10_100, 9, 4.5))
	want := CommitterFigures{Busy: 0.8, PerSecond: 10, OpsPerCommit: 100, CommitMs: 40}
	if got == nil || math.Abs(got.Busy-want.Busy) > 1e-9 || got.PerSecond != want.PerSecond || got.OpsPerCommit != want.OpsPerCommit || math.Abs(got.CommitMs-want.CommitMs) > 1e-9 {
		t.Fatalf("figures %+v, want %+v", got, want)
	}
	if got := committerFigures(reading(0, 10, 100, 1, 0.5), reading(10, 10, 100, 1, 0.5)); got != nil {
		t.Fatalf("no commit in the window: %+v, want none", got)
	}
	stalled := reading(10, 110, 10_100, 9, 4.5)
	stalled.values[stallFamily] = 2.5
	if got := committerFigures(reading(0, 10, 100, 1, 0.5), stalled); got == nil || got.StalledS != 0 {
		t.Fatalf("the stall counter in one reading only: %+v, want the figures, none stalled", got)
	}
	before := reading(0, 10, 100, 1, 0.5)
	before.values[stallFamily] = 1
	if got := committerFigures(before, stalled); got == nil || got.StalledS != 1.5 || got.PerSecond != 10 {
		t.Fatalf("1.5 s stalled in the window: %+v", got)
	}
	// The batches over 100 and 500 ms from the batch-time histogram's
	// series, none from readings that lack them.
	if got.BatchesOver100ms != 0 || got.BatchesOver500ms != 0 {
		t.Fatalf("batches over 100/500 ms without the histogram: %+v", got)
	}
	timed := func(r *serverReading, n, within100, within500 float64) *serverReading {
		r.values[batchFamilies[0]], r.values[batchFamilies[1]], r.values[batchFamilies[2]] = n, within100, within500
		return r
	}
	got = committerFigures(timed(reading(0, 10, 100, 1, 0.5), 50, 45, 50), timed(reading(10, 110, 10_100, 9, 4.5), 150, 140, 148))
	if got == nil || got.BatchesOver100ms != 5 || got.BatchesOver500ms != 2 {
		t.Fatalf("100 batches, 95 within 100 ms and 98 within 500: %+v, want 5 and 2 over", got)
	}
	// The writes' mean waits by stage from their sums and counts, none
	// from readings that lack them or a window without a write counted.
	if got.WriteWaits != nil {
		t.Fatalf("writes' waits without their series: %+v", got.WriteWaits)
	}
	waited := func(r *serverReading, writes float64, seconds ...float64) *serverReading {
		for stage, sec := range seconds {
			r.values[writeWaitFamilies[2*stage]], r.values[writeWaitFamilies[2*stage+1]] = sec, writes
		}
		return r
	}
	got = committerFigures(waited(reading(0, 10, 100, 1, 0.5), 100, 1, 2, 0.5), waited(reading(10, 110, 10_100, 9, 4.5), 300, 3, 8, 1.5))
	if w := got.WriteWaits; w == nil || w.Writes != 200 || math.Abs(w.QueuedMs-10) > 1e-9 || math.Abs(w.BatchMs-30) > 1e-9 || math.Abs(w.AcknowledgeMs-5) > 1e-9 {
		t.Fatalf("200 writes waiting 2, 6 and 1 s in all: %+v, want 10, 30 and 5 ms each", w)
	}
	if got := committerFigures(waited(reading(0, 10, 100, 1, 0.5), 100, 1, 2, 0.5), waited(reading(10, 110, 10_100, 9, 4.5), 100, 1, 2, 0.5)); got.WriteWaits != nil {
		t.Fatalf("no write counted in the window: %+v, want no waits", got.WriteWaits)
	}
	old := reading(10, 110, 10_100, 9, 4.5)
	delete(old.values, "memoria_store_commit_seconds_total") // a server without the counter
	if got := committerFigures(reading(0, 10, 100, 1, 0.5), old); got != nil {
		t.Fatalf("a counter missing: %+v, want none", got)
	}
}

func TestHasContent(t *testing.T) {
	quoted := `she said "hi" – ü <b>&`
	doc := `{"memories":[{"cid":"a","memory":{"data":{"content":"not this, \"content\":\"inner\"","kind":"text"},"meta":{"labels":{"content":7}}}},` +
		`{"memory":{"data":{"content": "plain text"}}},` +
		`{"memory":{"data":{"content":"she said \"hi\" \u2013 \u00fc \u003cb\u003e\u0026"}}}]}`
	for _, c := range []struct {
		text string
		want bool
	}{
		{"plain text", true},
		{quoted, true},
		{"plain", false},
		{"she said", false},
		{"7", false},
		{"inner", false},
	} {
		if got, err := hasContent([]byte(doc), c.text); err != nil || got != c.want {
			t.Errorf("hasContent(%q) = %v, %v; want %v", c.text, got, err, c.want)
		}
	}
	if got, err := hasContent([]byte(`{"content":"unfinished`), "x"); err == nil || got {
		t.Errorf("an unfinished string: %v, %v; want an error", got, err)
	}
	if got, err := hasContent([]byte(`{"content":"bad \q"}`), "x"); err == nil || got {
		t.Errorf("a bad escape: %v, %v; want an error", got, err)
	}
}

// The bench reads the committer's series from the server's own /metrics
// (internal/metrics), the batch-time histogram's buckets included.
func TestReadServerTheCommittersSeries(t *testing.T) {
	m := metrics.New()
	m.WatchState(func() metrics.State {
		return metrics.State{Committer: metrics.Committer{Commits: 7, Ops: 70, BusySeconds: 3, CommitSeconds: 1,
			BatchBounds: []float64{0.05, 0.1, 0.5, 1}, Batches: []uint64{4, 1, 2, 1, 1},
			WaitBounds: []float64{0.01, 0.1}, Waits: map[string]metrics.Waits{
				"queued": {Counts: []uint64{3, 1, 0}, Seconds: 0.25}, "batch": {Counts: []uint64{1, 2, 1}, Seconds: 0.75},
				"acknowledge": {Counts: []uint64{4, 0, 0}, Seconds: 0.125}},
			Written: map[string]metrics.Written{"a/": {Keys: 3, Bytes: 900}, "t/": {Keys: 12, Bytes: 600}}}}
	})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	r := (&run{}).readServer(context.Background(), srv.URL)
	if r == nil {
		t.Fatal("no reading")
	}
	want := map[string]float64{"memoria_store_commits_total": 7, "memoria_store_committed_ops_total": 70,
		"memoria_store_committer_busy_seconds_total": 3, "memoria_store_commit_seconds_total": 1,
		batchFamilies[0]: 9, batchFamilies[1]: 5, batchFamilies[2]: 7,
		writeWaitFamilies[0]: 0.25, writeWaitFamilies[1]: 4, writeWaitFamilies[2]: 0.75, writeWaitFamilies[3]: 4,
		writeWaitFamilies[4]: 0.125, writeWaitFamilies[5]: 4}
	for family, v := range want {
		if got, ok := r.values[family]; !ok || got != v {
			t.Errorf("%s = %v (read %v), want %v", family, got, ok, v)
		}
	}
	if want := map[string]float64{"a/": 900, "t/": 600}; !maps.Equal(r.written, want) {
		t.Errorf("written bytes %v, want %v", r.written, want)
	}
	if want := map[string]float64{"a/": 3, "t/": 12}; !maps.Equal(r.writtenKeys, want) {
		t.Errorf("written keys %v, want %v", r.writtenKeys, want)
	}
	// What a window wrote an operation, in the table: the total, then
	// each space with its keys.
	if got, want := writtenNote(perOp(map[string]float64{}, r.written, 3), perOp(map[string]float64{}, r.writtenKeys, 3)), "written/op 0.5 KB in 5.0 keys (a/ 0.3 in 1.0 keys, t/ 0.2 in 4.0 keys)"; got != want {
		t.Errorf("note %q, want %q", got, want)
	}
	if got, want := writtenNote(map[string]float64{"a/": 300}, nil), "written/op 0.3 KB (a/ 0.3)"; got != want {
		t.Errorf("note of an older server %q, want %q", got, want)
	}
}

func TestWindowsOfAMinuteReportTenths(t *testing.T) {
	for d, want := range map[time.Duration]time.Duration{15 * time.Second: 0, 59 * time.Second: 0, time.Minute: 6 * time.Second, 300 * time.Second: 30 * time.Second} {
		if got := tenths(d); got != want {
			t.Errorf("tenths(%v) = %v, want %v", d, got, want)
		}
	}
}
