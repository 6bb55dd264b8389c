// Package kref is the plain-Go reference of fi_atomic(3)'s element
// semantics that tests compare gofi's kernels and transports against:
// integers through math/big (then wrapped to the width), reals and complex
// numbers with Go's own operators on typed values, one element at a time,
// written independently of package kernel. Only tests import it.
//
// It imports dtype and the standard library only (never dtype/kernel).
package kref
