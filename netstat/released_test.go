//go:build linux

package netstat

import (
	"context"
	"os"
	"testing"

	"github.com/kdiag/kdiag/internal/sockettest"
)

// TestDropReleased: a socket in CLOSE whose fd this process still holds (a
// close in progress, as Java NIO leaves one) is listed by the scan as
// CLOSE; DropReleased keeps it while the fd holds it and removes exactly it
// once the fd is closed, leaving every other socket.
func TestDropReleased(t *testing.T) {
	b := sockettest.NewBroker(t)
	cs := b.Connect("127.0.0.1", 2)
	b.ServerClose(cs[1]) // a CLOSE_WAIT that stays
	b.ClientShutdown(cs[0])
	pid := os.Getpid()
	sc := NewScanner("/proc")
	defer sc.Close()
	snap, err := sc.Scan(context.Background(), Query{States: States(CloseWait, Close), PIDs: []int{pid}})
	if err != nil {
		t.Fatal(err)
	}
	held := snap.HeldClose()
	if len(held) != 1 || held[0].Inode != cs[0].Client.Inode || held[0].FD != cs[0].Client.FD {
		t.Fatalf("held CLOSE sockets %v, want the shut-down client %s", held, cs[0].Client)
	}
	holds := func(pid, fd int, inode uint64) bool { return FDHolds("/proc", pid, fd, inode) }
	if gone := snap.DropReleased(holds); len(gone) != 0 {
		t.Errorf("DropReleased removed %v while the fd still holds the socket", gone)
	}
	if err := cs[0].Client.Close(); err != nil {
		t.Fatal(err)
	}
	n := len(snap.Sockets)
	if gone := snap.DropReleased(holds); gone[pid] != 1 || len(gone) != 1 {
		t.Errorf("DropReleased after the close removed %v, want {%d: 1}", gone, pid)
	}
	if len(snap.Sockets) != n-1 || len(snap.HeldClose()) != 0 {
		t.Errorf("after DropReleased: %d sockets (want %d), held CLOSE %v", len(snap.Sockets), n-1, snap.HeldClose())
	}
	var cw int
	for _, k := range snap.Sockets {
		if k.State == CloseWait && k.Inode == cs[1].Client.Inode {
			cw++
		}
	}
	if cw != 1 {
		t.Errorf("the CLOSE_WAIT socket %s is not kept: %v", cs[1].Client, snap.Sockets)
	}
}

// TestFDHolds: the fd check finds a socket this process holds, and not
// another inode, nor the fd once closed.
func TestFDHolds(t *testing.T) {
	b := sockettest.NewBroker(t)
	c := b.Connect("127.0.0.1", 1)[0].Client
	pid := os.Getpid()
	if !FDHolds("/proc", pid, c.FD, c.Inode) {
		t.Errorf("fd %d of inode %d not found", c.FD, c.Inode)
	}
	if FDHolds("/proc", pid, c.FD, c.Inode+1) {
		t.Error("another inode matched")
	}
	c.Close()
	if FDHolds("/proc", pid, c.FD, c.Inode) {
		t.Error("a closed fd still holds the socket")
	}
}
