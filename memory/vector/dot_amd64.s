#include "textflag.h"

// func dotInt8AVX2(a, b *int8, n int) int32
//
// 32 bytes of each a loop: widened to int16 (VPMOVSXBW), multiplied and
// added in pairs to int32 (VPMADDWD), into two accumulators, summed at the
// end. |a_i·b_i| ≤ 127·128, so int32 holds any sum of up to 131,000 terms.
TEXT ·dotInt8AVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y5, Y5, Y5

loop:
	VPMOVSXBW (SI), Y1
	VPMOVSXBW (DI), Y2
	VPMADDWD  Y1, Y2, Y3
	VPADDD    Y3, Y0, Y0
	VPMOVSXBW 16(SI), Y1
	VPMOVSXBW 16(DI), Y2
	VPMADDWD  Y1, Y2, Y4
	VPADDD    Y4, Y5, Y5
	ADDQ      $32, SI
	ADDQ      $32, DI
	SUBQ      $32, CX
	JNZ       loop

	VPADDD       Y5, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4E, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xB1, X0, X1
	VPADDD       X1, X0, X0
	VMOVD        X0, AX
	VZEROUPPER
	MOVL         AX, ret+24(FP)
	RET

// func prefetchLines(p *int8, n int)
//
// A PREFETCHT0 of each 64-byte line of the n bytes from p.
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX

prefetch:
	PREFETCHT0 (SI)
	ADDQ       $64, SI
	SUBQ       $64, CX
	JGT        prefetch
	RET
