package memory

import (
	"context"
	"math"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/messages"
)

func TestDecay(t *testing.T) {
	cases := []struct {
		name               string
		lambda, importance float64
		backbone           bool
		activity, last     int64
		want               float64
	}{
		{"just stored", 0.5, 0, false, 10, 10, 1},
		{"untouched for the whole history", 0.5, 0, false, 10, 0, math.Exp(-0.5)},
		{"half the history", 0.5, 0, false, 10, 5, math.Exp(-0.25)},
		{"important decays slower", 0.5, 1, false, 10, 0, math.Exp(-0.25)},
		{"backbone never decays", 0.5, 0, true, 10, 0, 1},
		{"empty sona", 0.5, 0, false, 0, 0, 1},
		{"tick ahead of activity clamps", 0.5, 0, false, 10, 12, 1},
	}
	for _, c := range cases {
		if got := Decay(c.lambda, c.importance, c.backbone, c.activity, c.last); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestScoreHit(t *testing.T) {
	w := config.Weights{Relevance: 1, Recency: 0.1, Importance: 0.2, Sona: 0.1}
	rel := func(dense, bm25 float64) Fused { return Fused{Relevance: dense + bm25, Dense: dense, BM25: bm25} }
	cases := []struct {
		e    Explain
		want float64
	}{
		{Explain{Fused: rel(0.8, 0), KindWeight: 1}, 0.8},
		{Explain{Fused: rel(0.5, 0.3), KindWeight: 0.5}, 0.4},
		{Explain{Fused: rel(0.8, 0), KindWeight: 1, Recency: 0.5, Importance: 0.5, SonaSimilarity: 1}, 0.8 + 0.05 + 0.1 + 0.1},
		{Explain{Fused: rel(0, 0), KindWeight: 1, Recency: 1, Importance: 1}, 0.1 + 0.2},
	}
	for _, c := range cases {
		ScoreHit(&c.e, w)
		if got := c.e.Contrib.Sum(); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%+v: %v, want %v", c.e, got, c.want)
		}
	}
}

func TestTopoSort(t *testing.T) {
	mk := func(name string, ts int64, supports ...*Recalled) *Recalled {
		m := &Memory{Data: Data{Text: &TextData{Content: name}}, Timestamp: &ts}
		for _, s := range supports {
			m.Edges = append(m.Edges, Edge{Target: s.CID, Weight: 1})
		}
		SortEdges(m.Edges)
		c, _, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return &Recalled{CID: c, Memory: m, Meta: &messages.MemoryMeta{}}
	}
	a := mk("a", 30)
	b := mk("b", 10, a) // newer timestamp order says b first, its edge says a first
	c := mk("c", 20)
	d := mk("d", 5, b, c)
	outside := mk("outside", 1)
	e := mk("e", 40, outside) // support not in the set: no constraint
	names := func(rs []*Recalled) string {
		s := ""
		for _, r := range rs {
			s += r.Memory.Text()
		}
		return s
	}
	for _, order := range [][]*Recalled{{d, c, b, a, e}, {e, a, b, c, d}, {b, e, d, a, c}} {
		if got := names(TopoSort(order)); got != "cabde" {
			t.Errorf("TopoSort(%s) = %s, want cabde", names(order), got)
		}
	}
	// Equal times fall back to CID order.
	x, y := mk("x", 7), mk("y", 7)
	first := x
	if string(y.CID.Bytes()) < string(x.CID.Bytes()) {
		first = y
	}
	if got := TopoSort([]*Recalled{y, x}); got[0] != first {
		t.Fatal("tie not broken by CID")
	}
	_ = cid.Undef
}

// Paths.Score replaces recall.weights for one recall (the LoCoMo
// evaluation tunes them over one ingested store).
func TestPathsScoreOverridesWeights(t *testing.T) {
	s := openSelf(t, testConfig(t.TempDir()), clock.NewFake(epoch))
	defer s.Close()
	o := newOwner(t, s, "a")
	o.text("the lake house party")
	o.text("a quiet evening at the lake")
	recall := func(w *config.Weights) []*Recalled {
		t.Helper()
		rs, err := s.Recall(context.Background(), Query{Sona: o.sona, Text: "lake party", Peek: true,
			Paths: &Paths{Weights: config.PathWeights{Dense: 0.5, BM25: 1}, Fusion: "weighted", Score: w}})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 2 {
			t.Fatalf("recalled %v", describe(rs))
		}
		return rs
	}
	for _, r := range recall(nil) {
		if r.Explain.Contrib.Recency == 0 || r.Explain.Contrib.SonaSimilarity == 0 {
			t.Fatalf("configured weights: %+v", r.Explain.Contrib)
		}
	}
	for _, r := range recall(&config.Weights{Relevance: 2}) {
		c := r.Explain.Contrib
		if c.Recency != 0 || c.Importance != 0 || c.SonaSimilarity != 0 {
			t.Fatalf("Paths.Score ignored: %+v", c)
		}
		want := 2 * r.Explain.KindWeight * r.Explain.Fused.Relevance
		if math.Abs(r.Score-want) > 1e-9 {
			t.Fatalf("score %v, want 2 × kind weight × relevance = %v", r.Score, want)
		}
	}
}
