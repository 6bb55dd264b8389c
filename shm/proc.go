package shm

import "golang.org/x/sys/unix"

var errPerm error = unix.EPERM

func syscallKill0(pid int) error { return unix.Kill(pid, 0) }
