//go:build !linux

package netstat

import "fmt"

// DumpNetlink needs Linux's NETLINK_SOCK_DIAG; elsewhere it reports
// ErrNetlinkUnavailable, and the /proc fallback has nothing to read either.
func DumpNetlink(states StateSet) ([]Socket, error) {
	return nil, fmt.Errorf("netstat: %w: not Linux", ErrNetlinkUnavailable)
}

// DumpNetlinkInNetNS needs Linux, as DumpNetlink does.
func DumpNetlinkInNetNS(nsPath string, states StateSet) ([]Socket, error) {
	return nil, fmt.Errorf("netstat: %w: not Linux", ErrNetlinkUnavailable)
}

// dumpOptions narrow a dump (Linux only).
type dumpOptions struct {
	info    StateSet
	noIPv6  bool
	scratch *[]Socket
	seen    *[]uint64
	spill   *socketCollector // unused: DumpNetlink fails here
	sports  []uint16
}

func dumpNetlinkHost(states StateSet, o dumpOptions) ([]Socket, error) { return DumpNetlink(states) }

func dumpNetlinkInNetNS(nsPath string, states StateSet, o dumpOptions) ([]Socket, error) {
	return DumpNetlinkInNetNS(nsPath, states)
}

// lookupSockets needs netlink, which only Linux has.
func lookupSockets(nsPath string, socks []*Socket) ([]bool, error) {
	return nil, fmt.Errorf("netstat: %w: not Linux", ErrNetlinkUnavailable)
}
