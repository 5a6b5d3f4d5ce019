package vector

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

var useAVX2 = cpu.X86.HasAVX2

// dotInt8AVX2 returns the dot product of the n int8 at a and at b, each
// in [-127, 127]; n is a positive multiple of 32 (dot_amd64.s).
//
//go:noescape
func dotInt8AVX2(a, b *int8, n int) int32

// prefetch asks the CPU to bring b's cache lines into its caches (a hint:
// it returns at once). len(b) > 0.
func prefetch(b []int8) { prefetchLines(&b[0], len(b)) }

// prefetchFloats is prefetch of a float32 vector.
func prefetchFloats(v []float32) { prefetchLines((*int8)(unsafe.Pointer(&v[0])), 4*len(v)) }

//go:noescape
func prefetchLines(p *int8, n int)
