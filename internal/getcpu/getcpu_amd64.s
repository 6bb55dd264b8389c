#include "textflag.h"

// func cpuidex(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuidex(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func rdpid() uint32
TEXT ·rdpid(SB), NOSPLIT, $0-4
	// RDPID RAX (F3 0F C7 /7, mod 11 rm 000)
	BYTE $0xF3; BYTE $0x0F; BYTE $0xC7; BYTE $0xF8
	MOVL AX, ret+0(FP)
	RET

// func rdtscp() uint32
TEXT ·rdtscp(SB), NOSPLIT, $0-4
	RDTSCP
	MOVL CX, ret+0(FP)
	RET
