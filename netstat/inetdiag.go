package netstat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/mdlayher/netlink"
)

// The inet_diag structures are encoded and decoded here by hand, over
// mdlayher/netlink, which carries netlink messages (and opens the socket in
// another namespace) but knows no sock_diag family. No well-kept Go library
// exposes inet_diag_req_v2 with its idiag_states filter: vishvananda/netlink,
// the one that has sock_diag, hard-codes States 0xfff in SocketDiagTCP and
// SocketDiagTCPInfo (socket_linux.go, both the package functions and the
// newer Handle methods), so every ESTABLISHED socket of the host would cross
// to user space when only CLOSE_WAIT is wanted, and it allocates a net.IP
// pair and two structs per socket. The layouts are small and fixed by the
// kernel's ABI; each is pinned below to its header, and TestInetDiagLayouts
// checks the offsets.

// ErrNetlinkUnavailable is wrapped by DumpNetlink's and DumpNetlinkInNetNS's
// error when this kernel or sandbox gives no NETLINK_SOCK_DIAG: the socket
// cannot be created (EPROTONOSUPPORT, EAFNOSUPPORT, or EPERM/EACCES under a
// seccomp or LSM policy) or the kernel has no TCP handler for it (ENOENT:
// tcp_diag not loaded, EOPNOTSUPP). The scanner then falls back to
// ReadProcNetTCP. The underlying errno stays checkable with errors.Is.
var ErrNetlinkUnavailable = errors.New("netlink sock_diag unavailable")

// From include/uapi/linux/sock_diag.h and include/uapi/linux/inet_diag.h.
const (
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY, the request's nlmsg_type
	ipprotoTCP       = 6  // IPPROTO_TCP, sdiag_protocol
	inetDiagInfo     = 2  // INET_DIAG_INFO: the attribute carrying struct tcp_info

	// sizeof(struct inet_diag_req_v2): sdiag_family, sdiag_protocol,
	// idiag_ext, pad (1 byte each), idiag_states (u32), then struct
	// inet_diag_sockid id (48 bytes).
	sizeofInetDiagReqV2 = 56
	// sizeof(struct inet_diag_msg): idiag_family, idiag_state, idiag_timer,
	// idiag_retrans (u8), id (48), idiag_expires, idiag_rqueue,
	// idiag_wqueue, idiag_uid, idiag_inode (u32).
	sizeofInetDiagMsg = 72

	// Offsets in struct inet_diag_msg. struct inet_diag_sockid at 4:
	// idiag_sport (__be16) 4, idiag_dport (__be16) 6, idiag_src (__be32[4])
	// 8, idiag_dst (__be32[4]) 24, idiag_if 40, idiag_cookie[2] 44.
	offFamily = 0
	offState  = 1
	offTimer  = 2
	offExpire = 52
	offSport  = 4
	offDport  = 6
	offSrc    = 8
	offDst    = 24
	offRqueue = 56
	offWqueue = 60
	offUID    = 64
	offInode  = 68

	// Offsets in struct tcp_info (include/uapi/linux/tcp.h): eight u8
	// fields, then u32s: tcpi_rto 8, tcpi_ato 12, tcpi_snd_mss 16,
	// tcpi_rcv_mss 20, tcpi_unacked 24, tcpi_sacked 28, tcpi_lost 32,
	// tcpi_retrans 36, tcpi_fackets 40, tcpi_last_data_sent 44,
	// tcpi_last_ack_sent 48, tcpi_last_data_recv 52, tcpi_last_ack_recv 56.
	// The test checks them against golang.org/x/sys/unix.TCPInfo.
	offLastDataSent = 44
	offLastDataRecv = 52
	offLastAckRecv  = 56
	minTCPInfoLen   = offLastAckRecv + 4
)

// encodeInetDiagReq returns a struct inet_diag_req_v2 asking for the TCP
// sockets of family fam whose state is in states, with struct tcp_info
// (idiag_ext bit INET_DIAG_INFO-1) when info is true. idiag_states is the
// StateSet as is: the kernel skips sockets of other states itself
// (inet_diag_dump_icsk), so a CLOSE_WAIT query costs nothing per ESTABLISHED
// socket in user space. Without INFO the kernel does not fill tcp_info
// (tcp_get_info, under the socket's lock) for each socket, the dominant
// kernel cost of a dump, and each reply is ~250 bytes shorter.
//
// With sports, an INET_DIAG_REQ_BYTECODE attribute follows the struct: the
// kernel then sends only the sockets whose local port is one of them (see
// sportFilter).
func encodeInetDiagReq(fam Family, states StateSet, info bool, sports []uint16) []byte {
	var bc []byte
	if len(sports) > 0 {
		bc = sportFilter(sports)
	}
	n := sizeofInetDiagReqV2
	if bc != nil {
		n += 4 + len(bc) // struct nlattr, then the program (a multiple of 4)
	}
	b := make([]byte, n)
	b[0] = byte(fam)
	b[1] = ipprotoTCP
	if info {
		b[2] = 1 << (inetDiagInfo - 1)
	}
	binary.NativeEndian.PutUint32(b[4:], uint32(states))
	// id stays zero: a dump matches every address and port. The cookie is
	// ignored in dumps.
	if bc != nil {
		a := b[sizeofInetDiagReqV2:]
		binary.NativeEndian.PutUint16(a[0:], uint16(4+len(bc))) // nla_len
		binary.NativeEndian.PutUint16(a[2:], inetDiagReqBytecode)
		copy(a[4:], bc)
	}
	return b
}

// The inet_diag filter program (include/uapi/linux/inet_diag.h): a
// sequence of struct inet_diag_bc_op { u8 code; u8 yes; u16 no; }, run by
// inet_diag_bc_run (net/ipv4/inet_diag.c) for each socket of the wanted
// states before it is filled in: at each op, a true condition moves yes
// bytes on, a false one no bytes; the socket is sent when the program ends
// exactly at its last byte, and skipped when it jumps past it (4 bytes
// past, by convention). A port comparison carries its port in the no field
// of a second op. inet_diag_bc_audit rejects (EINVAL) a program whose ops
// the yes offsets do not chain from the first to the end, or whose no
// offsets land elsewhere than on that chain or 4 bytes past the end.
const (
	inetDiagReqBytecode = 1 // INET_DIAG_REQ_BYTECODE, the request's attribute type
	bcJmp               = 1 // INET_DIAG_BC_JMP: always false, so it takes no
	bcSGE               = 2 // INET_DIAG_BC_S_GE: local port >= the port
	bcSLE               = 3 // INET_DIAG_BC_S_LE: local port <= the port

	// maxFilterRanges bounds the port ranges sportFilter puts in a
	// program (20 bytes each, in an attribute of at most 64 KiB); a query
	// with more ranges is filtered in user space alone.
	maxFilterRanges = 256
)

// sportFilter returns the filter program that keeps the sockets whose local
// port is one of ports, nil when ports is empty or makes more than
// maxFilterRanges ranges. Hand-written because no Go library encodes
// inet_diag bytecode (see the comment at the top of this file); it is the
// program ss compiles for "sport = :A or sport = :B", with the S_GE and
// S_LE comparisons every kernel since 2.6 has (S_EQ came in 4.x), and
// consecutive ports merged into one range:
//
//	GE lo0  LE hi0  JMP end  GE lo1  LE hi1  JMP end ... GE loN  LE hiN
//
// A socket below lo_i or above hi_i goes on to range i+1 (past the last:
// skipped); one within a range reaches the JMP after it, which jumps to
// the end: kept. The yes offsets chain every op from the first to the end,
// and every no lands on an op of that chain or 4 bytes past the end, which
// is what the kernel's audit requires.
func sportFilter(ports []uint16) []byte {
	ranges := portRanges(ports)
	if len(ranges) == 0 || len(ranges) > maxFilterRanges {
		return nil
	}
	const rangeLen, jmpLen = 16, 4 // GE and LE, with their port ops; JMP
	total := len(ranges)*rangeLen + (len(ranges)-1)*jmpLen
	b := make([]byte, 0, total)
	op := func(code, yes uint8, no uint16) {
		b = append(b, code, yes)
		b = binary.NativeEndian.AppendUint16(b, no)
	}
	for i, r := range ranges {
		// Where a socket outside this range goes: the next range's GE, or
		// 4 bytes past the end (skipped). Offsets are from the op itself.
		next := rangeLen + jmpLen
		if i == len(ranges)-1 {
			next = total - len(b) + 4
		}
		op(bcSGE, 8, uint16(next))
		op(0, 0, r[0])
		op(bcSLE, 8, uint16(next-8))
		op(0, 0, r[1])
		if i < len(ranges)-1 {
			op(bcJmp, 4, uint16(total-len(b))) // to the end: kept
		}
	}
	return b
}

// portRanges returns ports as sorted ranges of consecutive ports, [lo, hi]
// inclusive; port 0 (never a socket's local port) is left out.
func portRanges(ports []uint16) [][2]uint16 {
	p := slices.Clone(ports)
	slices.Sort(p)
	p = slices.Compact(p)
	var out [][2]uint16
	for _, x := range p {
		if x == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1][1]+1 == x {
			out[n-1][1] = x
			continue
		}
		out = append(out, [2]uint16{x, x})
	}
	return out
}

// parseInetDiag decodes the replies of a SOCK_DIAG_BY_FAMILY dump: one
// struct inet_diag_msg per socket, followed by rtattrs, of which it reads
// INET_DIAG_INFO's struct tcp_info for the age. Done and no-op messages are
// skipped. A malformed message is skipped too; the sockets of the good ones
// are returned with an error wrapping ErrParse that says which messages were
// bad, the contract of parseProcNetTCP.
func parseInetDiag(msgs []netlink.Message) ([]Socket, error) {
	socks := make([]Socket, 0, len(msgs))
	var errs lineErrors
	for i, m := range msgs {
		s, ok, reason := parseInetDiagMessage(m)
		if reason != "" {
			errs.addMessage(i, m, reason)
		} else if ok {
			socks = append(socks, s)
		}
	}
	return socks, errs.err()
}

// parseInetDiagMessage decodes one reply. ok is false for a message that
// carries no socket (Done, Noop); reason is non-empty for a malformed one.
func parseInetDiagMessage(m netlink.Message) (s Socket, ok bool, reason string) {
	switch m.Header.Type {
	case sockDiagByFamily:
	case netlink.Done, netlink.Noop:
		return s, false, ""
	default:
		return s, false, fmt.Sprintf("message type %d, want SOCK_DIAG_BY_FAMILY (%d)", m.Header.Type, sockDiagByFamily)
	}
	b := m.Data
	if len(b) < sizeofInetDiagMsg {
		return s, false, fmt.Sprintf("%d bytes, shorter than struct inet_diag_msg (%d)", len(b), sizeofInetDiagMsg)
	}
	s.Family = Family(b[offFamily])
	s.State = State(b[offState])
	if s.State == 0 || s.State >= maxState {
		return s, false, fmt.Sprintf("idiag_state %d is not a TCP state", b[offState])
	}
	sport := binary.BigEndian.Uint16(b[offSport:])
	dport := binary.BigEndian.Uint16(b[offDport:])
	switch s.Family {
	case IPv4:
		s.Local = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[offSrc:offSrc+4])), sport)
		s.Remote = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[offDst:offDst+4])), dport)
	case IPv6:
		s.Local = netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[offSrc:offSrc+16])), sport)
		s.Remote = netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[offDst:offDst+16])), dport)
	default:
		return s, false, fmt.Sprintf("idiag_family %d is neither AF_INET nor AF_INET6", b[offFamily])
	}
	s.RecvQ = binary.NativeEndian.Uint32(b[offRqueue:])
	s.SendQ = binary.NativeEndian.Uint32(b[offWqueue:])
	s.UID = binary.NativeEndian.Uint32(b[offUID:])
	s.Inode = uint64(binary.NativeEndian.Uint32(b[offInode:]))
	s.FD = -1

	// The rtattrs (struct rtattr: u16 rta_len, u16 rta_type, value, padded
	// to 4), walked by hand: an AttributeDecoder per message would allocate
	// for each of tens of thousands of sockets. TIME_WAIT and NEW_SYN_RECV
	// replies (inet_twsk_diag_fill, inet_req_diag_fill) carry no
	// INET_DIAG_INFO, and a listener's tcp_info has no receive times
	// (tcp_get_info returns early for TCP_LISTEN): those sockets keep
	// HasAge false.
	for a := b[sizeofInetDiagMsg:]; len(a) >= 4; {
		n := int(binary.NativeEndian.Uint16(a))
		typ := binary.NativeEndian.Uint16(a[2:]) & 0x3fff // NLA_TYPE_MASK
		if n < 4 || n > len(a) {
			return s, false, fmt.Sprintf("rtattr length %d does not fit the %d bytes left", n, len(a))
		}
		if typ == inetDiagInfo && n-4 >= minTCPInfoLen && s.State != Listen {
			info := a[4:n]
			sent := binary.NativeEndian.Uint32(info[offLastDataSent:])
			data := binary.NativeEndian.Uint32(info[offLastDataRecv:])
			ack := binary.NativeEndian.Uint32(info[offLastAckRecv:])
			s.Age, s.HasAge = time.Duration(min(data, ack))*time.Millisecond, true
			if s.State == CloseWait {
				s.AgeSpan = finSpan(b[offTimer], binary.NativeEndian.Uint32(b[offExpire:]), sent, data, ack)
				if last := min(sent, data); s.AgeSpan == 0 && last > ack {
					// The FIN came ack ms ago, the last data last ms
					// ago: the connection was idle for the difference.
					s.IdleMS = last - ack
				}
			}
		}
		a = a[min(len(a), (n+3)&^3):]
	}
	return s, true, ""
}

// idiag_timer values (net/ipv4/inet_diag.c, inet_sk_diag_fill): which of a
// socket's timers is pending.
const (
	timerNone      = 0
	timerKeepalive = 2
)

// finSpan returns how far a CLOSE_WAIT socket's FIN may lie before
// tcpi_last_ack_recv (ack, ms ago), 0 when ack is the FIN's time exactly (see
// Socket.Age): nothing was sent after the peer's last data (sent, data: ms
// since the last data sent and received) and no keepalive probe can have
// been answered since, because none is armed (timer) or the last data came
// less than a keepalive period ago (the period is at least ack + expires,
// the ms until the keepalive timer fires). Otherwise the FIN came no
// earlier than the last data: the span is data - ack.
func finSpan(timer uint8, expires, sent, data, ack uint32) uint32 {
	if data <= ack {
		return 0
	}
	quiet := sent >= data
	switch {
	case quiet && timer == timerNone:
		return 0
	case quiet && timer == timerKeepalive && uint64(data) < uint64(ack)+uint64(expires):
		return 0
	}
	return data - ack
}

// addMessage records a malformed netlink message, by index, with its first
// bytes in hex.
func (e *lineErrors) addMessage(i int, m netlink.Message, reason string) {
	if len(e.quoted) == maxReportedLines {
		e.more++
		return
	}
	head := m.Data[:min(len(m.Data), 16)]
	e.quoted = append(e.quoted, fmt.Sprintf("message %d (type %d, %d bytes): %s: data % x", i, m.Header.Type, len(m.Data), reason, head))
}

// encodeInetDiagLookup is the request for one socket by its addresses
// (inet_diag_find_one_icsk: idiag_src and idiag_sport are the local end,
// idiag_dst and idiag_dport the remote), in any state, its cookie not
// checked (INET_DIAG_NOCOOKIE).
func encodeInetDiagLookup(fam Family, local, remote netip.AddrPort) []byte {
	b := encodeInetDiagReq(fam, AllStates, false, nil)
	id := b[8:]
	binary.BigEndian.PutUint16(id[0:], local.Port())
	binary.BigEndian.PutUint16(id[2:], remote.Port())
	putAddr := func(dst []byte, a netip.Addr) {
		if fam == IPv4 {
			v := a.Unmap().As4()
			copy(dst, v[:])
			return
		}
		v := a.As16()
		copy(dst, v[:])
	}
	putAddr(id[4:20], local.Addr())
	putAddr(id[20:36], remote.Addr())
	binary.NativeEndian.PutUint32(id[40:], ^uint32(0))
	binary.NativeEndian.PutUint32(id[44:], ^uint32(0))
	return b
}
