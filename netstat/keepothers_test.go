package netstat

import (
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
)

// TestScanKeepOthers: a connection this process closed first leaves its
// end in TIME_WAIT, held by no process. A scan restricted to this process
// leaves it out; with KeepOthers it is kept, with PID 0, beside this
// process's own sockets.
func TestScanKeepOthers(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	local := netip.MustParseAddrPort(c.LocalAddr().String())
	remote := netip.MustParseAddrPort(ln.Addr().String())
	c.Close() // the active close: this end goes to TIME_WAIT once the peer closes
	srv.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := srv.Read(make([]byte, 1)); err == nil {
		t.Fatal("the server read data, want EOF")
	}
	srv.Close()
	find := func(snap *Snapshot) *Socket {
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
			q := Query{States: AllStates, PIDs: []int{os.Getpid()}}
			deadline := time.Now().Add(10 * time.Second)
			var x *Socket
			for {
				q.KeepOthers = true
				if x = find(scan(t, src, "", q)); x != nil && x.State == TimeWait || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if x == nil || x.State != TimeWait || x.PID != 0 {
				t.Fatalf("KeepOthers: the closed connection %s -> %s is %+v, want TIME_WAIT with PID 0", local, remote, x)
			}
			q.KeepOthers = false
			if x := find(scan(t, src, "", q)); x != nil {
				t.Errorf("without KeepOthers: %+v kept, want it left out", x)
			}
		})
	}
}
