package chain

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/messages"
)

// TestAppendedAddsToTheMeanInPlace: each committed append gives its sona
// a new centroid — the same bits as the mean of the vectors added in
// order, while a centroid handed out before stays as it was — but
// allocates only the new state: not a copy of the sum (issue 15: an
// insert's largest allocation of ours), nor a centroid kept beside it
// (1.5 KB a sona held; Snapshot computes it).
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
	// The state (and now and then the members' growth); copying the sum
	// or keeping a centroid would be a second every time.
	if allocs >= 1.5 {
		t.Fatalf("%.2f allocations an append, want the state only", allocs)
	}
}

// TestMembersStateOfTheFormatBeforeIsRead: a snapshot's sonas state
// written before the sums were float32 (MSONAS1, float64 sums) is still
// used, its sums rounded to float32; the state written now decodes to
// what was encoded, the sums' bits kept.
func TestMembersStateOfTheFormatBeforeIsRead(t *testing.T) {
	var old []byte
	old = append(old, "MSONAS1"...)
	old = binary.AppendUvarint(old, 2) // dims
	old = binary.AppendUvarint(old, 1) // sonas
	old = binary.AppendUvarint(old, 1)
	old = append(old, 'u')
	old = binary.AppendUvarint(old, 3) // length
	old = binary.AppendUvarint(old, 0) // no head
	old = binary.AppendUvarint(old, 2) // the mean's count
	old = binary.LittleEndian.AppendUint64(old, math.Float64bits(0.1))
	old = binary.LittleEndian.AppendUint64(old, math.Float64bits(1.5))
	old = binary.AppendUvarint(old, 2) // members 4, 7
	old = binary.AppendVarint(old, 4)
	old = binary.AppendVarint(old, 3)
	got, err := decodeMembers(old, 2)
	if err != nil {
		t.Fatal(err)
	}
	u := got["u"]
	if u == nil || u.length != 3 || u.n != 2 || !slices.Equal(u.sum, []float32{0.1, 1.5}) || !slices.Equal(u.members, []uint64{4, 7}) {
		t.Fatalf("the state of the format before read as %+v", u)
	}

	s := NewSonas(nil, nil, nil, 2)
	rec := &messages.Sona{Uuid: "u", Length: 2}
	s.appended("u", rec, 4, []float32{0.1, 1.0 / 3})
	s.appended("u", rec, 7, []float32{0.7, 2.0 / 3})
	now, err := decodeMembers(s.EncodeMembers(), 2)
	if err != nil {
		t.Fatal(err)
	}
	sum, n := s.sonas["u"].mean.State()
	if v := now["u"]; v == nil || v.n != n || !slices.Equal(v.sum, sum) || !slices.Equal(v.members, []uint64{4, 7}) {
		t.Fatalf("the state written now read as %+v, want sum %v n %d", v, sum, n)
	}
	if _, err := decodeMembers(append([]byte("MSONAS9"), old[7:]...), 2); err == nil {
		t.Fatal("a state of an unknown format was read")
	}
}
