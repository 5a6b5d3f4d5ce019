package vector

import "math"

// Vectors are searched through the graph in a quantised form: each
// component rounded to an int8 at a scale of the vector's own (its largest
// component maps to ±127), so that v ≈ scale·q. A dot product of two
// quantised vectors is an integer one (dotInt8, AVX2 where the CPU has it)
// over a quarter of the bytes of float32: at 100,000 vectors and more the
// graph's searches are bound by memory, not arithmetic, and the error (a
// few thousandths of similarity at 384 dimensions) is removed by scoring
// the search's candidates again with the float32 vectors before they are
// returned.

// A stored vector is a record of its len(v) int8 followed by its scale's
// four bytes (little-endian float32 bits): one place in memory, so a dot
// product in the graph reads one run of cache lines.

// scaleBytes is the room of the scale at a record's end.
const scaleBytes = 4

// quantizeRecord writes v's record into rec (len(v)+scaleBytes).
func quantizeRecord(v []float32, rec []int8) {
	b := math.Float32bits(quantize(v, rec[:len(v)]))
	for i := range scaleBytes {
		rec[len(v)+i] = int8(uint8(b >> (8 * i)))
	}
}

// recordScale is the scale in a record's last bytes (from its dims-th).
func recordScale(tail []int8) float32 {
	_ = tail[3]
	return math.Float32frombits(uint32(uint8(tail[0])) | uint32(uint8(tail[1]))<<8 | uint32(uint8(tail[2]))<<16 | uint32(uint8(tail[3]))<<24)
}

// quantize writes v's int8 form into q (len(v)) and returns its scale. A
// vector it cannot scale — zero, so small that its scale is below
// float32's range, or not finite — quantises to zeros at scale 0 (a
// similarity of 0 to every vector).
func quantize(v []float32, q []int8) float32 {
	var most float32
	for _, f := range v {
		most = max(most, float32(math.Abs(float64(f))))
	}
	scale := most / 127
	if !(scale > 0) || math.IsInf(float64(scale), 0) { // NaN too
		clear(q)
		return 0
	}
	inv := 1 / float64(scale) // finite, where 1/scale may not be in float32
	for i, f := range v {
		q[i] = int8(max(-127, min(127, math.Round(float64(f)*inv))))
	}
	return scale
}

// dotInt8 returns the dot product of a and b (len(b) ≥ len(a)), whose
// components are in quantize's range [-127, 127] (the AVX2 loop is exact
// only there).
func dotInt8(a, b []int8) int32 {
	b = b[:len(a)]
	n := 0
	var s int32
	if useAVX2 {
		n = len(a) &^ 31
		if n > 0 {
			s = dotInt8AVX2(&a[0], &b[0], n)
		}
	}
	for i := n; i < len(a); i++ {
		s += int32(a[i]) * int32(b[i])
	}
	return s
}
