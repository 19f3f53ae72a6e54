package netstat

import (
	"net/netip"
	"testing"
)

// TestPackedAddrPortRoundTrip: every address shape a socket has comes back
// from its packed form as it went in, and a packed address is a map key
// that tells them apart.
func TestPackedAddrPortRoundTrip(t *testing.T) {
	seen := map[PackedAddrPort]string{}
	for _, s := range []string{"127.0.0.1:9092", "0.0.0.0:0", "[::1]:9093", "[::ffff:10.0.0.1]:9092", "10.0.0.1:9092", "[2001:db8::7]:65535", "[::]:1"} {
		ap := netip.MustParseAddrPort(s)
		p := PackAddrPort(ap)
		if got := p.AddrPort(); got != ap || !p.IsValid() {
			t.Errorf("%s came back %s (valid %v)", ap, got, p.IsValid())
		}
		if other, dup := seen[p]; dup {
			t.Errorf("%s packs as %s does", s, other)
		}
		seen[p] = s
	}
	if p := PackAddrPort(netip.AddrPort{}); p.IsValid() || p.AddrPort().IsValid() {
		t.Errorf("the zero AddrPort came back %s", p.AddrPort())
	}
}
