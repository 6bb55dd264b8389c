package engine

import "github.com/gofi-dev/fi/internal/pipetest"

// hub connects in-process pipe transports (internal/pipetest): a test
// stand-in for shm/tcp with the same contract (eager up to MaxEager,
// rendezvous above it). Its Wait sleeps, as a real idle transport's does.
type hub = pipetest.Hub

func newHub(maxEager int) *hub {
	h := pipetest.NewHub(maxEager)
	h.SleepInWait = true
	return h
}

// book is an AddrBook over a slice of names: fi_addr i is Names[i].
type book = pipetest.Book
