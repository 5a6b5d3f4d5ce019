package chain

import (
	"slices"
	"testing"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/messages"
)

// TestAppendedAddsToTheMeanInPlace: each committed append gives its sona
// a new centroid — the same bits as the mean of the vectors added in
// order, while a centroid handed out before stays as it was — but
// allocates only the new state and that centroid, not a copy of the
// float64 sum too (issue 15: an insert's largest allocation of ours).
func TestAppendedAddsToTheMeanInPlace(t *testing.T) {
	const dims = 384
	s := NewSonas(nil, nil, nil, dims)
	rec := &messages.Sona{Uuid: "u", Length: 1}
	vec := func(i int) []float32 {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32((i*31+j*7)%97) / 97
		}
		return v
	}
	var want base.Mean
	var held [][]float32 // centroids handed out, and what they were
	var heldWas [][]float32
	for i := range 50 {
		s.appended("u", rec, uint64(i), vec(i))
		var w []float32
		want, w = want.Add(vec(i))
		got, _, ok := s.Snapshot("u")
		if !ok || !slices.Equal(got, w) {
			t.Fatalf("centroid after %d appends differs from the mean added in order", i+1)
		}
		held, heldWas = append(held, got), append(heldWas, slices.Clone(got))
	}
	for i := range held {
		if !slices.Equal(held[i], heldWas[i]) {
			t.Fatalf("the centroid handed out after %d appends changed later", i+1)
		}
	}
	v := vec(7)
	allocs := testing.AllocsPerRun(200, func() { s.appended("u", rec, 1, v) })
	// The state and the centroid (and now and then the members' growth);
	// copying the sum would be a third every time.
	if allocs >= 2.5 {
		t.Fatalf("%.2f allocations an append, want the state and the centroid only", allocs)
	}
}
