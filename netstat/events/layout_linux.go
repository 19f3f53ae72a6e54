package events

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// probeBytes is how much of a struct sock findV6Offset looks at: all of
// struct sock_common up to the IPv6 addresses and past them on every
// layout this can meet (on x86-64 with CONFIG_NET_NS the addresses sit at
// 56 and 72; without it at 48 and 64; on 32-bit kernels earlier still).
const probeBytes = 128

// findV6Offset finds the offset of skc_v6_daddr (skc_v6_rcv_saddr follows
// it) in struct sock_common on the running kernel. The fields before it
// are at fixed offsets (skcDport), but then come a pointer-sized
// skc_bind_node, skc_prot and, with CONFIG_NET_NS, skc_net
// (include/net/sock.h), so the offset depends on the word size and the
// configuration; without BTF (no /sys/kernel/btf/vmlinux here) a program
// cannot look it up. So it is measured: a probe program copies the first
// probeBytes of the socket that a connection of known addresses makes,
// and the offset is where those addresses are.
//
// The connection is an AF_INET6 socket to an AF_INET6 listener, both on
// ::ffff:127.0.0.1 (v4-mapped, so that it works with IPv6 disabled on
// the interfaces): the kernel keeps v4-mapped addresses in skc_v6_daddr
// and skc_v6_rcv_saddr as it does native ones, and the same address
// twice, ffff and all, at the one offset where it is found makes a
// match by chance implausible. The probe also checks the fixed fields
// (addresses, ports, family) against what the sockets say, so a kernel
// whose layout differs from the one the program assumes is caught here
// (errLayout: Open then records no transitions),
// and that skc_cookie, which the records carry too, follows the
// addresses as it does on every layout since Linux 4.x.
// It costs a program load and one loopback connection, made and closed
// within Open.
func findV6Offset() (int16, error) {
	mapped := netip.AddrFrom16(netip.MustParseAddr("::ffff:127.0.0.1").As16())
	ln, lport, err := v6Socket(mapped)
	if err != nil {
		return 0, fmt.Errorf("IPv6 addresses unknown: an AF_INET6 socket: %w", err)
	}
	defer unix.Close(ln)
	if err := unix.Listen(ln, 1); err != nil {
		return 0, fmt.Errorf("IPv6 addresses unknown: listen: %w", err)
	}

	m, err := newMap(&ebpf.MapSpec{
		Name:       "kdiag_tcp_probe",
		Type:       ebpf.Array,
		KeySize:    4,
		ValueSize:  probeBytes,
		MaxEntries: 1,
	})
	if err != nil {
		return 0, fmt.Errorf("IPv6 addresses unknown: probe map: %w", err)
	}
	defer m.Close()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "kdiag_tcp_probe",
		Type:         ebpf.RawTracepoint,
		License:      "Dual MIT/GPL",
		Instructions: probeProgram(m.FD(), lport),
	})
	if err != nil {
		return 0, fmt.Errorf("IPv6 addresses unknown: load the probe: %w", err)
	}
	defer prog.Close()
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: tracepoint, Program: prog})
	if err != nil {
		return 0, fmt.Errorf("IPv6 addresses unknown: attach the probe: %w", err)
	}
	cl, cport, err := v6Socket(mapped)
	var cookie uint64
	if err == nil {
		// Asking for the cookie makes the kernel give the socket one,
		// which the probe then sees.
		cookie, err = unix.GetsockoptUint64(cl, unix.SOL_SOCKET, unix.SO_COOKIE)
	}
	if err == nil {
		// A blocking connect returns once the client is ESTABLISHED,
		// when every field is set; the bound on it only keeps a broken
		// loopback from hanging Open.
		tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
		err = unix.SetsockoptTimeval(cl, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
		if err == nil {
			err = unix.Connect(cl, &unix.SockaddrInet6{Port: int(lport), Addr: mapped.As16()})
		}
		// Reset rather than close: neither end then passes through
		// CLOSE_WAIT or lingers in FIN_WAIT_2, for this or any program.
		unix.SetsockoptLinger(cl, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1})
		defer unix.Close(cl)
	}
	l.Close()
	if err != nil {
		return 0, fmt.Errorf("IPv6 addresses unknown: the probe's connection: %w", err)
	}
	var b [probeBytes]byte
	if err := m.Lookup(uint32(0), &b); err != nil {
		return 0, fmt.Errorf("IPv6 addresses unknown: read the probe: %w", err)
	}
	return parseProbe(b[:], mapped, lport, cport, cookie)
}

// errLayout says a probe found struct sock_common's fixed fields elsewhere
// than the program reads them: its records would be wrong, so Open
// records none.
var errLayout = errors.New("struct sock_common is not laid out as the program reads it")

// parseProbe finds skc_v6_daddr in b, the first bytes of the struct sock
// of a client at [addr]:cport connected to [addr]:lport, whose cookie is
// cookie, after checking the fixed fields; skc_cookie must follow the
// addresses.
func parseProbe(b []byte, addr netip.Addr, lport, cport uint16, cookie uint64) (int16, error) {
	v4 := addr.Unmap().As4()
	v6 := addr.As16()
	switch {
	case len(b) < recOld-recDaddr:
		return 0, fmt.Errorf("IPv6 addresses unknown: the probe read %d bytes", len(b))
	case binary.NativeEndian.Uint16(b[recFamily-recDaddr:]) != AFInet6:
		return 0, errors.New("IPv6 addresses unknown: the probe saw no AF_INET6 socket (nothing ran it, or skc_family is not at 16)")
	case !bytes.Equal(b[0:4], v4[:]) || !bytes.Equal(b[4:8], v4[:]),
		binary.BigEndian.Uint16(b[recDport-recDaddr:]) != lport,
		binary.NativeEndian.Uint16(b[recNum-recDaddr:]) != cport:
		return 0, fmt.Errorf("%w: its first fields are not at 0-19 (% x)", errLayout, b[:recOld-recDaddr])
	}
	want := append(v6[:], v6[:]...) // skc_v6_daddr, skc_v6_rcv_saddr
	found := -1
	for off := recOld - recDaddr; off+len(want) <= len(b); off += 4 {
		if bytes.Equal(b[off:off+len(want)], want) {
			if found >= 0 {
				return 0, fmt.Errorf("IPv6 addresses unknown: found at both %d and %d", found, off)
			}
			found = off
		}
	}
	if found < 0 {
		return 0, fmt.Errorf("IPv6 addresses unknown: not in the first %d bytes of struct sock", len(b))
	}
	c := found + len(want)
	if c+8 > len(b) || binary.NativeEndian.Uint64(b[c:]) != cookie {
		return 0, fmt.Errorf("IPv6 addresses unknown: skc_cookie %d does not follow them at %d", cookie, c)
	}
	return int16(found), nil
}

// v6Socket returns an AF_INET6 TCP socket bound to [addr]:0, dual-stack
// (IPV6_V6ONLY off, so that a v4-mapped address binds), and its port.
func v6Socket(addr netip.Addr) (int, uint16, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, 0, err
	}
	err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
	if err == nil {
		err = unix.Bind(fd, &unix.SockaddrInet6{Addr: addr.As16()})
	}
	var sa unix.Sockaddr
	if err == nil {
		sa, err = unix.Getsockname(fd)
	}
	if err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	return fd, uint16(sa.(*unix.SockaddrInet6).Port), nil
}

// probeProgram copies the first probeBytes of every socket whose remote
// port is port into the map's one value, on each of its state changes:
// the last one, the client's SYN_SENT -> ESTABLISHED, is what stays.
func probeProgram(mapFD int, port uint16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R8, asm.R1, 0, asm.DWord), // sk
		asm.Mov.Imm(asm.R2, 0),
		asm.StoreMem(asm.RFP, -8, asm.R2, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, -8),
		asm.Mov.Imm(asm.R2, 2),
		asm.Mov.Reg(asm.R3, asm.R8),
		asm.Add.Imm(asm.R3, skcDport),
		asm.FnProbeReadKernel.Call(),
		asm.JNE.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R2, asm.RFP, -8, asm.Half),
		// skc_dport is in network order; the load reads it in the host's.
		asm.JNE.Imm(asm.R2, int32(binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, port))), "out"),
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Reg(asm.R1, asm.R0),
		asm.Mov.Imm(asm.R2, probeBytes),
		asm.Mov.Reg(asm.R3, asm.R8),
		asm.FnProbeReadKernel.Call(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}
}
