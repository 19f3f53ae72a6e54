package netstat

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
)

// sortKey is a socket's place in compareSockets' order, packed into two
// integers where the addresses allow (IPv4, or none): the state and the
// local address and port in hi, the remote in lo; exact says the two hold
// the whole of both addresses, so that equal keys fall back to
// compareSockets only for the rest (namespace, inode) or for IPv6.
type sortKey struct {
	hi, lo uint64
	idx    int32
	exact  bool
}

// addrRank orders addresses as netip.Addr.Compare does first, by BitLen:
// the zero Addr, then IPv4, then IPv6.
func addrRank(a netip.Addr) uint64 {
	switch {
	case a.Is4():
		return 1
	case a.Is6():
		return 2
	}
	return 0
}

// endpointKey packs an address and port into 50 bits that order as
// netip.AddrPort.Compare does: its rank, then for IPv4 the address and the
// port; for IPv6 the first 32 bits of the address only (exact false).
func endpointKey(ap netip.AddrPort) (uint64, bool) {
	a := ap.Addr()
	k := addrRank(a) << 48
	switch {
	case a.Is4():
		b := a.As4()
		return k | uint64(binary.BigEndian.Uint32(b[:]))<<16 | uint64(ap.Port()), true
	case a.Is6():
		b := a.As16()
		return k | uint64(binary.BigEndian.Uint32(b[:4]))<<16, false
	}
	return k | uint64(ap.Port()), true
}

// sortSockets sorts socks as slices.SortFunc(socks, compareSockets) does,
// by sorting small keys and moving each socket once: pdqsort on the
// 128-byte sockets themselves moved each about log2(n) times and compared
// netip.AddrPorts field by field (60,000 sockets: 35 ms of every scan of a
// 1 Hz watch, 11% of its CPU).
func sortSockets(socks []Socket) {
	sortSocketsWith(socks, nil)
}

// sortSocketsWith is sortSockets with the keys in *buf, grown as needed
// and left there for the next sort (nil: a slice of its own): a repeated
// scan's keys are 24 bytes a socket, 1.4 MB a scan at 60,000 sockets.
func sortSocketsWith(socks []Socket, buf *[]sortKey) {
	if len(socks) < 2 {
		return
	}
	if buf == nil {
		buf = new([]sortKey)
	}
	if cap(*buf) > 4*len(socks)+1024 {
		*buf = nil // the sockets went away: so can the keys' memory
	}
	keys := slices.Grow((*buf)[:0], len(socks))[:len(socks)]
	*buf = keys
	for i := range socks {
		s := &socks[i]
		l, lok := endpointKey(s.Local)
		r, rok := endpointKey(s.Remote)
		keys[i] = sortKey{hi: uint64(s.State)<<56 | l, lo: r, idx: int32(i), exact: lok && rok}
	}
	slices.SortFunc(keys, func(a, b sortKey) int {
		if c := cmp.Compare(a.hi, b.hi); c != 0 {
			return c
		}
		if a.exact && b.exact {
			if c := cmp.Compare(a.lo, b.lo); c != 0 {
				return c
			}
		}
		return compareSockets(socks[a.idx], socks[b.idx])
	})
	permute(socks, keys)
}

// permute puts socks[keys[i].idx] at i, for every i, following each cycle
// of the permutation so that every socket moves once and only one is held
// aside at a time.
func permute(socks []Socket, keys []sortKey) {
	for start := range keys {
		if keys[start].idx < 0 {
			continue // placed by an earlier cycle
		}
		if int(keys[start].idx) == start {
			keys[start].idx = -1
			continue
		}
		held := socks[start]
		i := start
		for {
			src := int(keys[i].idx)
			keys[i].idx = -1
			if src == start {
				socks[i] = held
				break
			}
			socks[i] = socks[src]
			i = src
		}
	}
}
