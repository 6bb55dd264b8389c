//go:build amd64 && !purego

#include "textflag.h"

// Conversions of 16-bit floats (half.go). n counts elements: a multiple
// of 8 for the widening bodies, of 16 for the narrowing ones.

// func widenF16F16C(dst, src *byte, n int)
TEXT ·widenF16F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   done
loop:
	VCVTPH2PS (SI), Y0
	VMOVDQU   Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loop
done:
	VZEROUPPER
	RET

// func narrowF16F16C(dst, src *byte, n int)
// Rounding control 0 in the immediate: to nearest even, whatever MXCSR says.
TEXT ·narrowF16F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   done
loop:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ $32, SI
	ADDQ $16, DI
	DECQ CX
	JNZ  loop
done:
	VZEROUPPER
	RET

// func widenBF16AVX2(dst, src *byte, n int)
TEXT ·widenBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   done
loop:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loop
done:
	VZEROUPPER
	RET

DATA bf16c<>+0(SB)/4, $0x7fffffff  // magnitude mask
DATA bf16c<>+4(SB)/4, $0x7f800000  // infinity: above it, NaN
DATA bf16c<>+8(SB)/4, $0x00007fff  // rounding bias
DATA bf16c<>+12(SB)/4, $0x00000001 // lowest kept bit
DATA bf16c<>+16(SB)/4, $0x00400000 // quiet bit
GLOBL bf16c<>(SB), RODATA|NOPTR, $20

// NARROW rounds the 8 floats in R to bfloat16 in the low half of each
// 32-bit lane: NaN ? (b | quiet) >> 16 : (b + 0x7fff + (b>>16 & 1)) >> 16.
#define NARROW(R) \
	VPAND    Y15, R, Y2; \
	VPCMPGTD Y14, Y2, Y2; \
	VPSRLD   $16, R, Y3; \
	VPAND    Y12, Y3, Y3; \
	VPADDD   Y13, Y3, Y3; \
	VPADDD   R, Y3, Y3; \
	VPOR     Y11, R, Y4; \
	VPBLENDVB Y2, Y4, Y3, R; \
	VPSRLD   $16, R, R

// func narrowBF16AVX2(dst, src *byte, n int)
TEXT ·narrowBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   done
	VPBROADCASTD bf16c<>+0(SB), Y15
	VPBROADCASTD bf16c<>+4(SB), Y14
	VPBROADCASTD bf16c<>+8(SB), Y13
	VPBROADCASTD bf16c<>+12(SB), Y12
	VPBROADCASTD bf16c<>+16(SB), Y11
loop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	NARROW(Y0)
	NARROW(Y1)
	VPACKUSDW Y1, Y0, Y0 // lanes: 0-3 8-11 4-7 12-15
	VPERMQ    $0xd8, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loop
done:
	VZEROUPPER
	RET
