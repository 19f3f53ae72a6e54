//go:build linux

package netstat

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/internal/sockettest"
	"github.com/kdiag/kdiag/internal/testio"
)

// heldChild starts a child in its own network namespace holding 5
// CLOSE_WAIT sockets, keepalive off until StartKeepAlive turns it on every
// 1 s, with tcp_fin_timeout 2 s there, and a listener: within seconds of
// StartKeepAlive the peers' FIN_WAIT_2 sides have expired, the probes get
// RSTs, and the 5 sockets leave every kernel table while the child holds
// their fds.
func heldChild(t *testing.T) *sockettest.Child {
	t.Helper()
	return sockettest.StartChild(t, sockettest.Spec{Listeners: 1, CloseWait: 5, KeepAlive: time.Second, DeferKeepAlive: true, FinTimeout: 2 * time.Second, NetNS: true})
}

// waitStates scans q with s until the child's sockets count want by state,
// or fails after a bound: the kernel's resets come when they come.
func waitStates(t *testing.T, s *Scanner, q Query, pid int, want map[string]int) *Snapshot {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		snap, err := s.Scan(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, x := range snap.Sockets {
			if x.PID == pid {
				got[x.State.String()]++
			}
		}
		if cmp.Equal(want, got) {
			return snap
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s the child's sockets are %v, want %v (notes %q)", got, want, snap.Notes)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestScanHeldClosed: the sockets a keepalive RST took out of every kernel
// table are reported as CLOSE, exactly those, with the child's pid, fd and
// inode; a repeated scan keeps the addresses they had in CLOSE_WAIT; a scan
// of CLOSE_WAIT alone does not report them.
func TestScanHeldClosed(t *testing.T) {
	for _, fds := range fdSources(t) {
		t.Run(fds, func(t *testing.T) { testScanHeldClosed(t, fds) })
	}
}

func testScanHeldClosed(t *testing.T, fds string) {
	c := heldChild(t)
	q := Query{States: States(CloseWait, Close, Listen), PIDs: []int{c.PID}}
	watch := NewScanner("/proc")
	watch.FDs = fds
	defer watch.Close()
	// Seen in CLOSE_WAIT first, so that the repeated scanner knows where
	// they pointed; without keepalive they stay there until told.
	waitStates(t, watch, q, c.PID, map[string]int{"CLOSE_WAIT": 5, "LISTEN": 1})
	if err := c.StartKeepAlive(); err != nil {
		t.Fatal(err)
	}
	snap := waitStates(t, watch, q, c.PID, map[string]int{"CLOSE": 5, "LISTEN": 1})

	type held struct {
		State         string
		Local, Remote string
		Inode         uint64
		PID, FD       int
	}
	var want []held
	for _, w := range c.CloseWait {
		want = append(want, held{"CLOSE", w.Local.String(), w.Remote.String(), w.Inode, c.PID, w.FD})
	}
	pick := func(snap *Snapshot) []held {
		var got []held
		for _, x := range snap.Sockets {
			if x.State == Close {
				got = append(got, held{x.State.String(), x.Local.String(), x.Remote.String(), x.Inode, x.PID, x.FD})
			}
		}
		return got
	}
	byFD := func(a, b held) int { return a.FD - b.FD }
	slices.SortFunc(want, byFD)
	got := pick(snap)
	slices.SortFunc(got, byFD)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("repeated scan, held sockets (-want +got):\n%s", d)
	}
	var p *Process
	for i := range snap.Processes {
		if snap.Processes[i].PID == c.PID {
			p = &snap.Processes[i]
		}
	}
	if p == nil || p.States["CLOSE"] != 5 {
		t.Errorf("child process %+v, want 5 CLOSE", p)
	}

	// A one-shot scan never saw them in CLOSE_WAIT: no addresses.
	one := NewScanner("/proc")
	one.NoCache = true
	one.FDs = fds
	snap, err := one.Scan(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i].Local, want[i].Remote = "invalid AddrPort", "invalid AddrPort"
	}
	got = pick(snap)
	slices.SortFunc(got, byFD)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("one-shot scan, held sockets (-want +got):\n%s", d)
	}

	// Without CLOSE in the query, no full walk and no CLOSE socket.
	snap, err = one.Scan(context.Background(), Query{States: States(CloseWait), PIDs: []int{c.PID}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(snap.Sockets); n != 0 {
		t.Errorf("--state close-wait: %d sockets, want none", n)
	}
}

// TestHeldClosedOnlyTCP: a process's UDP and UNIX sockets and its TCP
// sockets in the kernel's tables are never held CLOSE sockets.
func TestHeldClosedOnlyTCP(t *testing.T) {
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	sockettest.Established(t, "tcp4", 2)
	// A TCP socket never connected is TCP_CLOSE and in no table: that one
	// is held CLOSE, the only one.
	raw, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(raw)
	for _, src := range fdSources(t) {
		for _, once := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/one-shot=%v", src, once), func(t *testing.T) {
				s := NewScanner("/proc")
				defer s.Close()
				s.NoCache = once
				s.FDs = src
				snap, err := s.Scan(context.Background(), Query{States: States(Close), PIDs: []int{os.Getpid()}})
				if err != nil {
					t.Fatal(err)
				}
				checkPasses(t, s, src)
				var fdsGot []int
				for _, x := range snap.Sockets {
					fdsGot = append(fdsGot, x.FD)
					if x.State != Close || x.Family != IPv4 || x.PID != os.Getpid() {
						t.Errorf("socket %+v, want a tcp4 CLOSE socket of this process", x)
					}
				}
				if !slices.Equal(fdsGot, []int{raw}) {
					t.Errorf("held CLOSE fds %v, want only the unconnected TCP socket's fd %d", fdsGot, raw)
				}
			})
		}
	}
}

// TestCloseWaitAgeWithKeepalive: keepalive probes' ACKs (every second here)
// reset tcp_info's last-ACK time, so after a few seconds the age of a
// CLOSE_WAIT socket is a bound, not a value, and the bound holds the true
// age: never a too-young age given as exact. Without probes answered yet
// (Go's default 15 s keepalive) the age is exact and right.
func TestCloseWaitAgeWithKeepalive(t *testing.T) {
	if _, err := DumpNetlink(States(Listen)); err != nil {
		t.Skipf("netlink unavailable: %v", err)
	}
	before := time.Now()
	probed := sockettest.CloseWait(t, "tcp4", 2, sockettest.KeepAlive(time.Second))
	quiet := sockettest.CloseWait(t, "tcp4", 2)
	after := time.Now() // every FIN came between before and after
	ports := []uint16{probed[0].Remote.Port(), quiet[0].Remote.Port()}
	s := NewScanner("/proc")
	s.NoCache = true
	q := Query{States: States(CloseWait), PIDs: []int{os.Getpid()}, RemotePorts: ports}
	// Wait, bounded, for the probes' ACKs to make the first pair's ages
	// bounds: at least one probe a second, so a few seconds.
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap, err := s.Scan(context.Background(), q)
		end := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		// The kernel reads its clock for tcp_info during the dump, some time
		// after snap.Time (the scan's start) and before end: the true age
		// then lies between these.
		minAge, maxAge := snap.Time.Sub(after), end.Sub(before)
		const tick = 20 * time.Millisecond // tcp_info's ms and jiffies rounding
		bounded := 0
		for _, x := range snap.Sockets {
			if !x.HasAge {
				t.Fatalf("%v: no age", x)
			}
			if x.AgeExact() && (x.Age < minAge-tick || x.Age > maxAge+tick) {
				t.Fatalf("%s: exact age %v, but the FIN came %v to %v ago", x.Local, x.Age, minAge, maxAge)
			}
			if !x.AgeExact() && (x.Age > maxAge+tick || x.AgeMax() < minAge-tick) {
				t.Fatalf("%s: age between %v and %v, but the FIN came %v to %v ago", x.Local, x.Age, x.AgeMax(), minAge, maxAge)
			}
			if x.Remote.Port() == quiet[0].Remote.Port() && !x.AgeExact() {
				t.Errorf("%s: no probe answered yet (15 s keepalive), yet the age is bounded (%v to %v)", x.Local, x.Age, x.AgeMax())
			}
			if x.Remote.Port() == probed[0].Remote.Port() && !x.AgeExact() {
				bounded++
			}
		}
		if len(snap.Sockets) != 4 {
			t.Fatalf("%d CLOSE_WAIT sockets, want 4", len(snap.Sockets))
		}
		if bounded == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s of probes every second, %d of 2 ages are bounds", bounded)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestIdleBeforeFIN: a connection that carried data, then idled until the
// peer closed it, says how long it idled: what a broker's idle close waited
// (its connections.max.idle.ms).
func TestIdleBeforeFIN(t *testing.T) {
	if _, err := DumpNetlink(States(Listen)); err != nil {
		t.Skipf("netlink unavailable: %v", err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	// A request and its response, then nothing.
	dataBefore := time.Now()
	if _, err := c.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Read(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Write([]byte{2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	dataAfter := time.Now()
	time.Sleep(700 * time.Millisecond)
	closeBefore := time.Now()
	srv.Close()
	closeAfter := time.Now()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	s := NewScanner("/proc")
	s.NoCache = true
	deadline := time.Now().Add(10 * time.Second)
	for {
		snap, err := s.Scan(context.Background(), Query{States: States(CloseWait), PIDs: []int{os.Getpid()}, RemotePorts: []uint16{port}})
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Sockets) == 1 {
			x := snap.Sockets[0]
			idle := time.Duration(x.IdleMS) * time.Millisecond
			lo, hi := closeBefore.Sub(dataAfter), closeAfter.Sub(dataBefore)
			const tick = 20 * time.Millisecond
			if !x.AgeExact() || idle < lo-tick || idle > hi+tick {
				t.Errorf("exact age %v, idle before the FIN %v; want exact and %v to %v", x.AgeExact(), idle, lo, hi)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d CLOSE_WAIT sockets to port %d after 10s, want 1", len(snap.Sockets), port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDropClosed: an unattributed socket the kernel no longer has (closed
// while the scan ran) is taken out of the snapshot with a note; one it
// still has stays, unattributed, for unseen to report.
func TestDropClosed(t *testing.T) {
	if _, err := DumpNetlink(States(Listen)); err != nil {
		t.Skipf("netlink unavailable: %v", err)
	}
	live := sockettest.CloseWait(t, "tcp4", 1)[0]
	gone := sockettest.CloseWait(t, "tcp4", 1)[0]
	gone.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		socks, err := DumpNetlink(AllStates)
		if err != nil {
			t.Fatal(err)
		}
		still := false
		for _, x := range socks {
			still = still || (x.Local == gone.Local && x.Remote == gone.Remote && x.Inode == gone.Inode)
		}
		if !still {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the closed socket is still in the kernel's tables after 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s := NewScanner("/proc")
	sel := selection{groups: []nsGroup{{ino: 0, host: true}}}
	mk := func(x *sockettest.Socket) Socket {
		return Socket{Family: IPv4, State: CloseWait, Local: x.Local, Remote: x.Remote, Inode: x.Inode, FD: -1}
	}
	snap := &Snapshot{Sockets: []Socket{mk(live), mk(gone)}}
	var n notes
	s.dropClosed(snap, sel, SourceNetlink, &n)
	if len(snap.Sockets) != 1 || snap.Sockets[0].Inode != live.Inode {
		t.Errorf("sockets left %+v, want only the live one (inode %d)", snap.Sockets, live.Inode)
	}
	// Churn limits nothing the scan reports: a detail, said with -v.
	if len(n.details) != 1 || !strings.Contains(n.details[0], "1 socket closed while the scan ran") || len(n.list) != 0 {
		t.Errorf("notes %q, details %q; want no note and one detail saying a socket closed while the scan ran", n.list, n.details)
	}
}

// TestDropClosedOtherNetNS: the same in another network namespace (a
// container's, a test's): a CLOSE_WAIT socket there that its process
// closed after the dump is looked up in that namespace and left out; the
// one still there stays, for unseen to report.
func TestDropClosedOtherNetNS(t *testing.T) {
	c := sockettest.StartChild(t, sockettest.Spec{CloseWait: 2, NetNS: true})
	ino, err := NetNSOf("/proc", c.PID)
	if err != nil {
		t.Fatal(err)
	}
	live, gone := c.CloseWait[0], c.CloseWait[1]
	if err := c.CloseCloseWait(1); err != nil {
		t.Fatal(err)
	}
	testio.WaitFor(t, 10*time.Second, "the child's closed socket leaves CLOSE_WAIT", func() bool {
		socks, err := DumpNetlinkInNetNS(c.NetNSPath(), States(CloseWait))
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range socks {
			if x.Inode == gone.Inode {
				return false
			}
		}
		return true
	})
	mk := func(x *sockettest.Socket) Socket {
		return Socket{Family: IPv4, State: CloseWait, Local: x.Local, Remote: x.Remote, Inode: x.Inode, FD: -1, NetNS: ino}
	}
	snap := &Snapshot{Sockets: []Socket{mk(live), mk(gone)}}
	s := NewScanner("/proc")
	var n notes
	s.dropClosed(snap, selection{groups: []nsGroup{{ino: 1, host: true}, {ino: ino, pids: []int{c.PID}}}}, SourceNetlink, &n)
	if len(snap.Sockets) != 1 || snap.Sockets[0].Inode != live.Inode {
		t.Errorf("sockets left %+v, want only the live one (inode %d)", snap.Sockets, live.Inode)
	}
	if len(n.details) != 1 || !strings.Contains(n.details[0], "1 socket closed while the scan ran") {
		t.Errorf("details %q, want one saying a socket closed while the scan ran", n.details)
	}
}

// TestScanHeldKeptByFilters: a process holding 1 CLOSE_WAIT and 3 held
// CLOSE sockets toward a "broker" (the CloseWait listener), and one
// ESTABLISHED connection elsewhere: --brokers, --remote and --port keep
// exactly its 3 held CLOSE sockets, marked KeptByProcess, with the
// CLOSE_WAIT they match, and count them in the process's states; a port
// it only has an ESTABLISHED connection to selects its held sockets too
// (any state), and a port it has nothing to selects nothing.
func TestScanHeldKeptByFilters(t *testing.T) {
	c := sockettest.StartChild(t, sockettest.Spec{Established: 1, CloseWait: 4, KeepAlive: time.Second,
		DeferKeepAlive: true, FinTimeout: 2 * time.Second, NetNS: true})
	all := Query{States: AllStates, PIDs: []int{c.PID}}
	one := NewScanner("/proc")
	one.NoCache = true
	defer one.Close()
	waitStates(t, one, all, c.PID, map[string]int{"CLOSE_WAIT": 4, "ESTABLISHED": 2, "LISTEN": 1})
	if err := c.StartKeepAliveOn(3); err != nil {
		t.Fatal(err)
	}
	waitStates(t, one, all, c.PID, map[string]int{"CLOSE_WAIT": 1, "CLOSE": 3, "ESTABLISHED": 2, "LISTEN": 1})

	broker := c.CloseWait[0].Remote // the listener every CloseWait client dialed
	elsewhere := c.Established[0].Remote
	brokers, err := ParseBrokers(broker.String())
	if err != nil {
		t.Fatal(err)
	}
	remote, err := ParseEndpoint(broker.String())
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		State string
		FD    int
		Kept  bool
	}
	var held, cw []got
	for i, s := range c.CloseWait {
		if i < 3 {
			held = append(held, got{"CLOSE", s.FD, true})
		} else {
			cw = append(cw, got{"CLOSE_WAIT", s.FD, false})
		}
	}
	closeWaitClose := States(CloseWait, Close)
	for _, tc := range []struct {
		name string
		q    Query
		want []got
	}{
		{"--brokers", Query{States: AllStates, Brokers: brokers}, append(slices.Clone(cw), held...)},
		{"--remote", Query{States: closeWaitClose, Remotes: []Endpoint{remote}}, append(slices.Clone(cw), held...)},
		{"--port", Query{States: AllStates, RemotePorts: []uint16{broker.Port()}}, append(slices.Clone(cw), held...)},
		{"--port of its ESTABLISHED connection, --state close-wait,close", Query{States: closeWaitClose, RemotePorts: []uint16{elsewhere.Port()}}, held},
		{"--port it has nothing to", Query{States: AllStates, RemotePorts: []uint16{1}}, nil},
		{"--brokers, --state close", Query{States: States(Close), Brokers: brokers}, held},
	} {
		for _, fds := range fdSources(t) {
			for _, mode := range []string{"one-shot", "one-shot, every process", "repeated"} {
				if mode == "one-shot, every process" && fds == FDsProc {
					continue // a walk of every process of the host: slow, and the pass covers it
				}
				t.Run(fmt.Sprintf("%s/%s/%s", tc.name, fds, mode), func(t *testing.T) {
					q := tc.q
					if mode != "one-shot, every process" {
						q.PIDs = []int{c.PID}
					}
					// A repeated scanner's first scan: it never saw the
					// held sockets in CLOSE_WAIT, so their remotes are
					// unknown to it too.
					s := NewScanner("/proc")
					s.NoCache, s.FDs = mode != "repeated", fds
					defer s.Close()
					snap, err := s.Scan(context.Background(), q)
					if err != nil {
						t.Fatal(err)
					}
					var gotSocks []got
					for _, x := range snap.Sockets {
						if x.PID != c.PID {
							continue
						}
						gotSocks = append(gotSocks, got{x.State.String(), x.FD, x.KeptByProcess})
						if x.KeptByProcess && (x.Remote.IsValid() || x.State != Close) {
							t.Errorf("%+v: kept by process, yet not a held CLOSE socket of unknown remote", x)
						}
					}
					byFD := func(a, b got) int { return a.FD - b.FD }
					want := slices.SortedFunc(slices.Values(tc.want), byFD)
					slices.SortFunc(gotSocks, byFD)
					if d := cmp.Diff(want, gotSocks); d != "" {
						t.Errorf("the child's sockets (-want +got):\n%s", d)
					}
					wantStates := map[string]int{}
					for _, w := range want {
						wantStates[w.State]++
					}
					var gotStates map[string]int
					for _, p := range snap.Processes {
						if p.PID == c.PID {
							gotStates = p.States
						}
					}
					if len(want) > 0 && !cmp.Equal(wantStates, gotStates) {
						t.Errorf("the child's process counts %v, want %v", gotStates, wantStates)
					}
				})
			}
		}
	}
}

// TestScanCountsHeldLeftOut: a one-shot scan of CLOSE_WAIT alone
// (CountHeld) counts the held CLOSE sockets it leaves out, from the pass
// over the socket fds, for the processes its filters select, and says so
// in one note; without the iterator it says it could not count them.
func TestScanCountsHeldLeftOut(t *testing.T) {
	c := sockettest.StartChild(t, sockettest.Spec{Established: 1, CloseWait: 4, KeepAlive: time.Second,
		DeferKeepAlive: true, FinTimeout: 2 * time.Second, NetNS: true})
	if err := c.StartKeepAliveOn(3); err != nil {
		t.Fatal(err)
	}
	one := NewScanner("/proc")
	one.NoCache = true
	defer one.Close()
	waitStates(t, one, Query{States: AllStates, PIDs: []int{c.PID}}, c.PID, map[string]int{"CLOSE_WAIT": 1, "CLOSE": 3, "ESTABLISHED": 2, "LISTEN": 1})
	broker := c.CloseWait[0].Remote
	cw := States(CloseWait)
	sources := fdSources(t)
	if slices.Contains(sources, FDsIterator) {
		// auto walks a few processes' fds (--pid), and counts from a pass
		// after the dump.
		sources = append(sources, FDsAuto)
	}
	for _, fds := range sources {
		for _, tc := range []struct {
			name string
			q    Query
			want int
		}{
			{"--pid", Query{States: cw, PIDs: []int{c.PID}}, 3},
			{"every process, --port", Query{States: cw, RemotePorts: []uint16{broker.Port()}}, 3},
			// Its only socket to that port is ESTABLISHED, not dumped.
			{"--port of its ESTABLISHED connection", Query{States: cw, PIDs: []int{c.PID}, RemotePorts: []uint16{c.Established[0].Remote.Port()}}, 0},
		} {
			t.Run(fds+"/"+tc.name, func(t *testing.T) {
				s := NewScanner("/proc")
				s.NoCache, s.FDs, s.CountHeld = true, fds, true
				defer s.Close()
				snap, err := s.Scan(context.Background(), tc.q)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range snap.Sockets {
					if x.State != CloseWait {
						t.Errorf("%+v: a --state close-wait scan reported it", x)
					}
				}
				var said []string
				for _, n := range snap.Notes {
					if strings.Contains(n, "held CLOSE") {
						said = append(said, n)
					}
				}
				if fds == FDsProc {
					if snap.HeldLeftOut != -1 || len(said) != 1 || !strings.Contains(said[0], "were not counted") {
						t.Errorf("without the iterator: HeldLeftOut %d, notes %q; want -1 and one note saying so", snap.HeldLeftOut, said)
					}
					return
				}
				want := fmt.Sprintf("3 held CLOSE sockets left out, of pid %d (", c.PID)
				switch {
				case snap.HeldLeftOut != tc.want:
					t.Errorf("HeldLeftOut %d, want %d (notes %q)", snap.HeldLeftOut, tc.want, snap.Notes)
				case tc.want > 0 && (len(said) != 1 || !strings.HasPrefix(said[0], want) || !strings.Contains(said[0], "--state close-wait,close")):
					t.Errorf("notes %q, want one starting %q and saying how to see them", said, want)
				case tc.want == 0 && len(said) != 0:
					t.Errorf("notes %q, want none", said)
				}
			})
		}
	}
}

// TestSelectedProcessesRemembered: a repeated scan keeps selecting a
// process that held a socket its remote filters matched at an earlier
// scan, until the process is gone or the filters change; a one-shot scan
// does not remember.
func TestSelectedProcessesRemembered(t *testing.T) {
	q := Query{RemotePorts: []uint16{9092}}
	kept := &Snapshot{Sockets: []Socket{{State: CloseWait, PID: 40, Remote: netip.MustParseAddrPort("10.0.0.1:9092")}}}
	none := &Snapshot{}
	s := NewScanner(t.TempDir())
	if sel := s.selectedProcesses(kept, q, map[int]bool{41: true}); !sel(40) || !sel(41) || sel(42) {
		t.Errorf("first scan: 40 %v, 41 %v, 42 %v; want the holders of matched sockets only", sel(40), sel(41), sel(42))
	}
	if sel := s.selectedProcesses(none, q, nil); !sel(40) || !sel(41) {
		t.Error("second scan: the processes selected before are forgotten")
	}
	s.chosen.prune(func(pid int) bool { return pid != 41 })
	if sel := s.selectedProcesses(none, q, nil); !sel(40) || sel(41) {
		t.Error("after 41 exited: want 40 still selected and 41 not")
	}
	if sel := s.selectedProcesses(none, Query{RemotePorts: []uint16{9093}}, nil); sel(40) {
		t.Error("other filters: the processes selected for the old ones are still selected")
	}
	if sel := s.selectedProcesses(none, Query{}, nil); !sel(12345) {
		t.Error("no remote filter: every process's held sockets are kept")
	}
	o := NewScanner(t.TempDir())
	o.NoCache = true
	o.selectedProcesses(kept, q, nil)
	if sel := o.selectedProcesses(none, q, nil); sel(40) {
		t.Error("a one-shot scanner remembered a process")
	}
}
