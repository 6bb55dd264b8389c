//go:build linux && !amd64 && !arm64

package engine

// sysGetcpu: getcpu(2) is not wired up here; napMove only naps.
const sysGetcpu = -1
