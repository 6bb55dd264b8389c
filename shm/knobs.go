package shm

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Environment variables that size the shm transport's rings when
// TransportConfig leaves the fields zero. Sizes take a k, m or g suffix
// (powers of 1024); durations are Go durations ("500ms", "2s").
const (
	// RingMinEnv: capacity every ring starts with and shrinks back to
	// (default 4k: 8 KiB of the shm directory per direction, 16 KiB per
	// connected pair).
	RingMinEnv = "GOFI_SHM_RING_MIN"
	// RingMaxEnv: capacity a busy ring grows to (default 512k: 516 KiB
	// per direction, about 1 MiB per pair streaming both ways).
	RingMaxEnv = "GOFI_SHM_RING_MAX"
	// RingIdleEnv: time without sends after which a grown ring shrinks
	// back (default 1s).
	RingIdleEnv = "GOFI_SHM_RING_IDLE"
	// SpinEnv: how many empty progress passes a blocking read (CQ.Sread)
	// makes before it sleeps on the endpoint's doorbell. Unset: spin long
	// (about a millisecond) while the host has a CPU for every local rank,
	// briefly (OversubscribedSpin passes) when it has fewer.
	SpinEnv = "GOFI_SHM_SPIN"
	// CMAMinEnv: the smallest rendezvous payload always fetched with
	// single copy (process_vm_readv). Unset: every rendezvous size
	// (above the 16 KiB eager limit) takes whichever of single copy and
	// segments has been faster lately for its size, which moves with the
	// CPUs' placement. 1 forces single copy at every size (measuring);
	// FI_SHM_DISABLE_CMA=1 forces segments.
	CMAMinEnv = "GOFI_SHM_CMA_MIN"
)

// OversubscribedSpin is the spin budget when local ranks outnumber CPUs:
// a few microseconds, enough to catch a peer already running on the
// other CPU, short enough not to take the CPU from a peer waiting for it.
const OversubscribedSpin = 32

// localRanksEnv are the launchers' variables for the number of ranks on
// this host: Hydra (MPICH), Open MPI, torchrun, Slurm.
var localRanksEnv = []string{"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "SLURM_STEP_TASKS_PER_NODE"}

// envLocalRanks returns the number of ranks a launcher says run on this
// host, or 0. Slurm's value may read "4(x2)": the leading number counts.
func envLocalRanks() int {
	for _, name := range localRanksEnv {
		v := os.Getenv(name)
		i := 0
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		if n, err := strconv.Atoi(v[:i]); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

// parseSize reads "4096", "4k", "512K", "1m" or "1g".
func parseSize(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mul := 1
	switch {
	case strings.HasSuffix(t, "k"):
		mul, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "m"):
		mul, t = 1<<20, t[:len(t)-1]
	case strings.HasSuffix(t, "g"):
		mul, t = 1<<30, t[:len(t)-1]
	}
	n, err := strconv.Atoi(t)
	if err != nil || n <= 0 || n > MaxSegmentSize/mul {
		return 0, fmt.Errorf("%w: size %q", ErrSize, s)
	}
	return n * mul, nil
}

// envSize returns the size in the environment variable name, or def when
// it is unset or empty.
func envSize(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := parseSize(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

// envDuration returns the duration in the environment variable name, or
// def when it is unset or empty.
func envDuration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: %s=%q is not a positive duration", ErrSize, name, v)
	}
	return d, nil
}
