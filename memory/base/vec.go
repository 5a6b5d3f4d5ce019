package base

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Dot is the dot product of a and b, accumulated in float64 in index
// order (so the same vectors always give the same bits); b must be at
// least as long as a.
func Dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// Cosine is the cosine similarity of a and b; 0 when either is zero or
// their lengths differ.
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// EncodeVector writes v as little-endian float32s: how an embedding is
// stored (v/, k/) and exported.
func EncodeVector(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
	}
	return out
}

// DecodeVector reads what EncodeVector wrote; ErrCorrupt when b is not a
// whole number of float32s.
func DecodeVector(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%w: vector of %d bytes", ErrCorrupt, len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

// Mean is the running mean of vectors, summed in float64 in the order
// they are added (so the same vectors in the same order always give the
// same bits).
type Mean struct {
	sum []float64
	n   int64
}

// State is the mean's running sum (shared: do not modify) and count,
// which MeanOf takes back.
func (m Mean) State() ([]float64, int64) { return m.sum, m.n }

// MeanOf is the mean of State's sum and n (sum is kept, not copied).
func MeanOf(sum []float64, n int64) Mean {
	if n == 0 {
		return Mean{}
	}
	return Mean{sum: sum, n: n}
}

// AddInPlace adds v to m, which must be shared with no reader: Add
// without the copies, for a mean built up before anyone reads it (one
// Add per vector would copy the sum and the mean each time). Then Value
// is its value, as the last Add would have returned it.
func (m *Mean) AddInPlace(v []float32) {
	if len(m.sum) != len(v) {
		m.sum, m.n = make([]float64, len(v)), 0
	}
	for i, f := range v {
		m.sum[i] += float64(f)
	}
	m.n++
}

// Value is the mean's value (nil for an empty mean).
func (m Mean) Value() []float32 {
	if m.n == 0 {
		return nil
	}
	mean := make([]float32, len(m.sum))
	for i, x := range m.sum {
		mean[i] = float32(x / float64(m.n))
	}
	return mean
}

// Add returns the mean with v added, and its value. The result shares
// nothing with m: readers may still hold m's. A v of another length than
// the vectors before starts the mean again.
func (m Mean) Add(v []float32) (Mean, []float32) {
	out := Mean{sum: make([]float64, len(v)), n: 1}
	if len(m.sum) == len(v) {
		copy(out.sum, m.sum)
		out.n = m.n + 1
	}
	for i, f := range v {
		out.sum[i] += float64(f)
	}
	mean := make([]float32, len(v))
	for i, x := range out.sum {
		mean[i] = float32(x / float64(out.n))
	}
	return out, mean
}
