#include "textflag.h"

// func dotInt8AVX2(a, b *int8, n int) int32
//
// Each a's component's magnitude (VPABSB) times b's with a's sign
// (VPSIGNB), an unsigned by a signed byte, multiplied and added in pairs
// to int16 (VPMADDUBSW), then in pairs to int32 (VPMADDWD by ones): 32
// bytes in five operations, 64 a loop into two accumulators. Exact for
// components in [-127, 127] (quantize's range): a pair's sum is at most
// 2·127·127 < 2^15, and int32 holds any sum of up to 133,000 terms. Not
// with a -128 in either: its magnitude is 128, and VPSIGNB's negation of
// it wraps.
TEXT ·dotInt8AVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VPXOR    Y0, Y0, Y0
	VPXOR    Y6, Y6, Y6
	VPCMPEQW Y7, Y7, Y7
	VPSRLW   $15, Y7, Y7 // 1 in each int16
	CMPQ     CX, $64
	JLT      tail

loop:
	VMOVDQU    (SI), Y1
	VMOVDQU    (DI), Y2
	VMOVDQU    32(SI), Y8
	VMOVDQU    32(DI), Y9
	VPABSB     Y1, Y3
	VPSIGNB    Y1, Y2, Y2
	VPMADDUBSW Y2, Y3, Y3
	VPMADDWD   Y7, Y3, Y3
	VPADDD     Y3, Y0, Y0
	VPABSB     Y8, Y10
	VPSIGNB    Y8, Y9, Y9
	VPMADDUBSW Y9, Y10, Y10
	VPMADDWD   Y7, Y10, Y10
	VPADDD     Y10, Y6, Y6
	ADDQ       $64, SI
	ADDQ       $64, DI
	SUBQ       $64, CX
	CMPQ       CX, $64
	JGE        loop

tail:
	TESTQ      CX, CX
	JZ         sum
	VMOVDQU    (SI), Y1
	VMOVDQU    (DI), Y2
	VPABSB     Y1, Y3
	VPSIGNB    Y1, Y2, Y2
	VPMADDUBSW Y2, Y3, Y3
	VPMADDWD   Y7, Y3, Y3
	VPADDD     Y3, Y0, Y0

sum:
	VPADDD       Y6, Y0, Y0
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
