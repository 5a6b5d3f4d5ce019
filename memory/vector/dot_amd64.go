package vector

import "golang.org/x/sys/cpu"

var useAVX2 = cpu.X86.HasAVX2

// dotInt8AVX2 returns the dot product of the n int8 at a and at b; n is a
// positive multiple of 32 (dot_amd64.s).
//
//go:noescape
func dotInt8AVX2(a, b *int8, n int) int32
