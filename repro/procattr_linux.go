package repro

import "syscall"

// childProcAttr puts the producer child in its own process group (so a
// stop signals all of it) and has the kernel kill it if kdiag dies first
// (PR_SET_PDEATHSIG), so a kill -9 of kdiag repro leaves no producer behind.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
