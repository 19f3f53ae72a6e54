package netstat

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// A CLOSE_WAIT socket's age between tcp_info scans is its age at the last
// one plus the time since; a socket new since then, or seen then in another
// state, has none; other states have none.
func TestAgeCacheCarry(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	sock := func(st State, inode uint64, age time.Duration, has bool) Socket {
		return Socket{State: st, Inode: inode, NetNS: 7, Age: age, HasAge: has, FD: -1}
	}
	var c ageCache
	if !c.due(t0, 10*time.Second) {
		t.Fatal("first scan not due for tcp_info")
	}
	c.record([]Socket{
		sock(CloseWait, 1, 90*time.Second, true),
		sock(CloseWait, 2, 0, true),
		sock(Established, 3, 5*time.Second, true), // not an age state: not kept
		sock(CloseWait, 4, 0, false),              // no tcp_info (e.g. /proc): not kept
		sock(TimeWait, 0, 0, false),
	}, t0, ageStates)

	at := t0.Add(3500 * time.Millisecond)
	if c.due(at, 10*time.Second) {
		t.Error("scan 3.5 s after a tcp_info scan is due, want not before 10 s")
	}
	got := []Socket{
		sock(CloseWait, 1, 0, false),
		sock(CloseWait, 2, 0, false),
		sock(CloseWait, 3, 0, false),          // ESTABLISHED then: its age is not the FIN's
		sock(CloseWait, 5, 0, false),          // new
		sock(Established, 3, time.Hour, true), // other states report none
		sock(CloseWait, 4, 0, false),
	}
	c.carry(got, at, ageStates)
	want := []Socket{
		sock(CloseWait, 1, 93500*time.Millisecond, true),
		sock(CloseWait, 2, 3500*time.Millisecond, true),
		sock(CloseWait, 3, 0, false),
		sock(CloseWait, 5, 0, false),
		sock(Established, 3, 0, false),
		sock(CloseWait, 4, 0, false),
	}
	if d := cmp.Diff(want, got, cmpopts.EquateComparable(netip.AddrPort{})); d != "" {
		t.Errorf("carried ages (-want +got):\n%s", d)
	}

	// Same inode in another namespace: another socket.
	other := []Socket{{State: CloseWait, Inode: 1, NetNS: 8, FD: -1}}
	c.carry(other, at, ageStates)
	if other[0].HasAge {
		t.Errorf("inode 1 of namespace 8 got namespace 7's age %v", other[0].Age)
	}

	if !c.due(t0.Add(10*time.Second), 10*time.Second) || !c.due(t0.Add(-time.Second), 10*time.Second) {
		t.Error("not due 10 s later or after the clock went back")
	}
	// The next tcp_info scan replaces the cache: inode 1 gone, 5 known.
	t1 := t0.Add(10 * time.Second)
	c.record([]Socket{sock(CloseWait, 5, 2*time.Second, true)}, t1, ageStates)
	again := []Socket{sock(CloseWait, 1, 0, false), sock(CloseWait, 5, 0, false)}
	c.carry(again, t1.Add(time.Second), ageStates)
	want = []Socket{sock(CloseWait, 1, 0, false), sock(CloseWait, 5, 3*time.Second, true)}
	if d := cmp.Diff(want, again, cmpopts.EquateComparable(netip.AddrPort{})); d != "" {
		t.Errorf("after the next tcp_info scan (-want +got):\n%s", d)
	}
}

// TestAgeCacheNarrows: a later tcp_info scan whose interval a keepalive ACK
// widened keeps what the earlier one knew: the intersection, and an exact
// FIN time stays exact.
func TestAgeCacheNarrows(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	var c ageCache
	sock := func(age time.Duration, span uint32) []Socket {
		return []Socket{{State: CloseWait, Inode: 7, NetNS: 1, Age: age, HasAge: true, AgeSpan: span}}
	}
	// FIN between 10 s and 40 s before t0.
	c.record(sock(10*time.Second, 30000), t0, ageStates)
	// 10 s later a probe's ACK says 1 s and the last data 50 s: alone, the
	// FIN came 1 s to 50 s ago; with the first scan, 20 s to 50 s ago.
	s := sock(time.Second, 49000)
	c.record(s, t0.Add(10*time.Second), ageStates)
	if s[0].Age != 20*time.Second || s[0].AgeMax() != 50*time.Second {
		t.Errorf("after the probe: %v to %v, want 20s to 50s", s[0].Age, s[0].AgeMax())
	}
	// An exact reading (no ACK since the FIN) then stays exact.
	var e ageCache
	e.record(sock(12*time.Second, 0), t0, ageStates)
	s = sock(time.Second, 30000)
	e.record(s, t0.Add(5*time.Second), ageStates)
	if !s[0].AgeExact() || s[0].Age != 17*time.Second {
		t.Errorf("exact then widened: %v (span %d ms), want exactly 17s", s[0].Age, s[0].AgeSpan)
	}
	// A socket not seen again is forgotten.
	e.record(nil, t0.Add(6*time.Second), ageStates)
	if e.t.len() != 0 {
		t.Errorf("%d entries kept for sockets gone", e.t.len())
	}
}
