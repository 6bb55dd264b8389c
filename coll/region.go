package coll

import "github.com/gofi-dev/fi/engine"

// shmStep is one shared-memory step of a plan (node-local collectives).
type shmStep struct{}

// region is a group's node-local shared-memory region.
type region struct{}

func (r *region) close() {}

// setupRegion maps the group's node-local region after the join, when its
// members share memory.
func (g *Group) setupRegion() engine.Code { return 0 }

// buildShm writes a plan over the node-local region; false when the
// operation does not use it.
func (g *Group) buildShm(o *opState) bool { return false }

func (g *Group) startShm(i int) {}

// shmPoll advances shared-memory steps.
func (e *Endpoint) shmPoll() bool { return false }
