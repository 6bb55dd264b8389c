//go:build !amd64 || purego

package kernel

import "github.com/gofi-dev/fi/dtype"

func widenBody(t dtype.Type) func(dst, src *byte, n int)  { return nil }
func narrowBody(t dtype.Type) func(dst, src *byte, n int) { return nil }
