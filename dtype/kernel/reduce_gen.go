//go:build ignore

// reduce_gen.go writes reduce_amd64.s and reduce_avx2_amd64.go: the AVX2
// bodies of the reduction kernels and the table naming them. Run it with
// go generate (see reduce_amd64.go).
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
)

// body is one assembly kernel: dst = a op b over n bytes (a multiple of
// 32). setup fills the constant registers Y12-Y15; op writes the lines
// computing register d from a and b (d may be a; Y8-Y11 are scratch).
type body struct {
	name  string
	setup []string
	op    func(b, a, d string) []string
}

// use is one (datatype, op) pair served by a body.
type use struct{ typ, op, body string }

func one(insn string) func(b, a, d string) []string {
	return func(b, a, d string) []string { return []string{fmt.Sprintf("%s %s, %s, %s", insn, b, a, d)} }
}

const (
	allOnes = "VPCMPEQB Y15, Y15, Y15"
	zero14  = "VPXOR Y14, Y14, Y14"
)

// ones returns the setup leaving 1 in every w-byte lane of Y15.
func ones(w int) []string {
	switch w {
	case 1:
		return []string{allOnes, "VPABSB Y15, Y15"}
	case 2:
		return []string{allOnes, "VPSRLW $15, Y15, Y15"}
	case 4:
		return []string{allOnes, "VPSRLD $31, Y15, Y15"}
	}
	return []string{allOnes, "VPSRLQ $63, Y15, Y15"}
}

var suffix = map[int]string{1: "B", 2: "W", 4: "D", 8: "Q"}

// logical returns LOR, LAND or LXOR on w-byte lanes: za, zb = lane is
// zero; LOR = ~(za & zb) & 1, LAND = ~(za | zb) & 1, LXOR = (za ^ zb) & 1.
func logical(kind string, w int) body {
	s := suffix[w]
	return body{
		name:  fmt.Sprintf("l%s%d", kind, 8*w),
		setup: append(ones(w), zero14),
		op: func(b, a, d string) []string {
			l := []string{
				fmt.Sprintf("VPCMPEQ%s Y14, %s, Y8", s, a),
				fmt.Sprintf("VPCMPEQ%s Y14, %s, Y9", s, b),
			}
			switch kind {
			case "or":
				l = append(l, "VPAND Y9, Y8, Y8", fmt.Sprintf("VPANDN Y15, Y8, %s", d))
			case "and":
				l = append(l, "VPOR Y9, Y8, Y8", fmt.Sprintf("VPANDN Y15, Y8, %s", d))
			case "xor":
				l = append(l, "VPXOR Y9, Y8, Y8", fmt.Sprintf("VPAND Y15, Y8, %s", d))
			}
			return l
		},
	}
}

func main() {
	bodies := []body{
		{name: "addF32", op: one("VADDPS")},
		{name: "mulF32", op: one("VMULPS")},
		{name: "minF32", op: one("VMINPS")}, // a < b ? a : b
		{name: "maxF32", op: one("VMAXPS")}, // a > b ? a : b
		{name: "addF64", op: one("VADDPD")},
		{name: "mulF64", op: one("VMULPD")},
		{name: "minF64", op: one("VMINPD")},
		{name: "maxF64", op: one("VMAXPD")},
		{name: "or", op: one("VPOR")},
		{name: "and", op: one("VPAND")},
		{name: "xor", op: one("VPXOR")},
		{name: "add8", op: one("VPADDB")},
		{name: "add16", op: one("VPADDW")},
		{name: "add32", op: one("VPADDD")},
		{name: "add64", op: one("VPADDQ")},
		{name: "mul16", op: one("VPMULLW")},
		{name: "mul32", op: one("VPMULLD")},
		// 8-bit products: the low byte of a 16-bit product of the even
		// bytes, and of the odd bytes shifted down; Y15 = 0x00ff per word.
		{name: "mul8", setup: []string{allOnes, "VPSRLW $8, Y15, Y15"}, op: func(b, a, d string) []string {
			return []string{
				fmt.Sprintf("VPMULLW %s, %s, Y8", b, a),
				"VPAND Y15, Y8, Y8",
				fmt.Sprintf("VPSRLW $8, %s, Y9", a),
				fmt.Sprintf("VPSRLW $8, %s, Y10", b),
				"VPMULLW Y10, Y9, Y9",
				"VPSLLW $8, Y9, Y9",
				fmt.Sprintf("VPOR Y9, Y8, %s", d),
			}
		}},
		// 64-bit products modulo 2^64: lo(a)lo(b) + (hi(a)lo(b) + lo(a)hi(b)) << 32.
		{name: "mul64", op: func(b, a, d string) []string {
			return []string{
				fmt.Sprintf("VPSRLQ $32, %s, Y8", a),
				fmt.Sprintf("VPMULUDQ %s, Y8, Y8", b),
				fmt.Sprintf("VPSRLQ $32, %s, Y9", b),
				fmt.Sprintf("VPMULUDQ Y9, %s, Y9", a),
				"VPADDQ Y9, Y8, Y8",
				"VPSLLQ $32, Y8, Y8",
				fmt.Sprintf("VPMULUDQ %s, %s, %s", b, a, d),
				fmt.Sprintf("VPADDQ Y8, %s, %s", d, d),
			}
		}},
		{name: "minI8", op: one("VPMINSB")},
		{name: "maxI8", op: one("VPMAXSB")},
		{name: "minU8", op: one("VPMINUB")},
		{name: "maxU8", op: one("VPMAXUB")},
		{name: "minI16", op: one("VPMINSW")},
		{name: "maxI16", op: one("VPMAXSW")},
		{name: "minU16", op: one("VPMINUW")},
		{name: "maxU16", op: one("VPMAXUW")},
		{name: "minI32", op: one("VPMINSD")},
		{name: "maxI32", op: one("VPMAXSD")},
		{name: "minU32", op: one("VPMINUD")},
		{name: "maxU32", op: one("VPMAXUD")},
		// 64-bit MIN/MAX: Y8 = a > b (signed; unsigned compares with the
		// sign bits flipped, Y15 = 1<<63 per lane), then a blend.
		{name: "minI64", op: func(b, a, d string) []string {
			return []string{fmt.Sprintf("VPCMPGTQ %s, %s, Y8", b, a), fmt.Sprintf("VPBLENDVB Y8, %s, %s, %s", b, a, d)}
		}},
		{name: "maxI64", op: func(b, a, d string) []string {
			return []string{fmt.Sprintf("VPCMPGTQ %s, %s, Y8", b, a), fmt.Sprintf("VPBLENDVB Y8, %s, %s, %s", a, b, d)}
		}},
		{name: "minU64", setup: []string{allOnes, "VPSLLQ $63, Y15, Y15"}, op: func(b, a, d string) []string {
			return []string{
				fmt.Sprintf("VPXOR Y15, %s, Y8", a),
				fmt.Sprintf("VPXOR Y15, %s, Y9", b),
				"VPCMPGTQ Y9, Y8, Y8",
				fmt.Sprintf("VPBLENDVB Y8, %s, %s, %s", b, a, d),
			}
		}},
		{name: "maxU64", setup: []string{allOnes, "VPSLLQ $63, Y15, Y15"}, op: func(b, a, d string) []string {
			return []string{
				fmt.Sprintf("VPXOR Y15, %s, Y8", a),
				fmt.Sprintf("VPXOR Y15, %s, Y9", b),
				"VPCMPGTQ Y9, Y8, Y8",
				fmt.Sprintf("VPBLENDVB Y8, %s, %s, %s", a, b, d),
			}
		}},
	}
	for _, w := range []int{1, 2, 4, 8} {
		for _, k := range []string{"or", "and", "xor"} {
			bodies = append(bodies, logical(k, w))
		}
	}

	ints := []struct {
		typ string
		w   int
		sgn string
	}{
		{"Int8", 1, "I"}, {"Uint8", 1, "U"}, {"Int16", 2, "I"}, {"Uint16", 2, "U"},
		{"Int32", 4, "I"}, {"Uint32", 4, "U"}, {"Int64", 8, "I"}, {"Uint64", 8, "U"},
	}
	var uses []use
	for _, it := range ints {
		bits := 8 * it.w
		uses = append(uses,
			use{it.typ, "Min", fmt.Sprintf("min%s%d", it.sgn, bits)},
			use{it.typ, "Max", fmt.Sprintf("max%s%d", it.sgn, bits)},
			use{it.typ, "Sum", fmt.Sprintf("add%d", bits)},
			use{it.typ, "Prod", fmt.Sprintf("mul%d", bits)},
			use{it.typ, "LOr", fmt.Sprintf("lor%d", bits)},
			use{it.typ, "LAnd", fmt.Sprintf("land%d", bits)},
			use{it.typ, "LXor", fmt.Sprintf("lxor%d", bits)},
			use{it.typ, "BOr", "or"},
			use{it.typ, "BAnd", "and"},
			use{it.typ, "BXor", "xor"},
		)
	}
	for _, f := range []struct{ typ, s string }{{"Float", "F32"}, {"Double", "F64"}} {
		for _, o := range []struct{ op, n string }{{"Min", "min"}, {"Max", "max"}, {"Sum", "add"}, {"Prod", "mul"}} {
			uses = append(uses, use{f.typ, o.op, o.n + f.s})
		}
	}
	// Complex sums are sums of their float parts.
	uses = append(uses, use{"FloatComplex", "Sum", "addF32"}, use{"DoubleComplex", "Sum", "addF64"})

	var s bytes.Buffer
	s.WriteString("// Code generated by reduce_gen.go; DO NOT EDIT.\n\n//go:build amd64 && !purego\n\n#include \"textflag.h\"\n")
	for _, b := range bodies {
		writeBody(&s, b)
	}
	if err := os.WriteFile("reduce_amd64.s", s.Bytes(), 0o644); err != nil {
		panic(err)
	}

	var g bytes.Buffer
	g.WriteString("// Code generated by reduce_gen.go; DO NOT EDIT.\n\n//go:build amd64 && !purego\n\npackage kernel\n\nimport \"github.com/gofi-dev/fi/dtype\"\n\n")
	for _, b := range bodies {
		fmt.Fprintf(&g, "//go:noescape\nfunc %sAVX2(dst, a, b *byte, n int)\n\n", b.name)
	}
	g.WriteString("// avx2Bodies is the AVX2 body of each (datatype, op) that has one.\nvar avx2Bodies = map[[2]int]func(dst, a, b *byte, n int){\n")
	for _, u := range uses {
		fmt.Fprintf(&g, "\t{int(dtype.%s), int(dtype.%s)}: %sAVX2,\n", u.typ, u.op, u.body)
	}
	g.WriteString("}\n")
	src, err := format.Source(g.Bytes())
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile("reduce_avx2_amd64.go", src, 0o644); err != nil {
		panic(err)
	}
}

// writeBody writes one TEXT symbol: 128 bytes a turn (four registers of a
// in Y0-Y3, of b in Y4-Y7), then 32 bytes a turn.
func writeBody(w *bytes.Buffer, b body) {
	p := func(format string, args ...any) { fmt.Fprintf(w, "\t"+format+"\n", args...) }
	fmt.Fprintf(w, "\n// func %sAVX2(dst, a, b *byte, n int)\nTEXT ·%sAVX2(SB), NOSPLIT, $0-32\n", b.name, b.name)
	p("MOVQ dst+0(FP), DI")
	p("MOVQ a+8(FP), SI")
	p("MOVQ b+16(FP), DX")
	p("MOVQ n+24(FP), CX")
	for _, l := range b.setup {
		p("%s", l)
	}
	p("CMPQ CX, $128")
	p("JB   tail")
	w.WriteString("loop128:\n")
	for i := 0; i < 4; i++ {
		p("VMOVDQU %d(SI), Y%d", 32*i, i)
		p("VMOVDQU %d(DX), Y%d", 32*i, i+4)
	}
	for i := 0; i < 4; i++ {
		for _, l := range b.op(fmt.Sprintf("Y%d", i+4), fmt.Sprintf("Y%d", i), fmt.Sprintf("Y%d", i)) {
			p("%s", l)
		}
	}
	for i := 0; i < 4; i++ {
		p("VMOVDQU Y%d, %d(DI)", i, 32*i)
	}
	p("ADDQ $128, SI")
	p("ADDQ $128, DX")
	p("ADDQ $128, DI")
	p("SUBQ $128, CX")
	p("CMPQ CX, $128")
	p("JAE  loop128")
	w.WriteString("tail:\n")
	p("TESTQ CX, CX")
	p("JZ   done")
	w.WriteString("loop32:\n")
	p("VMOVDQU (SI), Y0")
	p("VMOVDQU (DX), Y4")
	for _, l := range b.op("Y4", "Y0", "Y0") {
		p("%s", l)
	}
	p("VMOVDQU Y0, (DI)")
	p("ADDQ $32, SI")
	p("ADDQ $32, DX")
	p("ADDQ $32, DI")
	p("SUBQ $32, CX")
	p("JNZ  loop32")
	w.WriteString("done:\n")
	p("VZEROUPPER")
	p("RET")
}
