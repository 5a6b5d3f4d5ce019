package recall

import (
	"math"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/model"
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
		{Explain{Fused: rel(0.8, 0), KindWeight: 1, PriorUnit: 1}, 0.8},
		{Explain{Fused: rel(0.5, 0.3), KindWeight: 0.5, PriorUnit: 1}, 0.4},
		{Explain{Fused: rel(0.8, 0), KindWeight: 1, Recency: 0.5, Importance: 0.5, SonaSimilarity: 1, PriorUnit: 1}, 0.8 + 0.05 + 0.1 + 0.1},
		{Explain{Fused: rel(0, 0), KindWeight: 1, Recency: 1, Importance: 1, PriorUnit: 1}, 0.1 + 0.2},
		// The kind weight scales the priors with the relevance.
		{Explain{Fused: rel(0.8, 0), KindWeight: 0.5, Recency: 1, Importance: 1, SonaSimilarity: 1, PriorUnit: 1}, 0.5 * (0.8 + 0.1 + 0.2 + 0.1)},
		// The priors are in the unit of the evidence's resolution; the
		// relevance is not.
		{Explain{Fused: rel(0.8, 0), KindWeight: 0.5, Recency: 1, Importance: 1, SonaSimilarity: 1, PriorUnit: 0.25}, 0.5 * (0.8 + 0.25*(0.1+0.2+0.1))},
		{Explain{Fused: rel(0.8, 0), KindWeight: 1, Recency: 1, Importance: 1, SonaSimilarity: 1}, 0.8},
	}
	for _, c := range cases {
		ScoreHit(&c.e, w)
		if got := c.e.Contrib.Sum(); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%+v: %v, want %v", c.e, got, c.want)
		}
	}
}

func TestPriorUnit(t *testing.T) {
	cases := []struct {
		rel  []float64
		want float64
	}{
		{nil, 1},
		{[]float64{0.7}, 1},
		{[]float64{0.4, 0.4, 0.4}, 1}, // the evidence cannot order them: the priors alone do
		{[]float64{0, 1}, 1},
		{[]float64{1, 0.5, 0.5, 0}, 1.0 / 3},
		{[]float64{0.5, 1, 0, 0.5}, 1.0 / 3}, // whatever their order
		{[]float64{2, 0, 2, 0}, 2.0 / 3},
		{[]float64{2, 0}, 1}, // at most a perfect match's scale
	}
	for _, c := range cases {
		if got := PriorUnit(c.rel); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("PriorUnit(%v) = %v, want %v", c.rel, got, c.want)
		}
	}
	// An affine change of the relevances scales the unit with them, and
	// twice the candidates over the same range halve it (about).
	a, b := []float64{0.9, 0.45, 0.44, 0.1}, make([]float64, 4)
	for i, r := range a {
		b[i] = 0.3*r + 0.2
	}
	if got, want := PriorUnit(b), 0.3*PriorUnit(a); math.Abs(got-want) > 1e-12 {
		t.Errorf("scaled by 0.3: %v, want %v", got, want)
	}
	if got, want := PriorUnit(append(a, 0.2, 0.3, 0.6, 0.7)), 0.8/7; math.Abs(got-want) > 1e-12 {
		t.Errorf("eight candidates over 0.1..0.9: %v, want %v", got, want)
	}
}

func TestTopoSort(t *testing.T) {
	mk := func(name string, ts int64, supports ...*Recalled) *Recalled {
		m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: name}}, Timestamp: &ts}
		for _, s := range supports {
			m.Edges = append(m.Edges, model.Edge{Target: s.CID, Weight: 1})
		}
		model.SortEdges(m.Edges)
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
}
