package netstat

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/kdiag/kdiag/internal/sockettest"
)

// TestTransitionsGiveExactAges: with the kernel's record of when each
// socket entered CLOSE_WAIT, a scan gives that age exactly, whatever
// tcp_info's bounds say; a record the scan cannot tie to one socket (two
// sockets of one 4-tuple) is not used.
func TestTransitionsGiveExactAges(t *testing.T) {
	if _, err := DumpNetlink(States(Listen)); err != nil {
		t.Skipf("netlink unavailable: %v", err)
	}
	cw := sockettest.CloseWait(t, "tcp4", 2, sockettest.KeepAlive(time.Second))
	fin := time.Now().Add(-42 * time.Second) // what the fake kernel says
	var pending []Transition
	for i, c := range cw {
		pending = append(pending, Transition{Local: c.Local, Remote: c.Remote, New: CloseWait, At: fin, Sock: uint64(i + 1)})
	}
	// A record for an address the scan does not have, twice: ambiguous.
	other := netip.MustParseAddrPort("127.0.0.1:1")
	pending = append(pending, Transition{Local: other, Remote: other, New: CloseWait, At: fin, Sock: 9},
		Transition{Local: other, Remote: other, New: CloseWait, At: fin, Sock: 10})
	s := NewScanner("/proc")
	s.Transitions = func() ([]Transition, error) {
		out := pending
		pending = nil
		return out, nil
	}
	q := Query{States: States(CloseWait), PIDs: []int{os.Getpid()}, RemotePorts: []uint16{cw[0].Remote.Port()}}
	for range 2 { // the second scan uses what the first drained
		snap, err := s.Scan(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Sockets) != 2 {
			t.Fatalf("%d sockets, want 2", len(snap.Sockets))
		}
		for _, x := range snap.Sockets {
			if want := snap.Time.Sub(fin); !x.AgeExact() || x.Age != want {
				t.Errorf("%s: age %v (exact %v), want exactly %v from the record", x.Local, x.Age, x.AgeExact(), want)
			}
		}
	}
	if at := s.trans.fin[tupleKey{other, other}]; !at.IsZero() {
		t.Errorf("an ambiguous 4-tuple kept a FIN time: %v", at)
	}
}
