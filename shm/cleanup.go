package shm

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The registry of files this process owns, unlinked by the signal handler.
var registry struct {
	once     sync.Once
	mu       sync.Mutex
	ch       chan os.Signal // the handler's channel, nil until installed
	disabled bool
	paths    map[string]int // owned path -> registrations
}

// register records an owned file (counted: a failed create of an existing
// name registers and unregisters it without dropping the owner's entry) and, the first time, installs the
// process-wide SIGINT/SIGTERM handler.
func register(path string) {
	registry.once.Do(installSignalCleanup)
	registry.mu.Lock()
	if registry.paths == nil {
		registry.paths = make(map[string]int)
	}
	registry.paths[path]++
	registry.mu.Unlock()
}

func unregister(path string) {
	registry.mu.Lock()
	if registry.paths[path]--; registry.paths[path] <= 0 {
		delete(registry.paths, path)
	}
	registry.mu.Unlock()
}

// Owned returns how many segment files this process currently owns.
func Owned() int {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return len(registry.paths)
}

// removeOwned unlinks every owned file. The mappings and locks stay until
// the process exits.
func removeOwned() {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	for p := range registry.paths {
		_ = unix.Unlink(p)
		delete(registry.paths, p)
	}
}

// installSignalCleanup starts one goroutine that, on SIGINT or SIGTERM,
// unlinks every owned file and then dies of the same signal (the default
// action is restored and the signal re-raised), so the exit status is the
// conventional one. Note for applications: once a segment exists, these two
// signals terminate the process even if the application also asked for them
// with signal.Notify, as they would without any handler.
//
// A signal the process ignores (signal.Ignore, nohup) stays ignored.
func installSignalCleanup() {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.disabled {
		return
	}
	ch := make(chan os.Signal, 1)
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM} {
		if !signal.Ignored(sig) {
			signal.Notify(ch, sig)
		}
	}
	registry.ch = ch
	go func() {
		sig := (<-ch).(syscall.Signal)
		removeOwned()
		signal.Reset(sig)
		_ = unix.Kill(os.Getpid(), sig)
		// The default action ends the process; should the signal be blocked
		// somehow, exit with the status a shell would report.
		time.Sleep(time.Second)
		os.Exit(128 + int(sig))
	}()
}

// DisableSignalCleanup removes (or prevents) the SIGINT/SIGTERM handler, for
// applications that handle these signals themselves and Close their
// endpoints on the way out. Files left by a process that then dies are
// reaped by the next CreateRegion. Safe for concurrent use.
func DisableSignalCleanup() {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.disabled = true
	if registry.ch != nil {
		signal.Stop(registry.ch)
	}
}
