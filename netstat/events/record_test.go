package events

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// rawRecord is a transition record's fields, which encode writes as the
// tracepoint program does.
type rawRecord struct {
	ktime, sock  uint64
	family       uint16
	daddr, saddr netip.Addr // 4 bytes for the v4 fields, 16 for the v6 ones
	dport, num   uint16
	old, new     uint8
	v6dst, v6src netip.Addr
	cookie       uint64
	state        uint8
}

func (r rawRecord) encode() []byte {
	b := make([]byte, recSize)
	ne := binary.NativeEndian
	ne.PutUint64(b[recKtime:], r.ktime)
	ne.PutUint64(b[recSock:], r.sock)
	if r.daddr.Is4() {
		a := r.daddr.As4()
		copy(b[recDaddr:], a[:])
	}
	if r.saddr.Is4() {
		a := r.saddr.As4()
		copy(b[recSaddr:], a[:])
	}
	ne.PutUint32(b[recDaddr+8:], 0xdeadbeef) // skc_hash: ignored
	binary.BigEndian.PutUint16(b[recDport:], r.dport)
	ne.PutUint16(b[recNum:], r.num)
	ne.PutUint16(b[recFamily:], r.family)
	b[recFamily+2] = r.state
	b[recOld], b[recNew] = r.old, r.new
	if r.v6dst.IsValid() {
		a := r.v6dst.As16()
		copy(b[recV6Dst:], a[:])
	}
	if r.v6src.IsValid() {
		a := r.v6src.As16()
		copy(b[recV6Src:], a[:])
	}
	ne.PutUint64(b[recCookie:], r.cookie)
	return b
}

// cmpTransition compares Transitions: times by instant, addresses by ==.
var cmpTransition = cmp.Options{
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
	cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }),
}

func TestParseRecord(t *testing.T) {
	wall := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	clk := clock{mono: 5_000_000_000, wall: wall}
	v4 := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	for _, tc := range []struct {
		name    string
		rec     []byte
		v6      bool
		want    Transition
		wantErr bool
	}{
		{
			name: "IPv4 ESTABLISHED -> CLOSE_WAIT",
			rec: rawRecord{ktime: 5_250_000_000, sock: 0xffff888012345678, family: AFInet,
				daddr: v4("10.0.0.9"), saddr: v4("10.0.0.1"), dport: 9092, num: 41000,
				old: tcpEstablished, new: tcpCloseWait, state: tcpEstablished}.encode(),
			want: Transition{Family: AFInet, Local: netip.MustParseAddrPort("10.0.0.1:41000"),
				Remote: netip.MustParseAddrPort("10.0.0.9:9092"), Old: tcpEstablished, New: tcpCloseWait,
				At: wall.Add(250 * time.Millisecond), Sock: 0xffff888012345678},
		},
		{
			name: "IPv4 CLOSE_WAIT -> CLOSE, port released, cookie",
			rec: rawRecord{ktime: 4_000_000_000, sock: 7, family: AFInet,
				daddr: v4("127.0.0.1"), saddr: v4("127.0.0.1"), dport: 9092, num: 0,
				old: tcpCloseWait, new: tcpClose, cookie: 4242}.encode(),
			v6: true,
			want: Transition{Family: AFInet, Local: netip.MustParseAddrPort("127.0.0.1:0"),
				Remote: netip.MustParseAddrPort("127.0.0.1:9092"), Old: tcpCloseWait, New: tcpClose,
				At: wall.Add(-time.Second), Sock: 7, Cookie: 4242},
		},
		{
			name: "IPv6 with the offsets known",
			rec: rawRecord{ktime: 5_000_000_000, sock: 8, family: AFInet6,
				daddr: v4("127.0.0.6"), saddr: v4("127.0.0.6"), dport: 9093, num: 50000,
				v6dst: netip.MustParseAddr("2001:db8::9"), v6src: netip.MustParseAddr("2001:db8::1"),
				old: tcpEstablished, new: tcpCloseWait, cookie: 1}.encode(),
			v6: true,
			want: Transition{Family: AFInet6, Local: netip.MustParseAddrPort("[2001:db8::1]:50000"),
				Remote: netip.MustParseAddrPort("[2001:db8::9]:9093"), Old: tcpEstablished, New: tcpCloseWait,
				At: wall, Sock: 8, Cookie: 1},
		},
		{
			name: "IPv6 v4-mapped",
			rec: rawRecord{ktime: 5_000_000_000, sock: 9, family: AFInet6,
				daddr: v4("10.0.0.9"), saddr: v4("10.0.0.1"), dport: 9092, num: 50001,
				v6dst: netip.MustParseAddr("::ffff:10.0.0.9"), v6src: netip.MustParseAddr("::ffff:10.0.0.1"),
				old: tcpEstablished, new: tcpCloseWait}.encode(),
			v6: true,
			want: Transition{Family: AFInet6, Local: netip.MustParseAddrPort("[::ffff:10.0.0.1]:50001"),
				Remote: netip.MustParseAddrPort("[::ffff:10.0.0.9]:9092"), Old: tcpEstablished, New: tcpCloseWait,
				At: wall, Sock: 9},
		},
		{
			name: "IPv6 without the offsets: ports only, no cookie",
			rec: rawRecord{ktime: 5_000_000_000, sock: 10, family: AFInet6, dport: 9093, num: 50000,
				v6dst: netip.MustParseAddr("2001:db8::9"), v6src: netip.MustParseAddr("2001:db8::1"),
				old: tcpEstablished, new: tcpCloseWait, cookie: 3}.encode(),
			want: Transition{Family: AFInet6, Local: netip.AddrPortFrom(netip.Addr{}, 50000),
				Remote: netip.AddrPortFrom(netip.Addr{}, 9093), Old: tcpEstablished, New: tcpCloseWait,
				At: wall, Sock: 10},
		},
		{name: "short", rec: make([]byte, recSize-8), wantErr: true},
		{name: "long", rec: make([]byte, recSize+8), wantErr: true},
		{name: "not an inet family", rec: rawRecord{family: 1}.encode(), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRecord(tc.rec, clk, tc.v6)
			if tc.wantErr {
				if !errors.Is(err, errRecord) {
					t.Fatalf("parseRecord: %+v, %v; want an errRecord", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpTransition); diff != "" {
				t.Errorf("parseRecord (-want +got):\n%s", diff)
			}
		})
	}
}

// TestClockKeepsMonotonic checks that converted times compare with
// time.Now by Go's monotonic clock: a wall clock stepped after Open must
// not reorder them.
func TestClockKeepsMonotonic(t *testing.T) {
	now := time.Now()
	clk := clock{mono: 1_000_000_000, wall: now}
	at := clk.at(1_000_000_500)
	if d := at.Sub(now); d != 500 {
		t.Errorf("at - wall = %v, want 500ns", d)
	}
	if at == at.Round(0) { // Round(0) strips the monotonic reading
		t.Errorf("at %v carries no monotonic reading", at)
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add(rawRecord{family: AFInet, old: tcpEstablished, new: tcpCloseWait}.encode(), true)
	f.Add(rawRecord{family: AFInet6, old: tcpCloseWait, new: tcpClose}.encode(), false)
	f.Add([]byte{1, 2, 3}, true)
	f.Fuzz(func(t *testing.T, b []byte, v6 bool) {
		tr, err := parseRecord(b, clock{wall: time.Unix(0, 0)}, v6)
		if err != nil {
			return
		}
		if tr.Family != AFInet && tr.Family != AFInet6 {
			t.Errorf("family %d accepted", tr.Family)
		}
		if tr.Family == AFInet && (!tr.Local.Addr().Is4() || !tr.Remote.Addr().Is4()) {
			t.Errorf("AF_INET with addresses %v, %v", tr.Local, tr.Remote)
		}
	})
}
