package netstat

import (
	"net/netip"
	"slices"
	"testing"
	"time"
	"unsafe"
)

func TestSocketCollector(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity int
		n        int
	}{
		{"empty", 0, 0},
		{"fits the buffer", 10, 10},
		{"no buffer, one partial chunk", 0, 7},
		{"no buffer, several chunks", 0, 3*collectorChunk + 5},
		{"spills past the buffer", 100, 2*collectorChunk + 1},
		// A repeated scan's dump, one socket more than the last.
		{"outgrows the buffer by one", 6000, 6001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &socketCollector{s: make([]Socket, 0, tc.capacity)}
			var want []Socket
			for i := range tc.n {
				s := Socket{Inode: uint64(i + 1), PID: i}
				c.add(s)
				want = append(want, s)
			}
			got := c.collect()
			if !slices.Equal(got, want) {
				t.Fatalf("collected %d sockets, want %d in order", len(got), len(want))
			}
			// A 64th more, and the rounding of a large allocation to
			// pages (8 KiB: 64 sockets); not append's quarter.
			if tc.n > tc.capacity && cap(got) > tc.n+tc.n/64+64 {
				t.Errorf("cap %d for %d sockets: want about one exact allocation", cap(got), tc.n)
			}
			// A collector reused with the result as its buffer does not spill.
			c2 := &socketCollector{s: got[:0]}
			for _, s := range want {
				c2.add(s)
			}
			if c2.n != 0 || !slices.Equal(c2.collect(), want) {
				t.Errorf("reused buffer spilled %d sockets", c2.n)
			}
			// collectRoom leaves room for more after them, in the same
			// memory when it has it.
			for _, extra := range []int{0, 3, collectorChunk} {
				c3 := &socketCollector{s: make([]Socket, 0, tc.capacity)}
				for _, s := range want {
					c3.add(s)
				}
				spilled := c3.n > 0
				got := c3.collectRoom(extra)
				if !slices.Equal(got, want) || cap(got)-len(got) < extra {
					t.Errorf("collectRoom(%d): %d sockets with room for %d, want %d with room for %d", extra, len(got), cap(got)-len(got), len(want), extra)
				}
				if inPlace := cap(got) == tc.capacity; tc.capacity > 0 && inPlace == (spilled || tc.n+extra > tc.capacity) {
					t.Errorf("collectRoom(%d): in the buffer %v with %d spilled and %d room needed", extra, inPlace, c3.n, tc.n+extra)
				}
			}
		})
	}
}

// TestSocketCollectorKeepsEveryField spills sockets of every address shape
// through the packed chunks and checks they come back equal.
func TestSocketCollectorKeepsEveryField(t *testing.T) {
	if got := unsafe.Sizeof(packedSocket{}); got != 96 {
		t.Errorf("packedSocket is %d bytes; its comment says 96", got)
	}
	want := []Socket{
		{Family: IPv4, State: CloseWait, Local: netip.MustParseAddrPort("127.0.0.1:41000"),
			Remote: netip.MustParseAddrPort("127.0.0.2:9092"), RecvQ: 1, SendQ: 7, Inode: 1 << 40, UID: 1000,
			Age: 90 * time.Second, HasAge: true, NetNS: 4026531840, PID: 4194304, FD: 1 << 20},
		{Family: IPv6, State: Established, Local: netip.MustParseAddrPort("[::1]:5"),
			Remote: netip.MustParseAddrPort("[2001:db8::7]:9093"), Inode: 9, FD: -1},
		{Family: IPv6, State: Listen, Local: netip.MustParseAddrPort("[::ffff:10.0.0.1]:9094"),
			Remote: netip.AddrPortFrom(netip.IPv6Unspecified(), 0), FD: -1},
		{Family: IPv4, State: Listen, Local: netip.AddrPortFrom(netip.IPv4Unspecified(), 22),
			Remote: netip.AddrPortFrom(netip.IPv4Unspecified(), 0)},
		{State: TimeWait}, // zero addresses
	}
	c := &socketCollector{}
	for _, s := range want {
		c.add(s)
	}
	if c.n != len(want) {
		t.Fatalf("%d of %d sockets spilled: the test does not cover the packed chunks", c.n, len(want))
	}
	got := c.collect()
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("socket %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}
