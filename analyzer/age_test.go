package analyzer

import (
	"net/netip"
	"testing"
	"time"

	"github.com/kdiag/kdiag/netstat"
)

// TestCloseWaitAgeSurvivesKeepalive: a keepalive ACK received in CLOSE_WAIT
// resets tcp_info's age; the socket's FIN time must stay the earliest one a
// sample implied, not move to the reset.
func TestCloseWaitAgeSurvivesKeepalive(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	local := netip.MustParseAddrPort("127.0.0.1:40000")
	remote := netip.MustParseAddrPort("127.0.0.1:9092")
	snap := func(at time.Time, age time.Duration) *netstat.Snapshot {
		return &netstat.Snapshot{
			Time: at,
			Sockets: []netstat.Socket{{Family: netstat.IPv4, State: netstat.CloseWait, Local: local, Remote: remote,
				Inode: 77, PID: 9, FD: 3, RecvQ: 1, Age: age, HasAge: true}},
			Processes: []netstat.Process{{PID: 9, Name: "app"}},
		}
	}
	tr := NewTracker(Options{})
	tr.Add(snap(t0, 5*time.Second))                     // FIN at t0-5s
	tr.Add(snap(t0.Add(10*time.Second), 2*time.Second)) // a keepalive ACK 2 s before
	tr.Add(snap(t0.Add(11*time.Second), 3*time.Second))
	a := tr.Analysis()
	if len(a.Processes) != 1 || len(a.Processes[0].CloseWaitSockets) != 1 {
		t.Fatalf("want one process with one CLOSE_WAIT socket, got %+v", a.Processes)
	}
	c := a.Processes[0].CloseWaitSockets[0]
	if want := t0.Add(-5 * time.Second); !c.Since().Equal(want) {
		t.Errorf("Since() = %v, want %v (the FIN time the first sample implied)", c.Since(), want)
	}
	if got, want := c.AgeAt(t0.Add(11*time.Second)), 16*time.Second; got != want {
		t.Errorf("age at last sample = %v, want %v", got, want)
	}
}
