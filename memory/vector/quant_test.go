package vector

import (
	"math"
	"math/rand"
	"slices"
	"strconv"
	"testing"

	"github.com/viterin/vek/vek32"
)

// dotInt8 agrees with the plain sum at every length (the AVX2 loop takes
// 64 and then 32 bytes at a time, the rest is summed in Go) and at the
// extremes of quantize's range [-127, 127], where a pair of products
// comes nearest int16's bound; it reads len(a) of b, never the scale
// bytes of a record after them.
func TestDotInt8(t *testing.T) {
	if useAVX2 {
		t.Run("without AVX2", func(t *testing.T) {
			useAVX2 = false
			defer func() { useAVX2 = true }()
			TestDotInt8(t)
		})
	}
	rng := rand.New(rand.NewSource(1))
	plain := func(a, b []int8) int32 {
		var s int32
		for i := range a {
			s += int32(a[i]) * int32(b[i])
		}
		return s
	}
	for n := 0; n <= 200; n++ {
		a, b := make([]int8, n), make([]int8, n+scaleBytes) // b longer, as a record is
		for i := range b {
			b[i] = int8(rng.Intn(255) - 127)
		}
		for i := range a {
			a[i] = int8(rng.Intn(255) - 127)
		}
		if got, want := dotInt8(a, b), plain(a, b); got != want {
			t.Fatalf("n %d: %d, want %d", n, got, want)
		}
		if got := dotInt8(make([]int8, n), b); got != 0 {
			t.Fatalf("n %d: zero vector · b = %d", n, got)
		}
	}
	for _, v := range []int8{-127, 127} {
		for _, n := range []int{31, 32, 33, 63, 64, 65, 96, 384, 4096} {
			a := make([]int8, n)
			for i := range a {
				a[i] = v
			}
			if got, want := dotInt8(a, a), int32(v)*int32(v)*int32(n); got != want {
				t.Fatalf("%d·%d ×%d: %d, want %d", v, v, n, got, want)
			}
			b := make([]int8, n)
			for i := range b {
				b[i] = -v
			}
			if got, want := dotInt8(a, b), plain(a, b); got != want {
				t.Fatalf("%d·%d ×%d: %d, want %d", v, b[0], n, got, want)
			}
		}
	}
}

// A quantised vector is its float32 one within half its scale in every
// component, its largest component at ±127, at any length; quantised
// similarities of unit vectors are within a few thousandths of the exact
// ones at embedding size; a record holds the quantised vector and its
// scale.
func TestQuantize(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, dims := range []int{1, 7, 8, 15, 16, 17, 31, 33, 384, 385} {
		for range 20 {
			v := randVec(rng, dims)
			if rng.Intn(2) == 0 {
				v = unit(v)
			}
			q := make([]int8, dims)
			scale := quantize(v, q)
			most := 0
			for j, f := range v {
				if d := math.Abs(float64(f - scale*float32(q[j]))); d > float64(scale)/2*(1+1e-6) {
					t.Fatalf("dims %d component %d: %v against %v·%d", dims, j, f, scale, q[j])
				}
				if math.Abs(float64(f)) > math.Abs(float64(v[most])) {
					most = j
				}
			}
			if q[most] != 127 && q[most] != -127 || (q[most] > 0) != (v[most] > 0) {
				t.Fatalf("dims %d: largest component %v quantised to %d", dims, v[most], q[most])
			}
		}
	}
	const dims = 384
	vecs := clustered(rng, 200, dims, 5)
	qs := make([][]int8, len(vecs))
	scales := make([]float32, len(vecs))
	for i, v := range vecs {
		qs[i] = make([]int8, dims)
		scales[i] = quantize(v, qs[i])
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
}

// A vector that cannot be scaled quantises to zeros at scale 0; one of a
// single component, however small (its scale may be subnormal), to ±127
// within half its scale.
func TestQuantizeEdges(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for name, v := range map[string][]float32{
		"zero":      make([]float32, 19),
		"underflow": {math.SmallestNonzeroFloat32, 0, -math.SmallestNonzeroFloat32},
		"infinite":  {1, inf, 0.5},
		"NaN":       {1, nan, 0.5},
	} {
		q := []int8{1, 2, 3}
		q = append(q, make([]int8, len(v)-len(q))...)
		for i := range q {
			q[i] = 9
		}
		if s := quantize(v, q); s != 0 || slices.ContainsFunc(q, func(x int8) bool { return x != 0 }) {
			t.Errorf("%s: scale %v, %v", name, s, q)
		}
	}
	for _, f := range []float32{1e-30, -3e-38, 2.5} {
		v := []float32{0, f, 0, 0, 0}
		q := make([]int8, len(v))
		s := quantize(v, q)
		want := int8(127)
		if f < 0 {
			want = -127
		}
		if q[1] != want || q[0] != 0 || q[2] != 0 || math.Abs(float64(s*float32(q[1])-f)) > float64(s)/2 {
			t.Errorf("%v: scale %v, %v", f, s, q)
		}
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

// Two memories' int8 records (RecordInto) give their cosine within the
// quantisation's error (ApproxDot), as a query's int8 form against a
// record does (ApproxDotID); a removed id's record is zero, an id never
// given out has none; a record read into room with space allocates
// nothing.
func TestRecordIntoApproxDot(t *testing.T) {
	const n, dims = 60, 384
	vecs := clustered(rand.New(rand.NewSource(5)), n, dims, 4)
	x := New(Options{Dims: dims, M: 6, EfConstruction: 20, Seed: 1})
	defer x.Close()
	for i, v := range vecs {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	id := func(i int) uint64 {
		t.Helper()
		v, ok := x.ID(key(i))
		if !ok {
			t.Fatalf("key %d has no id", i)
		}
		return v
	}
	worst := 0.0
	for i := range n {
		a, ok := x.RecordInto(id(i), nil)
		if !ok || a.Len() != dims {
			t.Fatalf("record %d: ok %v, %d dimensions", i, ok, a.Len())
		}
		for j := range n {
			b, _ := x.RecordInto(id(j), nil)
			worst = max(worst, math.Abs(float64(ApproxDot(a, b)-vek32.Dot(vecs[i], vecs[j]))))
		}
		q := x.Quantize(vecs[(i+1)%n])
		byID, _ := x.ApproxDotID(id(i), q)
		if got := ApproxDot(q, a); got != byID {
			t.Fatalf("record %d: ApproxDot %v, ApproxDotID %v", i, got, byID)
		}
	}
	if worst > 0.01 {
		t.Fatalf("records' cosines off by up to %v", worst)
	}
	x.Remove(key(7))
	if r, ok := x.RecordInto(id(8), nil); !ok || ApproxDot(r, r) <= 0 {
		t.Fatalf("a live record: ok %v", ok)
	}
	removedID := uint64(7) // ids are given out in order of adding
	if r, ok := x.RecordInto(removedID, nil); !ok || r.Len() != dims || ApproxDot(r, r) != 0 {
		t.Fatalf("a removed id's record: ok %v, %d dimensions, self-dot %v", ok, r.Len(), ApproxDot(r, r))
	}
	if _, ok := x.RecordInto(uint64(x.IDs()), nil); ok {
		t.Fatal("a record for an id never given out")
	}
	room := make([]int8, dims)
	if allocs := testing.AllocsPerRun(100, func() { x.RecordInto(3, room) }); allocs != 0 {
		t.Fatalf("RecordInto with room: %v allocations", allocs)
	}
}

// quantError bounds how far a quantised similarity (the screen's, as
// exactAmong and rescore compute it: the int8 dot at the two scales) is
// from the exact one, for unit vectors of every shape — dense, clustered,
// one-hot, a few large components, rounding pushed to half a step —; and
// the bound is the query's own rounding, not its worst case: for dense
// vectors it is at most four-fifths of the bound that took each of q's
// components to be half a step off (which scored a third more candidates
// again on their float32 vectors).
func TestQuantErrorBoundsTheScreen(t *testing.T) {
	const dims = 384
	rng := rand.New(rand.NewSource(9))
	shapes := map[string]func() []float32{
		"dense":     func() []float32 { return unit(randVec(rng, dims)) },
		"clustered": func() []float32 { return clustered(rng, 1, dims, 1)[0] },
		"one-hot": func() []float32 {
			v := make([]float32, dims)
			v[rng.Intn(dims)] = 1
			return v
		},
		"spiky": func() []float32 {
			v := randVec(rng, dims)
			for range 3 {
				v[rng.Intn(dims)] *= 40
			}
			return unit(v)
		},
		"half-steps": func() []float32 { // every component at .5 of a step of the largest
			v := make([]float32, dims)
			v[0] = 127
			for i := 1; i < dims; i++ {
				v[i] = float32(rng.Intn(254)-127) + 0.5
			}
			return unit(v)
		},
	}
	q8, w8 := make([]int8, dims), make([]int8, dims)
	var tight, loose float64
	for qname, qshape := range shapes {
		for wname, wshape := range shapes {
			for range 200 {
				q, w := qshape(), wshape()
				qs, ws := quantize(q, q8), quantize(w, w8)
				ea, eb := quantError(q, q8, qs)
				approx := float32(dotInt8(q8, w8)) * qs * ws
				exact := vek32.Dot(q, w)
				bound := ea*ws + eb
				if diff := math.Abs(float64(approx - exact)); diff > float64(bound) {
					t.Fatalf("q %s, w %s: quantised %v, exact %v: off by %v, bound %v", qname, wname, approx, exact, diff, bound)
				}
				if qname == "dense" && wname == "dense" {
					var q1 float64
					for _, f := range q {
						q1 += math.Abs(float64(f))
					}
					d := float64(dims)
					tight += float64(bound)
					loose += (q1/2+d*float64(qs)/4)*float64(ws) + math.Sqrt(d)*float64(qs)/2 + 1e-4
				}
			}
		}
	}
	// The worst case's shape: each vector half a step off its int8 form
	// in the direction that adds to the error, q's where ŵ is large and
	// w's along q's signs, so both terms of the error are near their
	// bounds.
	for range 500 {
		w8s := make([]float32, dims)
		for i := range w8s {
			w8s[i] = float32(rng.Intn(255) - 127)
		}
		w8s[0] = 127
		q := make([]float32, dims)
		q[0] = 127
		for i := 1; i < dims; i++ {
			q[i] = float32(rng.Intn(253)-126) + 0.499*sign(w8s[i])
		}
		q = unit(q)
		w := make([]float32, dims)
		w[0] = 127
		for i := 1; i < dims; i++ {
			w[i] = w8s[i] + 0.499*sign(q[i])
		}
		w = unit(w)
		qs, ws := quantize(q, q8), quantize(w, w8)
		ea, eb := quantError(q, q8, qs)
		approx := float32(dotInt8(q8, w8)) * qs * ws
		if diff, bound := math.Abs(float64(approx-vek32.Dot(q, w))), ea*ws+eb; diff > float64(bound) {
			t.Fatalf("worst case: quantised %v, exact %v: off by %v, bound %v", approx, vek32.Dot(q, w), diff, bound)
		}
	}
	t.Logf("the bound is %.0f%% of the worst case's for dense vectors", 100*tight/loose)
	if tight > 0.8*loose {
		t.Fatalf("the bound is %.0f%% of the worst case's, want at most 80%%", 100*tight/loose)
	}
}

func sign(f float32) float32 {
	if f < 0 {
		return -1
	}
	return 1
}
