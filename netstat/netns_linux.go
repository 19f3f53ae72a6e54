//go:build linux

package netstat

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// DumpNetlinkInNetNS is DumpNetlink for the network namespace nsPath names
// (a /proc/<pid>/ns/net, see NetNSPath, or a bind mount under
// /run/netns): mdlayher/netlink opens the sock_diag socket inside it
// (Config.NetNS: a locked OS thread is moved there with setns(2) for the
// socket(2) call and moved back), and the socket answers for that namespace
// from then on. It needs CAP_SYS_ADMIN; without it, or when nsPath cannot be
// opened, the error wraps ErrNetNSUnavailable (and fs.ErrNotExist when the
// process has exited). Each Socket's NetNS is the namespace's inode.
func DumpNetlinkInNetNS(nsPath string, states StateSet) ([]Socket, error) {
	return dumpNetlinkInNetNS(nsPath, states, dumpOptions{info: states})
}

// dumpNetlinkInNetNS is DumpNetlinkInNetNS with o.
func dumpNetlinkInNetNS(nsPath string, states StateSet, o dumpOptions) ([]Socket, error) {
	fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("netstat: %w: open %s: %w", ErrNetNSUnavailable, nsPath, err)
	}
	defer unix.Close(fd)
	var st, self unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("netstat: %w: stat %s: %w", ErrNetNSUnavailable, nsPath, err)
	}
	// The caller's own namespace needs no setns, hence no privilege.
	if unix.Stat("/proc/thread-self/ns/net", &self) == nil && self.Dev == st.Dev && self.Ino == st.Ino {
		return dumpNetlink(0, st.Ino, nsPath, states, o, dumpBufferSize)
	}
	// Config.NetNS 0 means "no namespace": should the file have landed on
	// fd 0 (stdin closed), use a copy.
	if fd == 0 {
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 1)
		if err != nil {
			return nil, fmt.Errorf("netstat: %w: dup %s: %w", ErrNetNSUnavailable, nsPath, err)
		}
		defer unix.Close(dup)
		fd = dup
	}
	return dumpNetlink(fd, st.Ino, nsPath, states, o, dumpBufferSize)
}
