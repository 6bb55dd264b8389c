//go:build race

package fi

// rmaRace: the race detector is on (its instrumented copies are slow, so
// the big transfers shrink).
const rmaRace = true
