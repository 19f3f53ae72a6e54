package netstat

import (
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
)

// closedConn makes a connection to ln and closes it from this end first:
// this end goes to TIME_WAIT, held by no process, once the peer closes.
// It returns that end's addresses.
func closedConn(t *testing.T, ln net.Listener) (local, remote netip.AddrPort) {
	t.Helper()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	local = netip.MustParseAddrPort(c.LocalAddr().String())
	remote = netip.MustParseAddrPort(ln.Addr().String())
	c.Close()
	srv.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := srv.Read(make([]byte, 1)); err == nil {
		t.Fatal("the server read data, want EOF")
	}
	srv.Close()
	return local, remote
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// TestScanKeepOthers: a connection this process closed first leaves its
// end in TIME_WAIT, held by no process. A scan restricted to this process
// leaves it out; with KeepOthers it is kept, with PID 0, beside this
// process's own sockets, when this process still has a connection toward
// the same address (a broker it reconnects to), and left out when it has
// none (its ports are not the ones this process spends).
func TestScanKeepOthers(t *testing.T) {
	broker, other := listen(t), listen(t)
	live, err := net.Dial("tcp4", broker.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	peer, err := broker.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	local, remote := closedConn(t, broker)
	otherLocal, otherRemote := closedConn(t, other)
	find := func(snap *Snapshot, local, remote netip.AddrPort) *Socket {
		for i := range snap.Sockets {
			x := &snap.Sockets[i]
			if x.Local == local && x.Remote == remote {
				return x
			}
		}
		return nil
	}
	for _, src := range sources(t) {
		t.Run(src, func(t *testing.T) {
			// Both closed ends are in TIME_WAIT (the whole host's scan
			// shows them) before the restricted scans look.
			deadline := time.Now().Add(10 * time.Second)
			for {
				all := scan(t, src, "", Query{States: States(TimeWait)})
				if find(all, local, remote) != nil && find(all, otherLocal, otherRemote) != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the closed connections are not both in TIME_WAIT after 10s")
				}
				time.Sleep(20 * time.Millisecond)
			}
			q := Query{States: AllStates, PIDs: []int{os.Getpid()}, KeepOthers: true}
			snap := scan(t, src, "", q)
			if x := find(snap, local, remote); x == nil || x.State != TimeWait || x.PID != 0 {
				t.Fatalf("KeepOthers: the closed connection %s -> %s is %+v, want TIME_WAIT with PID 0", local, remote, x)
			}
			if y := find(snap, otherLocal, otherRemote); y != nil {
				t.Errorf("KeepOthers: %+v kept, toward an address this process has no socket to", y)
			}
			q.KeepOthers = false
			if x := find(scan(t, src, "", q), local, remote); x != nil {
				t.Errorf("without KeepOthers: %+v kept, want it left out", x)
			}
		})
	}
}
