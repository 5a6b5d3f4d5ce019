//go:build !amd64

package vector

var useAVX2 = false // no assembly here: dotInt8 sums in Go

func dotInt8AVX2(a, b *int8, n int) int32 { panic("vector: no AVX2 here") }

func prefetch([]int8) {}

func prefetchFloats([]float32) {}
