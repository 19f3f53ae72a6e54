package analyzer

import (
	"net/netip"
	"testing"
	"unsafe"
)

// TestEndpointRoundTrip: every address shape a socket has comes back from
// the tracker's packed form as it went in, and the tracker's record of a
// CLOSE_WAIT socket fits the 128-byte size class.
func TestEndpointRoundTrip(t *testing.T) {
	for _, s := range []string{"127.0.0.1:9092", "0.0.0.0:0", "[::1]:9093", "[::ffff:10.0.0.1]:9092", "[2001:db8::7]:65535", "[::]:1"} {
		ap := netip.MustParseAddrPort(s)
		if got := packEndpoint(ap).addrPort(); got != ap {
			t.Errorf("%s came back %s", ap, got)
		}
	}
	if got := packEndpoint(netip.AddrPort{}).addrPort(); got.IsValid() {
		t.Errorf("the zero AddrPort came back %s", got)
	}
	if n := unsafe.Sizeof(cwSocket{}); n > 128 {
		t.Errorf("cwSocket takes %d bytes, want at most 128 (a size class)", n)
	}
}
