// Package colltest is the serial reference the collective tests compare
// with: deterministic inputs for every rank, the result each rank must
// see, and a comparison. It is written independently of package coll
// (its own 16-bit float conversions), so the tests are differential. It
// is used by tests only and carries no compatibility promise.
//
// It imports dtype and the standard library only.
package colltest
