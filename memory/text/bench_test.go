package text

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/testutil"
)

// locomo returns the LoCoMo turns and questions beside the repository
// (../shared/data/locomo), or skips.
func locomo(b *testing.B) (turns, questions []string) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "data", "locomo", "conv-*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		var conv map[string]json.RawMessage
		if err := json.Unmarshal(raw, &conv); err != nil {
			b.Fatal(err)
		}
		for k, v := range conv {
			if k == "qa" {
				var qa []struct{ Question string }
				if json.Unmarshal(v, &qa) == nil {
					for _, q := range qa {
						questions = append(questions, q.Question)
					}
				}
				continue
			}
			var session []struct{ Speaker, Text string }
			if strings.HasPrefix(k, "session_") && json.Unmarshal(v, &session) == nil {
				for _, t := range session {
					turns = append(turns, t.Speaker+": "+t.Text)
				}
			}
		}
	}
	if len(turns) == 0 || len(questions) == 0 {
		b.Skip("no LoCoMo data in ../shared/data/locomo")
	}
	slices.Sort(turns)
	return turns, questions
}

// BenchmarkSearch measures a BM25 search over 100,000 documents (LoCoMo
// turns, repeated) in 100 sonas, with 32 results and the dense path's 32
// candidates to score too, as recall asks it (two passes: the collection
// is over pruneFrom). Reports p50 and p99 in microseconds.
func BenchmarkSearch(b *testing.B) { benchmarkSearch(b, false) }

// BenchmarkSearchSona is BenchmarkSearch in one sona's documents, as a
// recall in sona scope asks it.
func BenchmarkSearchSona(b *testing.B) { benchmarkSearch(b, true) }

func benchmarkSearch(b *testing.B, inSona bool) {
	turns, questions := locomo(b)
	x, err := Open(b.TempDir() + "/idx")
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	const n, sonas = 100_000, 100
	ids := make([]string, n)
	for lo := 0; lo < n; lo += 4096 {
		var docs []Doc
		for i := lo; i < min(lo+4096, n); i++ {
			ids[i] = fmt.Sprintf("doc-%06d", i)
			docs = append(docs, Doc{ID: ids[i], Text: fmt.Sprintf("%s (%d)", turns[i%len(turns)], i/len(turns)), Sonas: []string{fmt.Sprint(i % sonas)}})
		}
		if err := x.Apply(docs, uint64(lo+len(docs))); err != nil {
			b.Fatal(err)
		}
	}
	if err := x.Flush(); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		also := make([]string, 32)
		for j := range also {
			also[j] = ids[rng.IntN(n)]
		}
		o := SearchOptions{K: 32, Also: func() []string { return also }}
		if inSona {
			o.Sonas = []string{fmt.Sprint(rng.IntN(sonas))}
		}
		start := time.Now()
		if _, err := x.Search(questions[i%len(questions)], o); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	testutil.ReportLatencies(b, lat)
}

// BenchmarkOpen measures reading back the snapshot of an index of 200,000
// documents of 6 to 20 words (a vocabulary of 4,000, Zipf-like) in 100
// sonas: what a restart's full-text load costs before it catches up.
func BenchmarkOpen(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "text")
	x, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := func() int { return int(float64(4000) * rng.Float64() * rng.Float64() * rng.Float64()) }
	var docs []Doc
	for i := range 200_000 {
		words := make([]string, 6+rng.IntN(15))
		for k := range words {
			words[k] = fmt.Sprintf("w%dx", zipf())
		}
		docs = append(docs, Doc{ID: fmt.Sprintf("doc-%07d", i), Text: strings.Join(words, " "), Sonas: []string{fmt.Sprintf("s%d", i%100)}})
		if len(docs) == 1000 {
			if err := x.Apply(docs, uint64(i)); err != nil {
				b.Fatal(err)
			}
			docs = docs[:0]
		}
	}
	if err := x.Close(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		y, err := Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		y.Discard()
	}
}
