//go:build linux

package events

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
)

// probeSock builds the first probeBytes of a struct sock_common as the
// probe program copies them: the fixed fields of a client at
// [addr]:cport connected to [addr]:lport, and the IPv6 addresses (then the
// cookie) at each offset in v6At. Every other byte is a pointer-like
// filler, as skc_bind_node, skc_prot and skc_net are.
func probeSock(addr netip.Addr, lport, cport uint16, cookie uint64, v6At ...int) []byte {
	b := make([]byte, probeBytes)
	for i := 20; i+8 <= len(b); i += 8 {
		binary.NativeEndian.PutUint64(b[i:], 0xffff8880_12340000+uint64(i))
	}
	v4 := addr.Unmap().As4()
	copy(b[0:], v4[:])
	copy(b[4:], v4[:])
	binary.BigEndian.PutUint16(b[12:], lport)
	binary.NativeEndian.PutUint16(b[14:], cport)
	binary.NativeEndian.PutUint16(b[16:], AFInet6)
	b[18] = tcpEstablished
	v6 := addr.As16()
	for _, at := range v6At {
		copy(b[at:], v6[:])
		copy(b[at+16:], v6[:])
		binary.NativeEndian.PutUint64(b[at+32:], cookie)
	}
	return b
}

func TestParseProbe(t *testing.T) {
	addr := netip.MustParseAddr("::ffff:127.0.0.1")
	const lport, cport, cookie = 40000, 50000, 12345
	for _, tc := range []struct {
		name    string
		b       []byte
		want    int16
		wantErr string
	}{
		{name: "x86-64 with CONFIG_NET_NS", b: probeSock(addr, lport, cport, cookie, 56), want: 56},
		{name: "x86-64 without CONFIG_NET_NS", b: probeSock(addr, lport, cport, cookie, 48), want: 48},
		{name: "32-bit", b: probeSock(addr, lport, cport, cookie, 40), want: 40},
		{name: "nothing ran the probe", b: make([]byte, probeBytes), wantErr: "no AF_INET6 socket"},
		{name: "another socket", b: probeSock(addr, lport, cport+1, cookie, 56), wantErr: "not laid out"},
		{name: "remote port elsewhere", b: probeSock(addr, lport+1, cport, cookie, 56), wantErr: "not laid out"},
		{name: "no addresses", b: probeSock(addr, lport, cport, cookie), wantErr: "not in the first"},
		{name: "twice", b: probeSock(addr, lport, cport, cookie, 20, 60), wantErr: "both"},
		{name: "cookie elsewhere", b: probeSock(addr, lport, cport, cookie+1, 56), wantErr: "skc_cookie"},
		{name: "cookie past the end", b: probeSock(addr, lport, cport, cookie, 56)[:92], wantErr: "skc_cookie"},
		{name: "short", b: make([]byte, 10), wantErr: "read 10 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProbe(tc.b, addr, lport, cport, cookie)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseProbe = %d, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseProbe = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
