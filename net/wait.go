package net

// Sleeping on another transport's wait object. An endpoint that links this
// transport with another one (package link: shm for local peers, this one
// for remote ones) sleeps on the other's doorbell, once: this transport
// rings it instead of its own bell while the link sleeps.

// SetWaker makes the wake-ups of a sleeper (work arriving while
// BeginWait's caller sleeps) also call wake. wake must be safe from any
// goroutine and cheap; it is called from the event loop. Set it before
// the first BeginWait.
func (t *Transport) SetWaker(wake func()) { t.waker.Store(&wake) }

// BeginWait prepares the caller to sleep elsewhere as Wait would sleep
// here: it counts the caller as sleeping (so arriving work calls the
// waker), hands the loop back if Poll had borrowed it (nobody else reads
// the sockets meanwhile), and reports whether the caller may sleep: false
// when work is already pending or the transport is closed. Every
// BeginWait is followed by one EndWait.
func (t *Transport) BeginWait() bool {
	t.sleeping.Add(1)
	t.release()
	return !t.pending() && !t.closed.Load()
}

// EndWait ends what BeginWait started.
func (t *Transport) EndWait() { t.sleeping.Add(-1) }

// Quiet reports cheaply (a few atomic loads, no system call) that a Poll
// now would deliver nothing: the loop is not borrowed, so it reads the
// sockets itself, and nothing it read, no completion and no message the
// engine refused waits for Poll. A linked endpoint whose other member is
// busy checks Quiet instead of polling an idle transport. Engine
// goroutine only (like Poll).
func (t *Transport) Quiet() bool {
	return !t.parked.Load() && len(t.blocked) == 0 && !t.pending()
}

// Unborrow hands the loop back when Poll borrowed it (own.go), so that
// the loop reads the sockets while the engine does not call Poll.
func (t *Transport) Unborrow() { t.release() }
