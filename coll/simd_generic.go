package coll

import "github.com/gofi-dev/fi/dtype"

// simdKernel returns the CPU-tuned kernel of (t, op), or nil.
func simdKernel(t dtype.Type, op dtype.Op) Func { return nil }
