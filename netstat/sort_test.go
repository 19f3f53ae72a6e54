package netstat

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// randomSockets makes n sockets whose keys collide often: few states,
// addresses and ports, IPv4, IPv6 (zoned too), IPv4-mapped and missing
// addresses, two namespaces; inodes unique so that the order is total.
func randomSockets(r *rand.Rand, n int) []Socket {
	addrs := []netip.Addr{
		{},
		netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("10.0.0.1"),
		netip.MustParseAddr("255.255.255.255"), netip.MustParseAddr("0.0.0.0"),
		netip.MustParseAddr("::1"), netip.MustParseAddr("::"), netip.MustParseAddr("fe80::1%eth0"),
		netip.MustParseAddr("fe80::1%eth1"), netip.MustParseAddr("::ffff:127.0.0.1"),
		netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), netip.MustParseAddr("2001:db8:0:0:1::1"),
	}
	ports := []uint16{0, 1, 9092, 9093, 65535, 40000}
	states := []State{Established, CloseWait, Listen, Close, TimeWait}
	ap := func() netip.AddrPort {
		return netip.AddrPortFrom(addrs[r.IntN(len(addrs))], ports[r.IntN(len(ports))])
	}
	out := make([]Socket, n)
	for i := range out {
		out[i] = Socket{State: states[r.IntN(len(states))], Local: ap(), Remote: ap(),
			NetNS: uint64(1 + r.IntN(2)), Inode: uint64(i + 1), PID: i}
	}
	return out
}

// TestSortSocketsOrder: sortSockets puts sockets in compareSockets' order,
// the same as slices.SortFunc does.
func TestSortSocketsOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 17, 1000, 5000} {
		socks := randomSockets(r, n)
		want := slices.Clone(socks)
		slices.SortFunc(want, compareSockets)
		sortSockets(socks)
		if d := cmp.Diff(want, socks, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); d != "" {
			t.Fatalf("n=%d (-want +got):\n%s", n, d)
		}
	}
}

func BenchmarkSortSockets(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	base := randomSockets(r, 60000)
	for i := range base {
		// Mostly IPv4, as the benchmarks' sockets are.
		base[i].Local = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(r.IntN(200))}), uint16(r.IntN(60000)))
		base[i].Remote = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(r.IntN(200))}), 9092)
	}
	socks := make([]Socket, len(base))
	for _, f := range []struct {
		name string
		sort func([]Socket)
	}{
		{"SortFunc", func(s []Socket) { slices.SortFunc(s, compareSockets) }},
		{"sortSockets", sortSockets},
	} {
		b.Run(f.name, func(b *testing.B) {
			for b.Loop() {
				copy(socks, base)
				f.sort(socks)
			}
		})
	}
}
