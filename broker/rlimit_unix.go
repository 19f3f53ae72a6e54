//go:build linux || darwin

package broker

import "syscall"

// openFileLimit returns the process's soft limit on open files
// (RLIMIT_NOFILE, getrlimit(2)), or 0 when it cannot tell.
func openFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return uint64(r.Cur)
}
