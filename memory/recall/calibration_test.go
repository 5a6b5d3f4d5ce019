package recall_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/messages"
)

// squeezed is a supplied embedder with the narrow cosine spread of a real
// one: the inner embedder's unit vector scaled by √a beside a constant
// component √(1−a), so every cosine is a·cos + (1−a) of the inner one's —
// with a = 0.05, all in 0.95..1 where the hashed embedder spreads over
// 0..1.
type squeezed struct {
	inner llm.Embedder
	a     float64
}

func (e squeezed) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := e.inner.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(vecs))
	for i, v := range vecs {
		w := make([]float32, len(v)+1)
		for j, x := range v {
			w[j] = float32(math.Sqrt(e.a)) * x
		}
		w[len(v)] = float32(math.Sqrt(1 - e.a))
		out[i] = w
	}
	return out, nil
}

func (e squeezed) Dims() int  { return e.inner.Dims() + 1 }
func (e squeezed) ID() string { return fmt.Sprintf("squeezed/%g/%s", e.a, e.inner.ID()) }

// calibrationStore is a conversation of 300 memories with varied
// importance, recalled in sona scope by the dense path alone, embedded by
// emb: the recency, importance and sona terms of the score all vary.
func calibrationStore(t *testing.T, emb llm.Embedder, cfg config.Config) (*memory.Self, *memorytest.Owner, []cid.Cid, []string) {
	t.Helper()
	clk := clock.NewFake(memorytest.Epoch)
	s, err := memory.Open(context.Background(), memory.Options{Config: cfg, Embedder: emb, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	o := memorytest.NewOwner(t, s, "a")
	rng := rand.New(rand.NewSource(17))
	words := strings.Fields("garden tomato basil aphid compost lettuce slug river train lisbon porto novel lighthouse diary queue latency migration sister painting sunset")
	var cids []cid.Cid
	var texts []string
	for i := range 300 {
		clk.Set(memorytest.Epoch.Add(time.Duration(i) * time.Minute))
		var b strings.Builder
		for range 3 + rng.Intn(10) {
			b.WriteString(words[rng.Intn(len(words))] + " ")
		}
		ts := clk.Now().Unix()
		m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: fmt.Sprintf("%s(%d)", b.String(), i)}}, Timestamp: &ts}
		cids = append(cids, o.Add(m, &messages.MemoryMeta{Importance: rng.Float64()}))
		texts = append(texts, m.Text())
	}
	return s, o, cids, texts
}

// TestDenseOnlyRanksAsCosine is issue 17's golden test. A real embedder's
// cosines lie in a narrow band; added to the recency, importance and sona
// terms of the score uncalibrated, they lost to them and dense-only recall
// ranked worse than the plain cosine. With each path's evidence calibrated
// per query over its candidates, dense-only recall ranks the same whatever
// the spread of the embedder's cosines: a narrow embedder (cosines 0.95..1)
// gives exactly the hits, in the same order, of the embedder it was
// squeezed from, with every term of the score at its default. And without
// those terms, the hits are exactly the plain cosine ranking. Both without
// diversity (recall.mmr_lambda 1): its penalty is the raw cosine between a
// candidate and the hits, which a narrow embedder weakens (README,
// "Calibration").
func TestDenseOnlyRanksAsCosine(t *testing.T) {
	ctx := context.Background()
	hashed := llm.NewHashedEmbedder(llm.DefaultDims)
	narrow := squeezed{inner: hashed, a: 0.05}
	dense := &recall.Paths{Weights: config.PathWeights{Dense: 1}, Fusion: "weighted"}
	queries := []string{"tomato aphid", "lisbon train river", "the diary of my sister", "latency queue migration",
		"basil compost lettuce slug garden", "a painting of the sunset at the lighthouse", "porto novel"}
	const k = 10

	ranks := func(s *memory.Self, o *memorytest.Owner, cids []cid.Cid, q string, paths *recall.Paths) []int {
		t.Helper()
		rs, err := memorytest.Recall(s, ctx, recall.Query{Sona: o.Sona, Text: q, K: k, Budget: 1 << 20, Paths: paths, Peek: true})
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, r := range recall.Ranked(rs) {
			out = append(out, slices.Index(cids, r.CID))
		}
		if len(out) != k {
			t.Fatalf("%q: %d hits", q, len(out))
		}
		return out
	}

	t.Run("any spread", func(t *testing.T) {
		cfg := memorytest.Config(t.TempDir())
		cfg.Recall.MMRLambda = 1
		ws, wo, wc, _ := calibrationStore(t, hashed, cfg)
		cfg.DataDir = t.TempDir()
		ns, no, nc, _ := calibrationStore(t, narrow, cfg)
		for _, q := range queries {
			wide, got := ranks(ws, wo, wc, q, dense), ranks(ns, no, nc, q, dense)
			if !slices.Equal(wide, got) {
				t.Errorf("%q: the narrow embedder ranks %v, the one it was squeezed from %v", q, got, wide)
			}
		}
	})

	t.Run("plain cosine", func(t *testing.T) {
		cfg := memorytest.Config(t.TempDir())
		cfg.Recall.MMRLambda = 1
		s, o, cids, texts := calibrationStore(t, narrow, cfg)
		vecs, err := narrow.Embed(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		paths := *dense
		paths.Score = &config.Weights{Relevance: 1}
		for _, q := range queries {
			qv, err := narrow.Embed(ctx, []string{q})
			if err != nil {
				t.Fatal(err)
			}
			order := make([]int, len(vecs))
			sims := make([]float64, len(vecs))
			for i, v := range vecs {
				order[i] = i
				for j := range v {
					sims[i] += float64(v[j]) * float64(qv[0][j])
				}
			}
			slices.SortFunc(order, func(a, b int) int {
				if c := cmp.Compare(sims[b], sims[a]); c != 0 {
					return c
				}
				return bytes.Compare(cids[a].Bytes(), cids[b].Bytes())
			})
			if got := ranks(s, o, cids, q, &paths); !slices.Equal(got, order[:k]) {
				t.Errorf("%q: dense-only recall ranks %v, the plain cosine %v", q, got, order[:k])
			}
		}
	})
}
