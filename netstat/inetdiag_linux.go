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
	return dumpNetlinkHost(states, dumpOptions{info: states})
}

// dumpOptions narrow a dump below what DumpNetlink asks.
type dumpOptions struct {
	// info is the states whose sockets get tcp_info.
	info StateSet
	// noIPv6 skips the AF_INET6 request (the namespace has no IPv6 TCP
	// sockets of the wanted states: see hasIPv6TCP).
	noIPv6 bool
	// scratch, when set, is the decode buffer instead of one from
	// scratchPool: a repeated scan keeps its own, as a sync.Pool's is
	// dropped by the garbage collections between two scans a second
	// apart and would regrow (by doubling, 60,000 sockets: ~16 MB of
	// copies) every scan.
	scratch *[]Socket
}

// dumpNetlinkHost is DumpNetlink with o.
func dumpNetlinkHost(states StateSet, o dumpOptions) ([]Socket, error) {
	var ns uint64
	var st unix.Stat_t
	if unix.Stat("/proc/thread-self/ns/net", &st) == nil {
		ns = st.Ino
	}
	return dumpNetlink(0, ns, "", states, o, dumpBufferSize)
}

// dumpRequest is one SOCK_DIAG_BY_FAMILY request of a dump.
type dumpRequest struct {
	states StateSet
	info   bool
}

// dumpRequests splits states into the requests of one family's dump: the
// states in info with INET_DIAG_INFO, the others without, so the kernel
// fills tcp_info only where its age is wanted. Each request is a walk of
// the kernel's established hash (it skips other states cheaply), far less
// than tcp_info for every socket of the other states. The states without
// INFO go first: the usual move, ESTABLISHED to CLOSE_WAIT, of a socket
// between the two walks then shows it twice (dedupSockets keeps the first)
// rather than not at all.
func dumpRequests(states, info StateSet) []dumpRequest {
	var out []dumpRequest
	if without := states &^ info; without != 0 {
		out = append(out, dumpRequest{without, false})
	}
	if with := states & info; with != 0 {
		out = append(out, dumpRequest{with, true})
	}
	return out
}

// dumpNetlink dumps the namespace of the open file nsFD (0: the caller's),
// whose inode is ns and whose path errors name (where, "" for the caller's),
// as o says, reading with a user buffer
// of bufSize (0: peek each datagram's size, mdlayher/netlink's default).
func dumpNetlink(nsFD int, ns uint64, where string, states StateSet, o dumpOptions, bufSize int) ([]Socket, error) {
	c, err := netlink.Dial(unix.NETLINK_SOCK_DIAG, &netlink.Config{NetNS: nsFD, MessageBufferSize: bufSize})
	if err != nil {
		return nil, netlinkError(where, "dial", err)
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(dumpTimeout)); err != nil {
		return nil, netlinkError(where, "set deadline", err)
	}
	// A repeated scan decodes into its own buffer and copies the result
	// out once, exact-size, as the buffer is reused next scan. A single
	// dump returns what it decoded: the copy would hold the sockets twice
	// at the moment of a one-shot scan's peak memory (20,000 sockets:
	// 2.5 MB more).
	scratch := o.scratch
	if scratch == nil {
		scratch = new([]Socket)
	}
	socks := (*scratch)[:0]
	var errs lineErrors
	fams := []Family{IPv4, IPv6}
	if o.noIPv6 {
		fams = fams[:1]
	}
	for _, r := range dumpRequests(states, o.info) {
		for _, fam := range fams {
			if err := dumpOne(c, fam, r, ns, where, &socks, &errs); err != nil {
				*scratch = socks
				return nil, err
			}
		}
	}
	*scratch = socks
	out := dedupSockets(socks)
	if o.scratch != nil {
		out = slices.Clone(out)
	}
	if err := errs.err(); err != nil {
		return out, fmt.Errorf("netstat: netlink sock_diag%s: %w", inNS(where), err)
	}
	return out, nil
}

// dumpOne sends one request for family fam and appends its sockets.
func dumpOne(c *netlink.Conn, fam Family, r dumpRequest, ns uint64, where string, socks *[]Socket, errs *lineErrors) error {
	req := netlink.Message{
		Header: netlink.Header{Type: sockDiagByFamily, Flags: netlink.Request | netlink.Dump},
		Data:   encodeInetDiagReq(fam, r.states, r.info),
	}
	if _, err := c.Send(req); err != nil {
		return netlinkError(where, "send "+fam.String()+" dump request", err)
	}
	// Decode as the datagrams arrive rather than collecting every message
	// first (Conn.Execute): a message's Data points into its datagram, so
	// holding them all would hold the whole dump.
	i := 0
	for m, err := range c.ReceiveIter() {
		if err != nil {
			return netlinkError(where, "receive "+fam.String()+" dump", err)
		}
		s, ok, reason := parseInetDiagMessage(m)
		if reason != "" {
			errs.addMessage(i, m, reason)
		} else if ok {
			s.NetNS = ns
			*socks = append(*socks, s)
		}
		i++
	}
	return nil
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
