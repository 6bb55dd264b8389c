//go:build !race

package rma

const raceOn = false
