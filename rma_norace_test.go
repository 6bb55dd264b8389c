//go:build !race

package fi

const rmaRace = false
