package events

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Kernel TCP states (include/net/tcp_states.h) the transition records are
// about.
const (
	tcpEstablished = 1
	tcpClose       = 7
	tcpCloseWait   = 8
)

// A transition record, as the tracepoint program writes it into the ring
// buffer (every field in the host's byte order unless said otherwise).
// Bytes 16-35 are the first 20 bytes of struct sock_common
// (include/net/sock.h), copied as they are: see skcCopy.
const (
	recKtime  = 0  // u64: bpf_ktime_get_ns
	recSock   = 8  // u64: the struct sock pointer
	recDaddr  = 16 // skc_daddr: 4 bytes, network order
	recSaddr  = 20 // skc_rcv_saddr: 4 bytes, network order
	recDport  = 28 // skc_dport: u16, network order (24-27 are skc_hash)
	recNum    = 30 // skc_num: u16, host order
	recFamily = 32 // skc_family: u16 (34-35: skc_state and flags)
	recOld    = 36 // u8: oldstate
	recNew    = 37 // u8: newstate (38-39 zero)
	recV6Dst  = 40 // skc_v6_daddr: 16 bytes, when Open found its offset; else zero
	recV6Src  = 56 // skc_v6_rcv_saddr: 16 bytes, likewise
	recCookie = 72 // skc_cookie: u64, which follows them; likewise
	recSize   = 80
)

// v6Copy is how many bytes a record copies from skc_v6_daddr on: the two
// IPv6 addresses and skc_cookie.
const v6Copy = recSize - recV6Dst

// skcCopy is how many bytes of struct sock_common a record copies from
// its start: skc_daddr, skc_rcv_saddr, skc_hash, skc_dport, skc_num,
// skc_family, skc_state and the flags byte.
const skcCopy = recOld - recDaddr

// errRecord says a ring buffer record is not one the program writes.
var errRecord = errors.New("malformed transition record")

// clock converts the kernel's CLOCK_MONOTONIC nanoseconds (what
// bpf_ktime_get_ns returns) to a time.Time: mono is a CLOCK_MONOTONIC
// reading taken at wall (from time.Now, which also carries Go's monotonic
// reading, CLOCK_MONOTONIC too, so converted times compare exactly with
// later time.Now calls).
type clock struct {
	mono int64
	wall time.Time
}

func (c clock) at(ns uint64) time.Time {
	return c.wall.Add(time.Duration(int64(ns) - c.mono))
}

// parseRecord decodes one record. v6 says whether its IPv6 address and
// cookie fields were filled (Open found skc_v6_daddr's offset on this
// kernel); without them an AF_INET6 socket's addresses are left invalid,
// its ports set, and every Cookie is 0.
func parseRecord(b []byte, clk clock, v6 bool) (Transition, error) {
	if len(b) != recSize {
		return Transition{}, fmt.Errorf("%w: %d bytes, want %d", errRecord, len(b), recSize)
	}
	ne := binary.NativeEndian
	t := Transition{
		Family: uint8(ne.Uint16(b[recFamily:])),
		Old:    b[recOld],
		New:    b[recNew],
		At:     clk.at(ne.Uint64(b[recKtime:])),
		Sock:   ne.Uint64(b[recSock:]),
	}
	lport := ne.Uint16(b[recNum:])
	rport := binary.BigEndian.Uint16(b[recDport:])
	var local, remote netip.Addr
	switch t.Family {
	case AFInet:
		local = netip.AddrFrom4([4]byte(b[recSaddr : recSaddr+4]))
		remote = netip.AddrFrom4([4]byte(b[recDaddr : recDaddr+4]))
	case AFInet6:
		if v6 {
			local = netip.AddrFrom16([16]byte(b[recV6Src : recV6Src+16]))
			remote = netip.AddrFrom16([16]byte(b[recV6Dst : recV6Dst+16]))
		}
	default:
		return Transition{}, fmt.Errorf("%w: address family %d", errRecord, t.Family)
	}
	if v6 {
		t.Cookie = ne.Uint64(b[recCookie:])
	}
	t.Local = netip.AddrPortFrom(local, lport)
	t.Remote = netip.AddrPortFrom(remote, rport)
	return t, nil
}
