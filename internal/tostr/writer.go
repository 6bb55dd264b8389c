package tostr

import (
	"fmt"
	"strconv"
	"strings"
)

// List renders names as fi_info does: "[ A, B ]", "[  ]" when empty.
func List(names []string) string {
	return "[ " + strings.Join(names, ", ") + " ]"
}

// Writer writes the fi_info -v layout: "key: value" lines indented by
// four spaces per Depth.
type Writer struct {
	b     strings.Builder
	Depth int
}

// Line writes "key: value" ("key:" when value prints empty).
func (w *Writer) Line(key string, value any) {
	w.b.WriteString(strings.Repeat("    ", w.Depth))
	w.b.WriteString(key)
	w.b.WriteString(":")
	if s := fmt.Sprint(value); s != "" {
		w.b.WriteString(" ")
		w.b.WriteString(s)
	}
	w.b.WriteString("\n")
}

// Section opens a nested block and reports true, or writes "(null)" for
// a nil one and reports false. The caller raises Depth for the block.
func (w *Writer) Section(key string, isNil bool) bool {
	if isNil {
		w.Line(key, "(null)")
		return false
	}
	w.Line(key, "")
	return true
}

// String returns what was written.
func (w *Writer) String() string { return w.b.String() }

// Ptr prints a pointer as fi_info does: 0x0 when nil.
func Ptr(p any, isNil bool) string {
	if isNil {
		return "0x0"
	}
	return fmt.Sprintf("%p", p)
}

// Null prints a string as fi_info does: "(null)" when empty.
func Null(s string) string {
	if s == "" {
		return "(null)"
	}
	return s
}

// Hex prints b as 0x followed by its bytes in hex.
func Hex(b []byte) string {
	const hexdig = "0123456789abcdef"
	out := make([]byte, 0, 2+2*len(b))
	out = append(out, "0x"...)
	for _, c := range b {
		out = append(out, hexdig[c>>4], hexdig[c&15])
	}
	return string(out)
}

// flagNames maps every spelling ParseFlags accepts to its bits.
var flagNames = func() map[string]uint64 {
	m := map[string]uint64{}
	for _, tab := range [][]Bit{Caps, OpFlags} {
		for _, b := range tab {
			m[b.Name] = b.Bit
		}
	}
	for n, f := range FlagAliases {
		m[n] = f
	}
	return m
}()

// splitNames splits "A|B", "A | B", "A, B" or "[ A, B ]" into names.
func splitNames(s string) []string {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	return strings.FieldsFunc(s, func(r rune) bool { return r == '|' || r == ',' || r == ' ' || r == '\t' })
}

// parseBits parses a set of names (or 0x hex values), case-insensitively;
// bad is the first name it does not know.
func parseBits(s string, lookup func(string) (uint64, bool)) (v uint64, bad string, ok bool) {
	for _, n := range splitNames(s) {
		if b, ok := lookup(strings.ToUpper(n)); ok {
			v |= b
			continue
		}
		if strings.HasPrefix(n, "0x") {
			if b, err := strconv.ParseUint(n[2:], 16, 64); err == nil {
				v |= b
				continue
			}
		}
		return 0, n, false
	}
	return v, "", true
}

// ParseFlags parses capability and operation-flag names and their aliases.
func ParseFlags(s string) (v uint64, bad string, ok bool) {
	return parseBits(s, func(n string) (uint64, bool) {
		f, ok := flagNames[n]
		return f, ok
	})
}

// ParseModes parses mode names.
func ParseModes(s string) (v uint64, bad string, ok bool) {
	return parseBits(s, func(n string) (uint64, bool) {
		for _, b := range Modes {
			if b.Name == n {
				return b.Bit, true
			}
		}
		return 0, false
	})
}

// ParseEnum returns the value of name s (case-insensitive) in names.
func ParseEnum(s string, names []string) (int, bool) {
	n := strings.ToUpper(strings.TrimSpace(s))
	for i, name := range names {
		if name == n {
			return i, true
		}
	}
	return 0, false
}
