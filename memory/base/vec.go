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

// Mean is the running mean of vectors, summed in float32 in the order
// they are added (so the same vectors in the same order always give the
// same bits). The sum is all it keeps (a sona's centroid is one: at 384
// dimensions 1.5 KB a sona, where a float64 sum and the mean beside it
// took 4.5 KB).
type Mean struct {
	sum []float32
	n   int64
}

// State is the mean's running sum (shared: do not modify) and count,
// which MeanOf takes back.
func (m Mean) State() ([]float32, int64) { return m.sum, m.n }

// MeanOf is the mean of State's sum and n (sum is kept, not copied).
func MeanOf(sum []float32, n int64) Mean {
	if n == 0 {
		return Mean{}
	}
	return Mean{sum: sum, n: n}
}

// AddInPlace adds v to m, which must be shared with no reader: Add
// without the copy, for a mean whose readers hold the lock it is added
// to under (Add copies the sum for readers that do not). A v of another
// length than the vectors before starts the mean again.
func (m *Mean) AddInPlace(v []float32) {
	if len(m.sum) != len(v) {
		m.sum, m.n = make([]float32, len(v)), 0
	}
	for i, f := range v {
		m.sum[i] += f
	}
	m.n++
}

// Value is the mean's value, a new slice (nil for an empty mean).
func (m Mean) Value() []float32 {
	if m.n == 0 {
		return nil
	}
	mean := make([]float32, len(m.sum))
	n := float32(m.n)
	for i, x := range m.sum {
		mean[i] = x / n
	}
	return mean
}

// Add returns the mean with v added, and its value. The result shares
// nothing with m: readers may still hold m's. A v of another length than
// the vectors before starts the mean again.
func (m Mean) Add(v []float32) (Mean, []float32) {
	out := Mean{sum: make([]float32, len(v))}
	if len(m.sum) == len(v) {
		copy(out.sum, m.sum)
		out.n = m.n
	}
	out.AddInPlace(v)
	return out, out.Value()
}
