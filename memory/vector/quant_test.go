package vector

import (
	"math"
	"math/rand"
	"strconv"
	"testing"

	"github.com/viterin/vek/vek32"
)

// dotInt8 agrees with the plain sum at every length (the AVX2 loop takes
// 32 bytes at a time, the rest is summed in Go) and at the extremes of
// int8, where a product is 2^14.
func TestDotInt8(t *testing.T) {
	if useAVX2 {
		t.Run("without AVX2", func(t *testing.T) {
			useAVX2 = false
			defer func() { useAVX2 = true }()
			TestDotInt8(t)
		})
	}
	rng := rand.New(rand.NewSource(1))
	for n := 0; n <= 200; n++ {
		a, b := make([]int8, n), make([]int8, n+3) // b may be longer
		for i := range a {
			a[i], b[i] = int8(rng.Intn(256)-128), int8(rng.Intn(256)-128)
		}
		var want int32
		for i := range a {
			want += int32(a[i]) * int32(b[i])
		}
		if got := dotInt8(a, b); got != want {
			t.Fatalf("n %d: %d, want %d", n, got, want)
		}
	}
	for _, v := range []int8{-128, 127} {
		a := make([]int8, 4096)
		for i := range a {
			a[i] = v
		}
		if got, want := dotInt8(a, a), int32(v)*int32(v)*4096; got != want {
			t.Fatalf("%d·%d ×4096: %d, want %d", v, v, got, want)
		}
	}
}

// Quantised similarities of unit vectors are within a few thousandths of
// the exact ones at embedding size; a zero vector quantises to zeros.
func TestQuantize(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	const dims = 384
	vecs := clustered(rng, 200, dims, 5)
	qs := make([][]int8, len(vecs))
	scales := make([]float32, len(vecs))
	for i, v := range vecs {
		qs[i] = make([]int8, dims)
		scales[i] = quantize(v, qs[i])
		for j, f := range v {
			if d := math.Abs(float64(f - scales[i]*float32(qs[i][j]))); d > float64(scales[i])/2+1e-7 {
				t.Fatalf("vector %d component %d: %v against %v·%d", i, j, f, scales[i], qs[i][j])
			}
		}
	}
	worst := 0.0
	for i := range vecs {
		for j := range vecs {
			exact := vek32.Dot(vecs[i], vecs[j])
			approx := float32(dotInt8(qs[i], qs[j])) * scales[i] * scales[j]
			worst = max(worst, math.Abs(float64(exact-approx)))
		}
	}
	if worst > 0.005 {
		t.Fatalf("quantised similarity off by up to %.4f", worst)
	}
	t.Logf("quantised similarity off by up to %.4f", worst)
	rec := make([]int8, dims+scaleBytes)
	quantizeRecord(vecs[0], rec)
	if recordScale(rec[dims:]) != scales[0] || string(int8Bytes(rec[:dims])) != string(int8Bytes(qs[0])) {
		t.Fatal("a record does not hold the vector's quantised form and scale")
	}
	z := []int8{1, 2, 3}
	if s := quantize(make([]float32, 3), z); s != 0 || z[0] != 0 || z[1] != 0 || z[2] != 0 {
		t.Fatalf("zero vector: scale %v, %v", s, z)
	}
}

// BenchmarkDot compares a float32 dot product (vek32, AVX2) with the int8
// one of the same vectors, over a set of vectors far larger than the CPU's
// caches read in random order (as a graph search reads them) and over a
// small set read again and again.
func BenchmarkDot(b *testing.B) {
	const dims = 384
	for _, n := range []int{256, 200_000} {
		rng := rand.New(rand.NewSource(3))
		f := make([]float32, n*dims)
		for i := range f {
			f[i] = float32(rng.NormFloat64())
		}
		q := make([]int8, n*dims)
		for i := 0; i < n; i++ {
			quantize(f[i*dims:(i+1)*dims], q[i*dims:(i+1)*dims])
		}
		order := rng.Perm(n)
		b.Run("float32/vectors="+strconv.Itoa(n), func(b *testing.B) {
			var s float32
			for i := 0; i < b.N; i++ {
				j := order[i%n]
				s += vek32.Dot(f[:dims], f[j*dims:(j+1)*dims])
			}
			_ = s
		})
		b.Run("int8/vectors="+strconv.Itoa(n), func(b *testing.B) {
			var s int32
			for i := 0; i < b.N; i++ {
				j := order[i%n]
				s += dotInt8(q[:dims], q[j*dims:(j+1)*dims])
			}
			_ = s
		})
	}
}

func int8Bytes(v []int8) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}
