package main_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/memoria-ai/memoria/internal/bench"
)

// Short runs of every scenario of `memoria bench` at tiny sizes: each
// report must be complete and sane — operations made, none failed, CPU
// time and memory read from the server — never a timed assertion.

func runBench(t *testing.T, args ...string) *bench.Report {
	t.Helper()
	out, errOut, code := run(t, append([]string{"bench", "--json", "--data", t.TempDir(), "--duration", "1s"}, args...)...)
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if rep.Format != bench.ReportFormat || rep.Machine.CPUs < 1 || rep.Seconds <= 0 || rep.Command == "" {
		t.Fatalf("report header %+v", rep)
	}
	return &rep
}

// find returns the results of a scenario, failing when there are none.
func find(t *testing.T, rep *bench.Report, scenario string) []bench.Result {
	t.Helper()
	var out []bench.Result
	for _, r := range rep.Results {
		if r.Scenario == scenario {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s result in %+v", scenario, rep.Results)
	}
	return out
}

// sane checks what every measurement must have.
func sane(t *testing.T, r bench.Result) {
	t.Helper()
	if r.Ops <= 0 || r.Errors != 0 || r.Seconds <= 0 || r.PerSecond <= 0 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms ||
		r.MaxMs < r.P99Ms || r.Clients < 1 || r.StoreSize <= 0 || r.Name == "" {
		t.Fatalf("result %+v", r)
	}
	if r.RSS == nil || r.RSS.Start <= 0 || r.RSS.End <= 0 || r.RSS.Peak < r.RSS.Start || r.RSS.Peak < r.RSS.End {
		t.Fatalf("memory of %s %s: %+v", r.Scenario, r.Name, r.RSS)
	}
	// A served load's end tells its mapped files (the binary's pages at
	// least) apart from the rest.
	if r.Path == "http" && r.Restart == nil && (r.RSS.EndFile <= 0 || r.RSS.EndFile >= r.RSS.End) {
		t.Fatalf("mapped files of %s %s: %+v", r.Scenario, r.Name, r.RSS)
	}
}

func TestBenchInsertAndRefs(t *testing.T) {
	t.Parallel()
	profiles := t.TempDir()
	rep := runBench(t, "insert", "refs", "--clients", "4", "--sizes", "400", "--queries", "20", "--server-profiles", profiles)
	// The insert server's CPU and heap profiles, written when it stopped:
	// gzipped protobuf, as runtime/pprof writes them.
	for _, name := range []string{"insert-1.pprof", "insert-1.heap.pprof"} {
		if b, err := os.ReadFile(filepath.Join(profiles, name)); err != nil || len(b) < 100 || b[0] != 0x1f || b[1] != 0x8b {
			t.Fatalf("server profile %s: %d bytes, %v", name, len(b), err)
		}
	}
	ins := find(t, rep, bench.Insert)
	if len(ins) != 1 {
		t.Fatalf("insert results %+v", ins)
	}
	sane(t, ins[0])
	if ins[0].Path != "http" || ins[0].Clients != 4 || ins[0].Sonas != 4 || ins[0].Name != "POST /memories" || ins[0].CPUMsPerOp <= 0 {
		t.Fatalf("insert %+v", ins[0])
	}
	names := map[string]bench.Result{}
	for _, r := range find(t, rep, bench.Refs) {
		sane(t, r)
		if r.Path != "in-process" {
			t.Fatalf("reference %+v", r)
		}
		names[r.Name] = r
	}
	bdg, ok := names["raw badger: 1 fsynced txn per write"]
	if !ok || bdg.Clients != 4 || bdg.CPUMsPerOp <= 0 {
		t.Fatalf("raw badger %+v", bdg)
	}
	for _, n := range []string{"coder/hnsw", "chromem-go v0.7.0"} {
		r, ok := names[n]
		if !ok || r.StoreSize != 400 || r.RecallAt10 == nil || *r.RecallAt10 <= 0 || *r.RecallAt10 > 1 || r.BuildSeconds == nil {
			t.Fatalf("%s: %+v", n, r)
		}
	}
	if _, ok := names["exact (brute force, vek32.Dot)"]; !ok || len(names) != 4 {
		t.Fatalf("references %v", names)
	}
	if r := names["chromem-go v0.7.0"]; *r.RecallAt10 < 0.99 {
		t.Fatalf("exhaustive search missed exact neighbours: %+v", r)
	}
}

// TestBenchAtARate: with --rate a window offers requests on a schedule:
// every request due in it was sent or is counted as not sent, and the
// rate is in the report.
func TestBenchAtARate(t *testing.T) {
	t.Parallel()
	rep := runBench(t, "insert", "--clients", "4", "--rate", "40", "--duration", "2s")
	if rep.Settings.Rate != 40 {
		t.Fatalf("settings %+v", rep.Settings)
	}
	ins := find(t, rep, bench.Insert)
	if len(ins) != 1 {
		t.Fatalf("insert results %+v", ins)
	}
	sane(t, ins[0])
	if r := ins[0]; r.Rate != 40 || r.Ops+r.Unsent != 80 || r.Ops == 0 {
		t.Fatalf("insert at 40/s for 2 s: %+v, want 80 due, sent or not", r)
	}
}

func TestBenchRecallANNPlots(t *testing.T) {
	t.Parallel()
	svg := filepath.Join(t.TempDir(), "bench.svg")
	rep := runBench(t, "recall", "ann", "--sizes", "150,300", "--store-sonas", "3", "--clients", "2",
		"--queries", "20", "--svg", svg)
	builds := find(t, rep, bench.Build)
	if len(builds) != 2 || builds[0].StoreSize != 150 || builds[1].StoreSize != 300 {
		t.Fatalf("builds %+v", builds)
	}
	for _, b := range builds {
		sane(t, b)
		if b.BuildSeconds == nil || b.CPUMsPerOp <= 0 {
			t.Fatalf("build %+v", b)
		}
	}
	recalls := find(t, rep, bench.Recall)
	if len(recalls) != 2 || recalls[0].StoreSize != 150 || recalls[1].StoreSize != 300 {
		t.Fatalf("recalls %+v", recalls)
	}
	for _, r := range recalls {
		sane(t, r)
		if r.Clients != 2 || r.Sonas != 3 || r.CPUMsPerOp <= 0 || r.HitRate == nil || *r.HitRate < 0.5 {
			t.Fatalf("recall %+v", r)
		}
	}
	anns := find(t, rep, bench.ANN)
	if len(anns) != 2 {
		t.Fatalf("ann %+v", anns)
	}
	for _, r := range anns {
		sane(t, r)
		if r.RecallAt10 == nil || *r.RecallAt10 < 0.5 || *r.RecallAt10 > 1 || r.BuildSeconds == nil {
			t.Fatalf("ann %+v", r)
		}
	}
	f, err := os.Open(svg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	elems := map[string]int{}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			elems[se.Name.Local]++
		}
	}
	// lines of two points: recall's p50 and p99, throughput, the ANN's
	if elems["svg"] != 1 || elems["polyline"] < 5 || elems["circle"] < 10 {
		t.Fatalf("SVG elements %v", elems)
	}
	if _, err := os.Stat(svg + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the temporary SVG is left: %v", err)
	}
}

// TestBenchRestart: a SIGTERM and a SIGKILL of a small store, each
// followed until the new server answers, recalls at its warm speed and
// is idle.
func TestBenchRestart(t *testing.T) {
	t.Parallel()
	rep := runBench(t, "restart", "--sizes", "200", "--store-sonas", "2")
	restarts := find(t, rep, bench.Restart)
	if len(restarts) != 2 {
		t.Fatalf("restarts %+v", restarts)
	}
	for i, r := range restarts {
		f := r.Restart
		if f == nil || f.Signal != []string{"SIGTERM", "SIGKILL"}[i] || r.StoreSize != 200 || r.Errors != 0 ||
			f.TextLoadedMs <= 0 || f.GraphBuiltMs < f.LoadedMs || // the text loads beside the open: before or after it
			f.LoadedMs <= 0 || f.HealthzMs < f.LoadedMs || f.SteadyMs < f.HealthzMs || f.IdleMs < f.SteadyMs ||
			f.ReferenceP50Ms <= 0 || f.CPUSeconds <= 0 || f.RSSHealthz <= 0 || f.RSSSteady <= 0 || f.RSSIdle <= 0 ||
			(f.Signal == "SIGTERM") != (f.StopMs > 0) || r.Ops < 10 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms {
			t.Fatalf("restart %d: %+v %+v", i, r, f)
		}
	}
	if len(rep.Notes) != 0 {
		t.Fatalf("notes %q", rep.Notes)
	}
}

func TestBenchAdvance(t *testing.T) {
	t.Parallel()
	profiles := filepath.Join(t.TempDir(), "profiles") // made by the run
	rep := runBench(t, "advance", "--advance-sonas", "40", "--clients", "3,6", "--server-profiles", profiles, "--server-trace", "--requests", "30", "--duration", "5m")
	// The server's execution trace, written as it ran: runtime/trace's
	// header, then events.
	if b, err := os.ReadFile(filepath.Join(profiles, "advance-1.trace")); err != nil || len(b) < 1000 || !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Fatalf("server trace: %d bytes, %v", len(b), err)
	}
	adv := find(t, rep, bench.Advance)
	if len(adv) != 2 || adv[0].Clients != 3 || adv[1].Clients != 6 {
		t.Fatalf("advance %+v", adv)
	}
	for _, r := range adv {
		sane(t, r)
		if r.Sonas != 40 || r.Name != "POST /sona/{uuid}/chat" || r.CPUMsPerOp <= 0 {
			t.Fatalf("advance %+v", r)
		}
		if r.Ops != 30 { // --requests: every window the same work
			t.Fatalf("advance window of %d chats, want 30 (--requests)", r.Ops)
		}
		// The caches the chats read through, from the server's /metrics.
		for _, cache := range []string{"memories", "metadata", "links"} {
			if h, ok := r.CacheHits[cache]; !ok || h < 0 || h > 1 {
				t.Fatalf("advance: cache %q hit ratio %v (%v), want one within 0..1", cache, h, ok)
			}
			if m, ok := r.CacheMissesPerOp[cache]; !ok || m < 0 {
				t.Fatalf("advance: cache %q misses an advance %v (%v), want a count", cache, m, ok)
			}
		}
		// What each chat wrote into the store: its two memories' blocks
		// (b/) and embeddings (v/), their links (a/) and the tiers'
		// records (t/) among the rest.
		for _, space := range []string{"b/", "v/", "a/", "m/"} {
			if w := r.WrittenPerOp[space]; w <= 0 {
				t.Fatalf("advance: %v bytes of %s written a chat (%v), want some", w, space, r.WrittenPerOp)
			}
			if k := r.WrittenKeysPerOp[space]; k <= 0 || k > r.WrittenPerOp[space] {
				t.Fatalf("advance: %v keys of %s written a chat (%v bytes), want some, fewer than their bytes", k, space, r.WrittenPerOp[space])
			}
		}
		if w := r.WrittenPerOp["v/"]; w < 2*384*4 {
			t.Fatalf("advance: %.0f bytes of embeddings written a chat, want two memories' 384 floats at least", w)
		}
		// The collector's work, from the Go runtime's figures there.
		if c := r.Collector; c == nil || c.CPUShare < 0 || c.CPUShare > 1 || c.Cycles < 0 || c.AllocKBPerOp <= 0 || c.LiveBytes <= 0 {
			t.Fatalf("advance: collector %+v, want its CPU share within 0..1, some allocation and a live heap", c)
		}
	}
}

// TestBenchMixed: recalls, one inserting client and one chatting in one
// window, a result for each, on a fresh store of the size asked.
func TestBenchMixed(t *testing.T) {
	t.Parallel()
	rep := runBench(t, "mixed", "--sizes", "150", "--store-sonas", "3", "--clients", "2")
	mixed := find(t, rep, bench.Mixed)
	if len(mixed) != 3 {
		t.Fatalf("mixed %+v", mixed)
	}
	routes := map[string]bench.Result{}
	for _, r := range mixed {
		sane(t, r)
		if r.StoreSize < 150 || r.Sonas != 3 || r.CPUMsPerOp <= 0 {
			t.Fatalf("mixed %+v", r)
		}
		routes[r.Name] = r
	}
	for _, route := range []string{"POST /memories", "POST /sona/{uuid}/chat"} {
		if r, ok := routes[route]; !ok || r.Clients != 1 || r.HitRate != nil {
			t.Fatalf("the writer %s: %+v (present %v)", route, r, ok)
		}
	}
	if r, ok := routes["POST /sona/{uuid}/recall"]; !ok || r.Clients != 2 || r.HitRate == nil || *r.HitRate < 0.5 {
		t.Fatalf("the recalls: %+v (present %v)", r, ok)
	}
}

// TestBenchTable: without --json, the table on stdout and the progress
// on stderr (no terminal: a line a phase).
func TestBenchTable(t *testing.T) {
	t.Parallel()
	out, errOut, code := run(t, "bench", "advance", "--data", t.TempDir(), "--duration", "1s", "--advance-sonas", "5", "--clients", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if !strings.HasPrefix(out, "memoria bench, ") || !regexp.MustCompile(`(?m)^advance +POST /sona/\{uuid\}/chat +\d+ +2 +[1-9]\d* `).MatchString(out) {
		t.Fatalf("table:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^bench +\d+s advance: 5 sonas, 2 clients$`).MatchString(errOut) {
		t.Fatalf("progress:\n%s", errOut)
	}
}

// TestBenchRefusesBadOptions: one readable line, a non-zero exit, and
// nothing written.
func TestBenchRefusesBadOptions(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"nonsense"}, {"--sizes", "12q"}, {"--sizes", "0"}, {"--clients", "-1"}, {"--clients", "4,x"},
		{"--duration", "0s"}, {"--duration", "-3s"}, {"--requests", "-1"}, {"--queries", "0"}, {"--advance-sonas", "-5"}, {"--store-sonas", "0"},
		{"--svg", filepath.Join(t.TempDir(), "missing", "b.svg")}, {"--locomo", filepath.Join(t.TempDir(), "missing")},
		{"--server-trace"}, {"--rate", "-1"}, {"--rate", "NaN"}, {"--rate", "2e6"}} {
		dir := t.TempDir()
		out, errOut, code := run(t, append([]string{"bench", "--data", dir}, args...)...)
		if lines := strings.Split(strings.TrimSpace(errOut), "\n"); code == 0 || len(lines) != 1 || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
			t.Errorf("%v: wrote %v (%v)", args, ents, err)
		}
	}
}

// TestBenchKeptStore: a kept store is continued by another binary (an A/B
// of two binaries on one store), and one that does not fit a run — another
// seed, more memories than asked, no store.json — is refused in one line
// and left as it was, never deleted and built again.
func TestBenchKeptStore(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	runIn := func(bin string, args ...string) (*bench.Report, string, int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"bench", "recall", "--json", "--data", data, "--duration", "1s", "--clients", "1", "--store-sonas", "2"}, args...)...)
		cmd.Env = cleanEnv()
		out, errOut, code := runCmd(t, cmd)
		var rep bench.Report
		if code == 0 {
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		}
		return &rep, errOut, code
	}
	if _, errOut, code := runIn(binary, "--sizes", "100"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	manifest := filepath.Join(data, "store.json")
	before, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	// Another binary: this one with a byte more (another sha256, the
	// same program).
	other := filepath.Join(t.TempDir(), "memoria")
	b, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeExecutable(other, append(b, 0)); err != nil {
		t.Fatal(err)
	}
	rep, errOut, code := runIn(other, "--sizes", "150")
	if code != 0 {
		t.Fatalf("another binary: exit %d: %s", code, errOut)
	}
	notes := strings.Join(rep.Notes, "\n")
	if !strings.Contains(notes, "continued the kept store of 100 memories") || !strings.Contains(notes, "another binary") {
		t.Fatalf("another binary's notes: %q", rep.Notes)
	}
	if r := find(t, rep, "recall"); r[0].StoreSize != 150 {
		t.Fatalf("recall at %d, want the store grown to 150", r[0].StoreSize)
	}
	grown, err := os.ReadFile(manifest)
	if err != nil || bytes.Equal(grown, before) {
		t.Fatalf("store.json not updated by the growth: %v", err)
	}
	for _, c := range []struct {
		why  string
		args []string
		want string
	}{
		{"another seed", []string{"--sizes", "150", "--seed", "2"}, "seed"},
		{"a smaller size", []string{"--sizes", "100"}, "only grows"},
		{"other sonas", []string{"--sizes", "150", "--store-sonas", "3"}, "sonas"},
	} {
		_, errOut, code := runIn(binary, c.args...)
		if lines := strings.Split(strings.TrimSpace(errOut), "\n"); code == 0 || !strings.Contains(errOut, c.want) || len(lines) != 1 {
			t.Fatalf("%s: exit %d, stderr %q", c.why, code, errOut)
		}
		if now, err := os.ReadFile(manifest); err != nil || !bytes.Equal(now, grown) {
			t.Fatalf("%s: store.json changed (%v)", c.why, err)
		}
	}
	// A store without its store.json is not taken for an empty directory.
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runIn(binary, "--sizes", "150"); code == 0 || !strings.Contains(errOut, "store.json is missing") {
		t.Fatalf("no store.json: exit %d, stderr %q", code, errOut)
	}
	if ents, err := os.ReadDir(filepath.Join(data, "store")); err != nil || len(ents) == 0 {
		t.Fatalf("the store was removed: %v %v", ents, err)
	}
}

// TestBenchCorpusRepeatingTexts: a corpus may repeat a text (LoCoMo's
// short turns, a turn said twice), and the same text inserted into another
// sona is the same memory, not a new one: the store grows by the texts'
// memories, not by the answers "new to the sona", and the bench's check
// that the store holds what it acknowledged passes.
//
// The turn said twice goes to both sonas whatever the order of the
// inserts: it is the only text of its speaker, and the others are made of
// words no other turn has (the hashed embeddings of any two turns are at
// most 0.33 alike, where a near-duplicate needs 0.71), so no insert is
// folded into a near-duplicate and the 60 memories are all grown from the
// turns as written (the corpus's altered repetitions, which may fold,
// start past them).
func TestBenchCorpusRepeatingTexts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	turns := []string{`{"speaker": "A", "dia_id": "D1:1", "text": "hi"}`, `{"speaker": "A", "dia_id": "D1:2", "text": "hi"}`}
	for i := range 70 {
		words := make([]string, 8)
		for j := range words {
			n := i*len(words) + j
			words[j] = "q" + string(rune('a'+n%26)) + string(rune('a'+n/26%26)) + "x"
		}
		turns = append(turns, fmt.Sprintf(`{"speaker": "B", "dia_id": "D1:%d", "text": %q}`, i+3, strings.Join(words, " ")))
	}
	conv := `{"speaker_a": "A", "speaker_b": "B", "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": [` +
		strings.Join(turns, ",") + `]}`
	if err := os.WriteFile(filepath.Join(dir, "conv-1.json"), []byte(conv), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := runBench(t, "recall", "--locomo", dir, "--sizes", "60", "--store-sonas", "2", "--clients", "1")
	build := find(t, rep, bench.Build)[0]
	if want := "0 of the 61 inserts were folded into a near-duplicate, 1 were of a text another sona holds"; build.StoreSize != 60 || !strings.Contains(build.Note, want) {
		t.Fatalf("build %+v: want 60 memories, %q", build, want)
	}
}

// TestBenchAdvanceKeep: --advance-keep keeps the advance store and its
// sonas, and a later run chats with the same sonas on it through a new
// server, its texts following on; a run for another number of sonas, or
// without --data, is refused in one line and changes nothing.
func TestBenchAdvanceKeep(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	kept := filepath.Join(data, "advance-kept", "bench-sonas.json")
	runKept := func(sonas string) (bench.Result, string, string, int) {
		t.Helper()
		out, errOut, code := run(t, "bench", "advance", "--json", "--data", data, "--advance-keep", "--duration", "1s", "--advance-sonas", sonas, "--clients", "2")
		if code != 0 {
			return bench.Result{}, out, errOut, code
		}
		var rep bench.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		r := find(t, &rep, bench.Advance)[0]
		sane(t, r)
		return r, out, errOut, code
	}
	type keptFile struct {
		Sonas []string `json:"sonas"`
		Chats int64    `json:"chats"`
	}
	readKept := func() (keptFile, []byte) {
		t.Helper()
		b, err := os.ReadFile(kept)
		if err != nil {
			t.Fatal(err)
		}
		var k keptFile
		if err := json.Unmarshal(b, &k); err != nil {
			t.Fatal(err)
		}
		return k, b
	}
	first, _, errOut, code := runKept("5")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	k1, _ := readKept()
	if len(k1.Sonas) != 5 || k1.Chats < int64(first.Ops) || !strings.Contains(first.Note, "made over HTTP") {
		t.Fatalf("first run: kept %+v, %d chats, note %q", k1, first.Ops, first.Note)
	}
	second, _, errOut, code := runKept("5")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	k2, b2 := readKept()
	if !slices.Equal(k2.Sonas, k1.Sonas) || k2.Chats < k1.Chats+int64(second.Ops) || second.StoreSize <= first.StoreSize ||
		!strings.Contains(second.Note, "kept from an earlier run") {
		t.Fatalf("second run: kept %+v after %+v, store %d after %d, note %q", k2, k1, second.StoreSize, first.StoreSize, second.Note)
	}
	for _, args := range [][]string{
		{"bench", "advance", "--data", data, "--advance-keep", "--duration", "1s", "--advance-sonas", "6", "--clients", "2"},
		{"bench", "advance", "--advance-keep", "--duration", "1s", "--advance-sonas", "5", "--clients", "2"},
	} {
		out, errOut, code := run(t, args...)
		if lines := strings.Split(strings.TrimSpace(errOut), "\n"); code == 0 || len(lines) != 1 || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		if _, b := readKept(); !bytes.Equal(b, b2) {
			t.Errorf("%v: the kept sonas changed: %s", args, b)
		}
	}
}

// writeExecutable writes an executable file while no child process is
// forked. A child forked while the file's descriptor is open holds it
// until the child's own exec, and an exec of the file meanwhile fails with
// "text file busy" (ETXTBSY; golang.org/issue/22315): the parallel tests
// start servers all the time, and CI once met it here.
func writeExecutable(path string, b []byte) error {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	return os.WriteFile(path, b, 0o755)
}
