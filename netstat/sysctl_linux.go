//go:build linux

package netstat

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// openInNetNS opens paths in the network namespace nsPath names (see
// NetSysctls): on a locked OS thread moved there with setns(2) and back.
// Written here, not taken from a library: mdlayher/netlink does the same
// for its socket but does not export it, and vishvananda/netns would
// still leave the thread locking and the way back to the caller, which is
// all there is to it.
func openInNetNS(nsPath string, paths []string) ([]*os.File, error) {
	target, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("netstat: %w: open %s: %w", ErrNetNSUnavailable, nsPath, err)
	}
	defer unix.Close(target)
	type result struct {
		files []*os.File
		err   error
	}
	done := make(chan result, 1)
	go func() {
		// The thread, not the process, changes namespace: this goroutine
		// keeps it until the thread is back in its own namespace, and
		// ends with it locked (so the runtime ends the thread) should the
		// way back fail.
		runtime.LockOSThread()
		var st, self unix.Stat_t
		if err := unix.Fstat(target, &st); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("netstat: %w: stat %s: %w", ErrNetNSUnavailable, nsPath, err)}
			return
		}
		if unix.Stat("/proc/thread-self/ns/net", &self) == nil && self.Dev == st.Dev && self.Ino == st.Ino {
			// The caller's own namespace: no setns, no privilege needed.
			files, err := openSysctlFiles(paths)
			runtime.UnlockOSThread()
			done <- result{files, err}
			return
		}
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("netstat: %w: open this thread's namespace: %w", ErrNetNSUnavailable, err)}
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("netstat: %w: setns %s: %w", ErrNetNSUnavailable, nsPath, err)}
			return
		}
		files, err := openSysctlFiles(paths)
		if berr := unix.Setns(orig, unix.CLONE_NEWNET); berr != nil {
			// The thread stays locked and dies with this goroutine.
			done <- result{files, err}
			return
		}
		runtime.UnlockOSThread()
		done <- result{files, err}
	}()
	r := <-done
	return r.files, r.err
}
