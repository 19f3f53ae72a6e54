package netstat

import "net/netip"

// PackedAddrPort is a netip.AddrPort as plain bytes: the address's 16
// bytes (an IPv4 address in the first 4), its kind and the port, 20 bytes
// where an AddrPort takes 32. It holds no pointer (an AddrPort holds its
// zone's), so it hashes cheaply as a map key and costs the garbage
// collector nothing to keep: the analyzer keeps its CLOSE_WAIT sockets'
// addresses so, and the metrics count by it. A zone is dropped: the
// kernel's sockets have none.
type PackedAddrPort struct {
	addr [16]byte
	port uint16
	kind uint8 // 0: no address, 4 or 6
}

// PackAddrPort packs ap.
func PackAddrPort(ap netip.AddrPort) PackedAddrPort {
	p := PackedAddrPort{port: ap.Port()}
	p.addr, p.kind = addrBytes(ap.Addr())
	return p
}

// AddrPort returns the address and port packed.
func (p PackedAddrPort) AddrPort() netip.AddrPort {
	return netip.AddrPortFrom(addrFromBytes(&p.addr, p.kind), p.port)
}

// IsValid reports whether an address was packed (not the zero AddrPort's).
func (p PackedAddrPort) IsValid() bool { return p.kind != 0 }

// addrBytes returns a's bytes (an IPv4 address in the first 4) and its
// kind: 4, 6, or 0 for the zero Addr.
func addrBytes(a netip.Addr) (b [16]byte, kind uint8) {
	switch {
	case a.Is4():
		v := a.As4()
		copy(b[:], v[:])
		return b, 4
	case a.Is6():
		return a.As16(), 6
	}
	return b, 0
}

// addrFromBytes is addrBytes' inverse.
func addrFromBytes(b *[16]byte, kind uint8) netip.Addr {
	switch kind {
	case 4:
		return netip.AddrFrom4([4]byte(b[:4]))
	case 6:
		return netip.AddrFrom16(*b)
	}
	return netip.Addr{}
}
