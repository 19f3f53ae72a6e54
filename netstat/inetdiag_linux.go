//go:build linux

package netstat

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// dumpBufferSize is the user buffer each recvmsg of a dump gets. The kernel
// sizes every dump datagram after the largest buffer the reader has passed
// to recvmsg (netlink_recvmsg's max_recvmsg_len, capped at 32 KiB), and
// starts at NLMSG_GOODSIZE (about 4 KiB) otherwise: mdlayher/netlink's
// default, which peeks each datagram's size first, keeps the datagrams at
// 4 KiB and costs two recvmsg per ~12 sockets. With a fixed 32 KiB buffer the
// kernel fills ~95 sockets with tcp_info per datagram and one recvmsg reads
// each (BenchmarkDumpNetlink/buffer-* measures both). SO_RCVBUF does not
// matter for a dump: the kernel produces the next datagram only as the reader
// takes the last one.
const dumpBufferSize = 32 << 10

// dumpTimeout bounds one dump: a host's table is read in well under a second,
// and a stuck read must not hang a scan.
const dumpTimeout = 30 * time.Second

// DumpNetlink returns the TCP sockets, IPv4 and IPv6, of the calling
// goroutine's network namespace whose state is in states, through a
// NETLINK_SOCK_DIAG dump (SOCK_DIAG_BY_FAMILY with inet_diag_req_v2). The
// kernel applies the state filter. One netlink socket serves both families.
// A socket the kernel's walk reports twice (see dedupSockets) is returned
// once.
//
// Each Socket has Age and HasAge from tcp_info (not for TIME_WAIT,
// NEW_SYN_RECV and LISTEN, which have no receive times), PID 0 and FD -1
// (unattributed), and NetNS the inode of the caller's namespace
// (/proc/thread-self/ns/net), 0 if that cannot be read.
//
// When this system gives no sock_diag the error wraps ErrNetlinkUnavailable;
// malformed replies give sockets and an error wrapping ErrParse, as
// ReadProcNetTCP does for malformed lines.
func DumpNetlink(states StateSet) ([]Socket, error) {
	var ns uint64
	var st unix.Stat_t
	if unix.Stat("/proc/thread-self/ns/net", &st) == nil {
		ns = st.Ino
	}
	return dumpNetlink(0, ns, "", states, dumpBufferSize)
}

// dumpNetlink dumps the namespace of the open file nsFD (0: the caller's),
// whose inode is ns and whose path errors name (where, "" for the caller's),
// reading with a user buffer of bufSize (0: peek each datagram's size,
// mdlayher/netlink's default).
func dumpNetlink(nsFD int, ns uint64, where string, states StateSet, bufSize int) ([]Socket, error) {
	c, err := netlink.Dial(unix.NETLINK_SOCK_DIAG, &netlink.Config{NetNS: nsFD, MessageBufferSize: bufSize})
	if err != nil {
		return nil, netlinkError(where, "dial", err)
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(dumpTimeout)); err != nil {
		return nil, netlinkError(where, "set deadline", err)
	}
	// Collect into a pooled scratch slice and copy once to an exact-size
	// result, as the /proc parser does (scratchPool).
	scratch := scratchPool.Get().(*[]Socket)
	defer func() { *scratch = (*scratch)[:0]; scratchPool.Put(scratch) }()
	socks := (*scratch)[:0]
	var errs lineErrors
	for _, fam := range []Family{IPv4, IPv6} {
		req := netlink.Message{
			Header: netlink.Header{Type: sockDiagByFamily, Flags: netlink.Request | netlink.Dump},
			Data:   encodeInetDiagReq(fam, states),
		}
		if _, err := c.Send(req); err != nil {
			return nil, netlinkError(where, "send "+fam.String()+" dump request", err)
		}
		// Decode as the datagrams arrive rather than collecting every
		// message first (Conn.Execute): a message's Data points into its
		// datagram, so holding them all would hold the whole dump.
		i := 0
		for m, err := range c.ReceiveIter() {
			if err != nil {
				return nil, netlinkError(where, "receive "+fam.String()+" dump", err)
			}
			s, ok, reason := parseInetDiagMessage(m)
			if reason != "" {
				errs.addMessage(i, m, reason)
			} else if ok {
				s.NetNS = ns
				socks = append(socks, s)
			}
			i++
		}
	}
	*scratch = socks
	out := slices.Clone(dedupSockets(socks))
	if err := errs.err(); err != nil {
		return out, fmt.Errorf("netstat: netlink sock_diag%s: %w", inNS(where), err)
	}
	return out, nil
}

// netlinkError wraps a dial, send or receive error, marking with
// ErrNetlinkUnavailable the errnos that say sock_diag is not to be had here
// and with ErrNetNSUnavailable a namespace that could not be entered.
func netlinkError(where, op string, err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) && se.Syscall == "setns" {
		return fmt.Errorf("netstat: netlink sock_diag%s: %s: %w: %w", inNS(where), op, ErrNetNSUnavailable, err)
	}
	for _, errno := range []unix.Errno{unix.EPROTONOSUPPORT, unix.EAFNOSUPPORT, unix.EPERM, unix.EACCES, unix.ENOENT, unix.EOPNOTSUPP} {
		if errors.Is(err, errno) {
			return fmt.Errorf("netstat: netlink sock_diag%s: %s: %w: %w", inNS(where), op, ErrNetlinkUnavailable, err)
		}
	}
	return fmt.Errorf("netstat: netlink sock_diag%s: %s: %w", inNS(where), op, err)
}

// inNS writes " in <path>" for a namespace's path, "" for none.
func inNS(where string) string {
	if where == "" {
		return ""
	}
	return " in " + where
}
