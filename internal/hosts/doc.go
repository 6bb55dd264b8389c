// Package hosts makes "hosts" on one Linux machine for tests and for
// users' CI: each host is a network namespace with its own IPv4 address on
// a private subnet (all hosts joined by one bridge) and its own /dev/shm
// (a tmpfs mounted for that host alone), so processes on one host share
// memory and reach the others only over the network, as on a cluster.
//
// It needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), iproute2's ip, and
// util-linux's unshare and mount. Start returns an error wrapping
// ErrUnsupported when they are missing; New turns that into a test Skip.
//
// Everything it makes is named from the process id and a sequence number,
// so concurrent test processes never collide, and is removed by Close (or
// the test's Cleanup): processes still inside the hosts are killed, then
// the namespaces, links and mounts are removed. Leftovers of a killed test
// process are reaped by the next Start.
//
// The package owns only the namespaces, links, mounts and the ssh wrapper
// script it creates. It imports nothing from gofi and carries no
// compatibility promise (it is internal).
package hosts
