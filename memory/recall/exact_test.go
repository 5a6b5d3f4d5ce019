package recall_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/messages"
)

// A memory whose text is the query is the first hit, however many
// memories the query does not match outweigh it in importance and recency,
// and whatever evidence weights beside the dense and full-text paths the
// fusion has: the evidence's weights do not dilute a match, and the
// priors are on a perfect match's scale (`memoria torture` recalls each
// acknowledged text so). The others share the words of its frame, as
// torture's texts do ("… the … keeps …"). Dividing by the sum of all the
// weights, with the priors added outside the kind weight, the exact match
// (a note: kind weight 0.5) scored about 0.16 + 0.06 and each of the
// others 0.3 and more: it was not even among the ten hits.
func TestRecallExactMatchOutranksPriors(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clk)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "torture")
	rng := rand.New(rand.NewPCG(1, 0))
	word := func() string {
		const letters, vowels = "bcdfghjklmnpqrstvwxz", "aeiou"
		b := make([]byte, 8)
		for i := range b {
			if i%2 == 0 {
				b[i] = letters[rng.IntN(len(letters))]
			} else {
				b[i] = vowels[rng.IntN(len(vowels))]
			}
		}
		return string(b)
	}
	text := func() string {
		return fmt.Sprintf("%s w3 the %s keeps %d %s", word(), word(), rng.IntN(1000), word())
	}
	add := func(content string, importance float64, minute int) cid.Cid {
		clk.Set(memorytest.Epoch.Add(time.Duration(minute) * time.Minute))
		return o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: content}}}, &messages.MemoryMeta{Importance: importance})
	}
	query := text()
	exact := add(query, 0, 0) // the oldest, of no importance
	for i := range 60 {
		add(text(), 1, i+1) // newer, all of importance 1
	}

	double := cfg.Recall.Paths
	double.Affinity, double.Context, double.Time, double.Speaker, double.Reply = 2, 2, 2, 2, 2
	double.Session, double.Feedback = 1, 1
	var match float64
	for i, w := range []config.PathWeights{cfg.Recall.Paths, double} {
		paths := recall.Paths{Weights: w, Fusion: "weighted", CoAccess: true, Expand: true}
		rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: query, K: 10, Paths: &paths, Peek: true})
		if err != nil {
			t.Fatal(err)
		}
		hits := recall.Ranked(rs)
		at := slices.IndexFunc(hits, func(r *recall.Recalled) bool { return r.CID == exact })
		if at != 0 {
			t.Fatalf("weights %+v: the exact match is hit %d of %d (0: none), want the first: %v", w, at+1, len(hits), memorytest.Describe(hits))
		}
		t.Logf("weights %+v: the exact match scores %.3f (relevance %.3f), the next %.3f", w, hits[0].Score, hits[0].Explain.Fused.Relevance, hits[1].Score)
		f := hits[0].Explain.Fused
		// The best by cosine and by BM25: a match of 1, whatever the
		// other weights.
		if m := f.Dense + f.BM25; math.Abs(m-1) > 1e-9 || i > 0 && m != match {
			t.Errorf("weights %+v: the exact match's match %v, want 1 (%v with the default weights)", w, m, match)
		}
		match = f.Dense + f.BM25
		if f.Relevance < 1 || f.Relevance > 1+recall.MaxSupport {
			t.Errorf("weights %+v: relevance %v, want 1..%v", w, f.Relevance, 1+recall.MaxSupport)
		}
	}
}
