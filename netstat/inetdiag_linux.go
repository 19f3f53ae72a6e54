//go:build linux

package netstat

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
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
	// seen, when set, is the inode buffer dedupSockets fills, kept with
	// scratch by a repeated scan.
	seen *[]uint64
	// spill, when set, receives the dump's sockets, left in its spill
	// chunks, and the dump returns none: a one-shot scan joins every
	// namespace's into one slice of their total size (Scanner.Scan)
	// and dedups each there, so that no namespace's sockets are ever
	// held twice. It must start with no sockets (its s may have room:
	// a recycled snapshot's, which the dump fills first); on an error it
	// holds nothing.
	spill *socketCollector
	// sports, when set, has the kernel send only the sockets whose local
	// port is one of these (a bytecode filter: see sportFilter), for
	// Query.ListenPorts.
	sports []uint16
	// library reads the replies through mdlayher/netlink's ReceiveIter
	// instead of receiveDump: only BenchmarkDumpNetlink sets it, to
	// measure the difference.
	library bool
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
	sports []uint16
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
		out = append(out, dumpRequest{states: without})
	}
	if with := states & info; with != 0 {
		out = append(out, dumpRequest{states: with, info: true})
	}
	return out
}

// dumpNetlink dumps the namespace of the open file nsFD (0: the caller's),
// whose inode is ns and whose path errors name (where, "" for the caller's),
// as o says, reading with a user buffer
// of bufSize (0: dumpBufferSize; with o.library, 0 peeks each datagram's
// size, mdlayher/netlink's default).
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
	socks := o.spill
	if socks == nil {
		socks = &socketCollector{s: (*scratch)[:0]}
	}
	var errs lineErrors
	fams := []Family{IPv4, IPv6}
	if o.noIPv6 {
		fams = fams[:1]
	}
	var rc syscall.RawConn
	var buf []byte
	if !o.library {
		if rc, err = c.SyscallConn(); err != nil {
			return nil, netlinkError(where, "raw conn", err)
		}
		buf = make([]byte, cmp.Or(bufSize, dumpBufferSize))
	}
	for _, r := range dumpRequests(states, o.info) {
		r.sports = o.sports
		for _, fam := range fams {
			if err := dumpOne(c, rc, buf, fam, r, ns, where, socks, &errs); err != nil {
				if o.spill != nil {
					o.spill.release()
				} else {
					*scratch = socks.collect()
				}
				return nil, err
			}
		}
	}
	if o.spill != nil {
		if err := errs.err(); err != nil {
			o.spill.release()
			return nil, fmt.Errorf("netstat: netlink sock_diag%s: %w", inNS(where), err)
		}
		return nil, nil
	}
	*scratch = socks.collect()
	out := dedupSocketsWith(*scratch, o.seen)
	if o.scratch != nil {
		out = slices.Clone(out)
	}
	if err := errs.err(); err != nil {
		return out, fmt.Errorf("netstat: netlink sock_diag%s: %w", inNS(where), err)
	}
	return out, nil
}

// dumpOne sends one request for family fam and appends its sockets. With
// rc set it reads the replies with receiveDump into buf, else through
// mdlayher/netlink's ReceiveIter.
func dumpOne(c *netlink.Conn, rc syscall.RawConn, buf []byte, fam Family, r dumpRequest, ns uint64, where string, socks *socketCollector, errs *lineErrors) error {
	req := netlink.Message{
		Header: netlink.Header{Type: sockDiagByFamily, Flags: netlink.Request | netlink.Dump},
		Data:   encodeInetDiagReq(fam, r.states, r.info, r.sports),
	}
	sent, err := c.Send(req)
	if err != nil {
		return netlinkError(where, "send "+fam.String()+" dump request", err)
	}
	// Decode as the datagrams arrive rather than collecting every message
	// first (Conn.Execute): a message's Data points into its datagram, so
	// holding them all would hold the whole dump.
	i := 0
	decode := func(m netlink.Message) {
		s, ok, reason := parseInetDiagMessage(m)
		if reason != "" {
			errs.addMessage(i, m, reason)
		} else if ok {
			s.NetNS = ns
			socks.add(s)
		}
		i++
	}
	if rc != nil {
		if err := receiveDump(rc, buf, sent.Header.Sequence, decode); err != nil {
			return netlinkError(where, "receive "+fam.String()+" dump", err)
		}
		return nil
	}
	for m, err := range c.ReceiveIter() {
		if err != nil {
			return netlinkError(where, "receive "+fam.String()+" dump", err)
		}
		decode(m)
	}
	return nil
}

// errDumpTruncated: a datagram larger than the receive buffer, which the
// kernel never sends a reader whose buffer is dumpBufferSize.
var errDumpTruncated = errors.New("netlink datagram truncated")

// receiveDump reads the replies of the dump request seq from rc, one
// datagram at a time into buf, and calls decode with each message until
// NLMSG_DONE; an NLMSG_ERROR reply, or a DONE carrying an error, is the
// error. The messages' Data point into buf and are only valid during the
// call.
//
// Written against the socket rather than with Conn.ReceiveIter, which is
// what this package used until it measured the cost: with a fixed
// MessageBufferSize, mdlayher/netlink copies every datagram into a new
// buffer (conn.ownedBuffer) so that the messages it yields may be kept.
// The decoder keeps nothing of them, and the copies were one 32 KiB
// allocation per ~95 sockets: 8 MB per one-shot scan of 20,000 CLOSE_WAIT
// sockets with tcp_info, 7 MB per second in a 1 Hz watch of 60,000
// (BenchmarkDumpNetlink/*/library-32k against */raw-32k). Framing follows
// netlink(7): nlmsghdr, payload, padding to 4 bytes; the sequence number
// tells this dump's replies from anything else queued on the socket.
func receiveDump(rc syscall.RawConn, buf []byte, seq uint32, decode func(netlink.Message)) error {
	for {
		var n, flags int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, _, flags, _, rerr = unix.Recvmsg(int(fd), buf, nil, 0)
			return rerr != unix.EAGAIN && rerr != unix.EWOULDBLOCK
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
		if flags&unix.MSG_TRUNC != 0 {
			return errDumpTruncated
		}
		if done, err := decodeDatagram(buf[:n], seq, decode); done || err != nil {
			return err
		}
	}
}

// decodeDatagram calls decode with each message of the dump reply datagram
// b that answers request seq, and reports whether the dump is done
// (NLMSG_DONE). An NLMSG_ERROR reply, a DONE carrying an error, or a
// message whose length runs past the datagram is an error.
func decodeDatagram(b []byte, seq uint32, decode func(netlink.Message)) (done bool, err error) {
	for len(b) >= unix.NLMSG_HDRLEN {
		var m netlink.Message
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return false, fmt.Errorf("netlink message length %d in a datagram of %d bytes left", l, len(b))
		}
		m.Header = netlink.Header{
			Length:   uint32(l),
			Type:     netlink.HeaderType(binary.NativeEndian.Uint16(b[4:6])),
			Flags:    netlink.HeaderFlags(binary.NativeEndian.Uint16(b[6:8])),
			Sequence: binary.NativeEndian.Uint32(b[8:12]),
			PID:      binary.NativeEndian.Uint32(b[12:16]),
		}
		m.Data = b[unix.NLMSG_HDRLEN:l]
		b = b[min(len(b), (l+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1)):]
		if m.Header.Sequence != seq {
			continue // not a reply to this request
		}
		switch m.Header.Type {
		case netlink.Done, netlink.Error:
			// Both start with an int: 0, or a negative errno.
			if len(m.Data) >= 4 {
				if code := int32(binary.NativeEndian.Uint32(m.Data[0:4])); code < 0 {
					return false, unix.Errno(-code)
				}
			}
			if m.Header.Type == netlink.Done {
				return true, nil
			}
			continue // an ACK: nothing to decode
		}
		decode(m)
	}
	return false, nil
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

// lookupSockets asks the kernel of the network namespace nsPath names (""
// for the caller's own) for each of socks (one request each, by its
// addresses) and returns, for each, whether it is still there with the
// same inode: a socket closed since the dump is gone, or an orphan (inode
// 0) in LAST_ACK or later. Another namespace needs CAP_SYS_ADMIN, as its
// dump did.
func lookupSockets(nsPath string, socks []*Socket) ([]bool, error) {
	var cfg *netlink.Config
	if nsPath != "" {
		fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
		if fd == 0 {
			// Config.NetNS 0 means "no namespace" (see dumpNetlinkInNetNS).
			dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 1)
			if err != nil {
				return nil, err
			}
			defer unix.Close(dup)
			fd = dup
		}
		cfg = &netlink.Config{NetNS: fd}
	}
	c, err := netlink.Dial(unix.NETLINK_SOCK_DIAG, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(dumpTimeout)); err != nil {
		return nil, err
	}
	out := make([]bool, len(socks))
	for i, s := range socks {
		msgs, err := c.Execute(netlink.Message{
			Header: netlink.Header{Type: sockDiagByFamily, Flags: netlink.Request},
			Data:   encodeInetDiagLookup(s.Family, s.Local, s.Remote),
		})
		if err != nil {
			continue // ENOENT: gone
		}
		for _, m := range msgs {
			if got, ok, _ := parseInetDiagMessage(m); ok && got.Inode == s.Inode {
				out[i] = true
			}
		}
	}
	return out, nil
}
