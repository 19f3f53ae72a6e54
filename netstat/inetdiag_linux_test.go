//go:build linux

package netstat

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/internal/sockettest"
)

// tuple identifies a socket across sources: family and 4-tuple.
type tuple struct {
	fam           Family
	local, remote netip.AddrPort
}

func (t tuple) String() string { return fmt.Sprintf("%v %v->%v", t.fam, t.local, t.remote) }

func tupleOf(s Socket) tuple { return tuple{s.Family, s.Local, s.Remote} }

func testTuple(s *sockettest.Socket) tuple {
	fam := IPv4
	if s.Network == "tcp6" {
		fam = IPv6
	}
	return tuple{fam, s.Local, s.Remote}
}

// byTuple indexes sockets by 4-tuple; a 4-tuple seen twice in one dump is
// an error (the kernel keeps it unique per namespace).
func byTuple(t *testing.T, source string, socks []Socket) map[tuple]Socket {
	t.Helper()
	m := make(map[tuple]Socket, len(socks))
	for _, s := range socks {
		if old, dup := m[tupleOf(s)]; dup && old.Inode == s.Inode && s.State != TimeWait {
			t.Errorf("%s: socket %v twice", source, tupleOf(s))
		}
		m[tupleOf(s)] = s
	}
	return m
}

// realSockets are sockets made by sockettest in this process, on both
// loopbacks, in every state it makes, with what the kernel must report.
type realSockets struct {
	start     time.Time
	all       []*sockettest.Socket
	est       []*sockettest.Socket
	closeWait []*sockettest.Socket
	ports     map[uint16]bool // the listeners' ports: every socket of the test has one
}

func makeRealSockets(t *testing.T) *realSockets {
	r := &realSockets{start: time.Now(), ports: map[uint16]bool{}}
	for _, network := range sockettest.Networks(t) {
		ln := sockettest.Listener(t, network)
		est := sockettest.Established(t, network, 3)
		cw := sockettest.CloseWait(t, network, 3, sockettest.PeerData(2))               // Recv-Q 3
		cw = append(cw, sockettest.CloseWait(t, network, 1)...)                         // Recv-Q 1: the FIN
		cw = append(cw, sockettest.CloseWait(t, network, 1, sockettest.ReadToEOF())...) // Recv-Q 0
		tw := sockettest.TimeWait(t, network)
		r.all = append(r.all, ln, tw)
		r.ports[ln.Local.Port()] = true
		r.ports[tw.Remote.Port()] = true
		for _, s := range est {
			r.all = append(r.all, s, s.Peer)
			r.ports[s.Remote.Port()] = true
		}
		for _, s := range cw {
			r.all = append(r.all, s)
			r.ports[s.Remote.Port()] = true
		}
		r.est = append(r.est, est...)
		r.closeWait = append(r.closeWait, cw...)
	}
	return r
}

// ours keeps the sockets of a dump that belong to the test: those with a
// listener port of the test at one end (the accepted ends and the orphaned
// FIN_WAIT2 server ends included).
func (r *realSockets) ours(socks []Socket) []Socket {
	var out []Socket
	for _, s := range socks {
		if s.Local.Addr().IsLoopback() && (r.ports[s.Local.Port()] || r.ports[s.Remote.Port()]) {
			out = append(out, s)
		}
	}
	return out
}

// checkReported checks that every socket the test made is in socks, as the
// kernel knows it.
func checkReported(t *testing.T, source string, r *realSockets, socks []Socket) {
	t.Helper()
	m := byTuple(t, source, socks)
	for _, want := range r.all {
		got, ok := m[testTuple(want)]
		if !ok {
			t.Errorf("%s: %s not reported", source, want)
			continue
		}
		if got.State.String() != want.State || got.Inode != want.Inode || got.RecvQ != want.RecvQ || got.UID != want.UID {
			t.Errorf("%s: %s reported as %s inode %d Recv-Q %d uid %d; want inode %d Recv-Q %d uid %d",
				source, want, got.State, got.Inode, got.RecvQ, got.UID, want.Inode, want.RecvQ, want.UID)
		}
		if got.PID != 0 || got.FD != -1 {
			t.Errorf("%s: %s: pid %d fd %d, want unattributed (0, -1)", source, want, got.PID, got.FD)
		}
	}
}

// walkAttempts bounds the re-dumps of dumpAll. Neither source is a snapshot
// (see dedupSockets): while other tests on the host open and close sockets,
// a walk can skip an entry of a bucket that changed under it. A socket
// missing from three walks in a row is missing.
const walkAttempts = 3

// dumpAll dumps until every socket of want is in the dump, at most
// walkAttempts times, and returns the last dump.
func dumpAll(t *testing.T, source string, dump func() ([]Socket, error), want []*sockettest.Socket) []Socket {
	t.Helper()
	for attempt := 1; ; attempt++ {
		socks, err := dump()
		if err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		m := byTuple(t, source, socks)
		missing := 0
		for _, s := range want {
			if _, ok := m[testTuple(s)]; !ok {
				missing++
			}
		}
		if missing == 0 || attempt == walkAttempts {
			return socks
		}
		t.Logf("%s: walk %d missed %d of the test's sockets; walking again", source, attempt, missing)
	}
}

func netlinkAll() ([]Socket, error) { return DumpNetlink(AllStates) }
func procAll() ([]Socket, error)    { return ReadProcNetTCP("/proc", 0, AllStates) }

func TestDumpNetlinkRealSockets(t *testing.T) {
	r := makeRealSockets(t)
	socks := dumpAll(t, "netlink", netlinkAll, r.all)
	elapsed := time.Since(r.start)
	checkReported(t, "netlink", r, socks)

	self, err := NetNSOf("/proc", 0)
	if err != nil {
		t.Fatal(err)
	}
	m := byTuple(t, "netlink", socks)
	for _, s := range socks {
		if s.NetNS != self {
			t.Fatalf("%v: NetNS %d, want the test's namespace %d", tupleOf(s), s.NetNS, self)
		}
	}
	for _, want := range r.closeWait {
		got := m[testTuple(want)]
		// Age is ms since the FIN (with its ACK) arrived, counted in jiffies:
		// at most one jiffy (10 ms at HZ=100) above the true time, which is
		// below the time since the test began making sockets.
		if !got.HasAge || got.Age < 0 || got.Age > elapsed+10*time.Millisecond {
			t.Errorf("netlink: %s: age %v (known %v), want within [0, %v]", want, got.Age, got.HasAge, elapsed)
		}
	}
	for _, want := range r.est {
		if got := m[testTuple(want)]; !got.HasAge {
			t.Errorf("netlink: %s: no age from tcp_info", want)
		}
	}
}

func TestReadProcNetTCPRealSockets(t *testing.T) {
	r := makeRealSockets(t)
	socks := dumpAll(t, "/proc", procAll, r.all)
	checkReported(t, "/proc", r, socks)
	// pid of the test itself: the same namespace, the same sockets.
	socks = dumpAll(t, "/proc/<pid>", func() ([]Socket, error) { return ReadProcNetTCP("/proc", os.Getpid(), AllStates) }, r.all)
	checkReported(t, fmt.Sprintf("/proc/%d/net", os.Getpid()), r, socks)
}

// The two sources report the same sockets, in the same states, with the same
// inodes and queues. A listener's Send-Q differs by definition: /proc's
// tx_queue is 0, inet_diag's idiag_wqueue the backlog limit.
func TestSourcesAgree(t *testing.T) {
	r := makeRealSockets(t)
	type view struct {
		State        State
		Inode        uint64
		RecvQ, SendQ uint32
		UID          uint32
	}
	viewOf := func(socks []Socket) map[string]view {
		m := map[string]view{}
		for _, s := range r.ours(socks) {
			v := view{s.State, s.Inode, s.RecvQ, s.SendQ, s.UID}
			if s.State == Listen {
				v.SendQ = 0
			}
			m[fmt.Sprintf("%v %v->%v", s.Family, s.Local, s.Remote)] = v
		}
		return m
	}
	// The test's sockets stay as they are meanwhile (CLOSE_WAIT, TIME_WAIT
	// and the orphaned FIN_WAIT2 ends all last 60 s), so the two walks must
	// agree; a difference that a second pair of walks does not repeat is a
	// walk that skipped an entry.
	for attempt := 1; ; attempt++ {
		nv := viewOf(dumpAll(t, "netlink", netlinkAll, r.all))
		pv := viewOf(dumpAll(t, "/proc", procAll, r.all))
		if len(nv) < len(r.all) {
			t.Errorf("netlink: %d of the test's sockets, want at least %d", len(nv), len(r.all))
		}
		d := cmp.Diff(pv, nv)
		if d == "" {
			break
		}
		if attempt == walkAttempts {
			t.Errorf("sources disagree (-proc +netlink):\n%s", d)
			break
		}
		t.Logf("walk %d: sources disagree; walking again:\n%s", attempt, d)
	}
}

func TestStateFilter(t *testing.T) {
	r := makeRealSockets(t)
	isEst := map[tuple]bool{}
	for _, s := range r.est {
		isEst[testTuple(s)], isEst[testTuple(s.Peer)] = true, true
	}
	for _, src := range []struct {
		name string
		dump func(StateSet) ([]Socket, error)
	}{
		{"netlink", DumpNetlink},
		{"/proc", func(states StateSet) ([]Socket, error) { return ReadProcNetTCP("/proc", 0, states) }},
	} {
		socks := dumpAll(t, src.name, func() ([]Socket, error) { return src.dump(States(CloseWait)) }, r.closeWait)
		m := byTuple(t, src.name, socks)
		for _, s := range socks {
			if s.State != CloseWait {
				t.Errorf("%s: asked for CLOSE_WAIT, got %s %v", src.name, s.State, tupleOf(s))
			}
			if isEst[tupleOf(s)] {
				t.Errorf("%s: asked for CLOSE_WAIT, got the ESTABLISHED %v", src.name, tupleOf(s))
			}
		}
		for _, want := range r.closeWait {
			if _, ok := m[testTuple(want)]; !ok {
				t.Errorf("%s: CLOSE_WAIT %s missing from the filtered dump", src.name, want)
			}
		}

		socks = dumpAll(t, src.name, func() ([]Socket, error) { return src.dump(States(Established, TimeWait)) }, r.est)
		m = byTuple(t, src.name, socks)
		for _, want := range r.est {
			if _, ok := m[testTuple(want)]; !ok {
				t.Errorf("%s: ESTABLISHED %s missing", src.name, want)
			}
		}
		for _, cw := range r.closeWait {
			if _, ok := m[testTuple(cw)]; ok {
				t.Errorf("%s: asked for ESTABLISHED and TIME_WAIT, got the CLOSE_WAIT %s", src.name, cw)
			}
		}
	}
}

// A child process's sockets: the same namespace, so the same dumps see them,
// with the child's inodes.
func TestDumpNetlinkChildSockets(t *testing.T) {
	nets := sockettest.Networks(t)
	c := sockettest.StartChild(t, sockettest.Spec{Network: nets[len(nets)-1], Listeners: 1, Established: 1, CloseWait: 2, PeerData: 4})
	nl := dumpAll(t, "netlink", netlinkAll, c.Sockets())
	pr := dumpAll(t, "/proc", func() ([]Socket, error) { return ReadProcNetTCP("/proc", c.PID, AllStates) }, c.Sockets())
	for _, src := range []struct {
		name  string
		socks []Socket
	}{{"netlink", nl}, {"/proc", pr}} {
		m := byTuple(t, src.name, src.socks)
		for _, want := range c.Sockets() {
			got, ok := m[testTuple(want)]
			if !ok || got.State.String() != want.State || got.Inode != want.Inode || got.RecvQ != want.RecvQ {
				t.Errorf("%s: child's %s reported as %+v (found %v)", src.name, want, got, ok)
			}
		}
	}
}

// The dump's cost on this host, with 2,000 CLOSE_WAIT and 2,000 ESTABLISHED
// sockets of the benchmark's own added: all states against the kernel's
// filter; mdlayher/netlink's ReceiveIter with its default buffer (peek each
// datagram) and with dumpBufferSize (a copy of each datagram) against
// receiveDump (raw-32k, what kdiag uses).
func BenchmarkDumpNetlink(b *testing.B) {
	sockettest.CloseWait(b, "tcp4", 2000)
	sockettest.Established(b, "tcp4", 2000)
	ns, err := NetNSOf("/proc", 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name         string
		states, info StateSet
		buf          int
		library      bool
	}{
		{"all/library-peek", AllStates, AllStates, 0, true},
		{"all/library-32k", AllStates, AllStates, dumpBufferSize, true},
		{"all/raw-32k", AllStates, AllStates, dumpBufferSize, false},
		{"close-wait/library-peek", States(CloseWait), States(CloseWait), 0, true},
		{"close-wait/library-32k", States(CloseWait), States(CloseWait), dumpBufferSize, true},
		{"close-wait/raw-32k", States(CloseWait), States(CloseWait), dumpBufferSize, false},
		// What kdiag watch asks: tcp_info for CLOSE_WAIT only (a separate
		// request), or for none (between tcp_info scans), against one
		// request with tcp_info for both states.
		{"cw+est/info-both", States(CloseWait, Established), States(CloseWait, Established), dumpBufferSize, false},
		{"cw+est/info-cw", States(CloseWait, Established), States(CloseWait), dumpBufferSize, false},
		{"cw+est/info-none", States(CloseWait, Established), 0, dumpBufferSize, false},
		{"cw+est/info-none/library-32k", States(CloseWait, Established), 0, dumpBufferSize, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				socks, err := dumpNetlink(0, ns, "", bc.states, dumpOptions{info: bc.info, library: bc.library}, bc.buf)
				if err != nil {
					b.Fatal(err)
				}
				n = len(socks)
			}
			b.ReportMetric(float64(n), "sockets/op")
		})
	}
}

func BenchmarkReadProcNetTCP(b *testing.B) {
	sockettest.CloseWait(b, "tcp4", 2000)
	sockettest.Established(b, "tcp4", 2000)
	for _, bc := range []struct {
		name   string
		states StateSet
	}{{"all", AllStates}, {"close-wait", States(CloseWait)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				socks, err := ReadProcNetTCP("/proc", 0, bc.states)
				if err != nil {
					b.Fatal(err)
				}
				n = len(socks)
			}
			b.ReportMetric(float64(n), "sockets/op")
		})
	}
}
