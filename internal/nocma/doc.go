// Package nocma runs a process where the kernel refuses process_vm_readv
// and process_vm_writev, as Docker's default seccomp profile does, so
// gofi's tests can check the shm provider's way without single copy. It
// is test support: nothing in the library imports it.
//
// A test binary calls Init first thing (from an init function). A test
// that wants a child under the filter starts its own binary with
// Command's environment: the child's Init installs a seccomp filter on
// its only thread and executes itself again, so that every thread of the
// process it becomes (and every process that one starts) is under it.
// Active tells the child it is.
//
// It imports only the standard library and golang.org/x/sys/unix. Linux
// on amd64 and arm64.
package nocma
