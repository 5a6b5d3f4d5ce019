package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
)

// corpus returns n realistic texts: the turns of the LoCoMo conversations
// in ../shared/data/locomo when present (cycled, numbered so every text is
// distinct), else generated sentences.
func corpus(tb testing.TB, n int) []string {
	var turns []string
	files, _ := filepath.Glob(filepath.Join("..", "..", "shared", "data", "locomo", "conv-*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var conv map[string]json.RawMessage
		if json.Unmarshal(raw, &conv) != nil {
			continue
		}
		for k, v := range conv {
			if !strings.HasPrefix(k, "session_") || strings.Contains(k, "_date") || strings.Contains(k, "observation") || strings.Contains(k, "summary") {
				continue
			}
			var session []struct{ Speaker, Text string }
			if json.Unmarshal(v, &session) == nil {
				for _, t := range session {
					turns = append(turns, t.Speaker+": "+t.Text)
				}
			}
		}
	}
	slices.Sort(turns)
	if len(turns) == 0 {
		words := strings.Fields("garden tomato basil river train lisbon novel lighthouse queue latency migration painting sister dog concert recipe hiking")
		for i := 0; i < 1000; i++ {
			turns = append(turns, fmt.Sprintf("I talked about %s and %s with %s", words[i%len(words)], words[(i*7)%len(words)], words[(i*13)%len(words)]))
		}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s (%d)", turns[i%len(turns)], i/len(turns))
	}
	return out
}

// populate appends texts spread over sonas with one goroutine per sona,
// as the sonas' actors would.
func populate(tb testing.TB, s *memory.Self, sonas int, texts []string) []*memorytest.Owner {
	owners := make([]*memorytest.Owner, sonas)
	for i := range owners {
		owners[i] = memorytest.NewOwner(tb, s, fmt.Sprintf("sona-%d", i))
	}
	var wg sync.WaitGroup
	for i, o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; j < len(texts); j += sonas {
				ts := int64(1_700_000_000 + j)
				o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: texts[j]}}, Timestamp: &ts}, nil)
			}
		}()
	}
	wg.Wait()
	return owners
}

// BenchmarkAppendDurable measures durable appends (encode, CID, embed,
// append operation, group commit with fsync) from 64 concurrent chain
// owners. Report: memories/s.
func BenchmarkAppendDurable(b *testing.B) {
	s := memorytest.Open(b, memorytest.Config(b.TempDir()), nil)
	defer s.Close()
	const sonas = 64
	owners := make([]*memorytest.Owner, sonas)
	for i := range owners {
		owners[i] = memorytest.NewOwner(b, s, fmt.Sprintf("sona-%d", i))
	}
	texts := corpus(b, b.N)
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				o.Text(texts[i])
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "memories/s")
}

// benchStores are populated stores shared by the runs of one benchmark
// (the testing package calls a benchmark function more than once).
var benchStores = map[int]*benchStore{}

type benchStore struct {
	s      *memory.Self
	dir    string
	owners []*memorytest.Owner
}

func populated(b *testing.B, n int) *benchStore {
	if st, ok := benchStores[n]; ok {
		return st
	}
	dir, err := os.MkdirTemp("", "memoria-bench-")
	if err != nil {
		b.Fatal(err)
	}
	cfg := memorytest.Config(dir)
	// As the server runs: every memory evaluated (the heuristic), so the
	// metric path takes part.
	s, err := memory.Open(context.Background(), memory.Options{Config: cfg, Embedder: llm.NewHashedEmbedder(llm.DefaultDims),
		Evaluator: eumas.NewHeuristic(cfg.Evaluation.Archetypes)})
	if err != nil {
		b.Fatal(err)
	}
	st := &benchStore{s: s, dir: dir, owners: populate(b, s, 100, corpus(b, n))}
	s.Index().WaitBuilt()
	if err := s.Text.Settle(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := s.Evals.Settle(context.Background()); err != nil {
		b.Fatal(err)
	}
	benchStores[n] = st
	return st
}

func TestMain(m *testing.M) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(config.Default().Server.GCPercent) // as the server runs
	}
	code := m.Run()
	for _, st := range benchStores {
		st.s.Close()
		os.RemoveAll(st.dir)
	}
	os.Exit(code)
}

// questions returns the LoCoMo questions, or generated ones.
func questions(tb testing.TB) []string {
	var out []string
	files, _ := filepath.Glob(filepath.Join("..", "..", "shared", "data", "locomo", "conv-*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var conv struct {
			QA []struct{ Question string } `json:"qa"`
		}
		if json.Unmarshal(raw, &conv) == nil {
			for _, q := range conv.QA {
				out = append(out, q.Question)
			}
		}
	}
	if len(out) == 0 {
		out = corpus(tb, 512)
	}
	return out
}

// BenchmarkRecall measures recall latency with the default configuration
// (dense, BM25 and affinity paths fused, threshold, top 10, co-access and
// edge expansion within 4,000 characters, topological sort) over stores of
// 10,000 and 100,000 memories (LoCoMo turns) in 100 sonas, asked LoCoMo's
// questions, in both scopes: self (the dense path goes through the HNSW
// graph) and sona (the sona's memories are searched exactly). Reports p50
// and p99 in microseconds.
func BenchmarkRecall(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, scope := range []string{recall.ScopeSelf, recall.ScopeSona} {
			b.Run(fmt.Sprintf("memories=%d/scope=%s", n, scope), func(b *testing.B) {
				st := populated(b, n)
				qs := questions(b)
				ctx := context.Background()
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					q := recall.Query{Sona: st.owners[i%len(st.owners)].Sona, Text: qs[i%len(qs)], Scope: scope, Peek: true}
					start := time.Now()
					if _, err := memorytest.Recall(st.s, ctx, q); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				b.StopTimer()
				testutil.ReportLatencies(b, lat)
			})
		}
	}
}

// BenchmarkOpen measures reopening a store of 100,000 memories (LoCoMo
// turns in 100 sonas, evaluated), each figure from the start of Open to
// when what it names was done: the vector snapshot restored (snap-s, as
// logged), Open returned (open-s: sonas, vectors, chains, the count of
// the metadata), the full-text index loaded (text-s) and the metric
// profiles loaded (profiles-s), both in the background from Open on and
// taken from when their log line came (either may come before Open
// returns), and the HNSW graph built (built-s). Reports seconds.
func BenchmarkOpen(b *testing.B) {
	st := populated(b, 100_000)
	cfg := st.s.Config()
	sums := map[string]time.Duration{}
	for i := 0; i < b.N; i++ {
		if err := st.s.Close(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		ev := newEventTimes(start)
		s, err := memory.Open(context.Background(), memory.Options{Config: cfg, Embedder: llm.NewHashedEmbedder(llm.DefaultDims),
			Evaluator: eumas.NewHeuristic(cfg.Evaluation.Archetypes), Logger: slog.New(ev)})
		if err != nil {
			b.Fatal(err)
		}
		sums["open-s"] += time.Since(start)
		s.Index().WaitBuilt() // nothing is added meanwhile: what is pending after Open only drains
		sums["built-s"] += time.Since(start)
		for metric, msg := range map[string]string{"snap-s": "vector index: snapshot loaded",
			"text-s": "full-text index loaded", "profiles-s": "metric profiles loaded"} {
			sums[metric] += ev.wait(b, msg)
		}
		st.s = s
		for _, o := range st.owners {
			o.S = s
		}
	}
	for metric, d := range sums {
		b.ReportMetric(d.Seconds()/float64(b.N), metric)
	}
}

// eventTimes is a log handler that keeps when each message was first
// logged, from start.
type eventTimes struct {
	start time.Time
	mu    sync.Mutex
	at    map[string]time.Duration
	added chan struct{} // closed and replaced at each new message
}

func newEventTimes(start time.Time) *eventTimes {
	return &eventTimes{start: start, at: map[string]time.Duration{}, added: make(chan struct{})}
}

func (e *eventTimes) Enabled(context.Context, slog.Level) bool { return true }
func (e *eventTimes) WithAttrs([]slog.Attr) slog.Handler       { return e }
func (e *eventTimes) WithGroup(string) slog.Handler            { return e }

func (e *eventTimes) Handle(_ context.Context, r slog.Record) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.at[r.Message]; !ok {
		e.at[r.Message] = r.Time.Sub(e.start)
		close(e.added)
		e.added = make(chan struct{})
	}
	return nil
}

// wait returns when msg was logged, waiting a minute at most for it.
func (e *eventTimes) wait(b *testing.B, msg string) time.Duration {
	deadline := time.After(time.Minute)
	for {
		e.mu.Lock()
		d, ok := e.at[msg]
		added := e.added
		e.mu.Unlock()
		if ok {
			return d
		}
		select {
		case <-added:
		case <-deadline:
			b.Fatalf("the open never logged %q", msg)
		}
	}
}
