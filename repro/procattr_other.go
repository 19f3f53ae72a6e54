//go:build !linux

package repro

import "syscall"

// childProcAttr puts the producer child in its own process group. Other
// systems have no parent-death signal: there a kill -9 of kdiag repro can
// leave the child running until its --duration ends.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
