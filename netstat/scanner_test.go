package netstat

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/internal/sockettest"
)

// TestMain lets sockettest re-execute this test binary as a child process
// that holds sockets.
func TestMain(m *testing.M) {
	sockettest.MaybeRunChild()
	os.Exit(m.Run())
}

// seen is what a test compares of a socket: what the kernel and /proc say,
// not the ages (the /proc source has none).
type seen struct {
	State         string
	Local, Remote string
	RecvQ         uint32
	Inode         uint64
	PID, FD       int
}

func fromTest(s *sockettest.Socket) seen {
	if s.FD < 0 {
		// TIME_WAIT: sockettest names the process that made it, but no
		// file holds it any more, so no process can be found.
		return seen{State: s.State, Local: s.Local.String(), Remote: s.Remote.String(), RecvQ: s.RecvQ, FD: -1}
	}
	return seen{State: s.State, Local: s.Local.String(), Remote: s.Remote.String(), RecvQ: s.RecvQ, Inode: s.Inode, PID: s.PID, FD: s.FD}
}

func fromScan(s Socket) seen {
	pid, fd := s.PID, s.FD
	if pid == 0 {
		fd = -1
	}
	return seen{State: s.State.String(), Local: s.Local.String(), Remote: s.Remote.String(), RecvQ: s.RecvQ, Inode: s.Inode, PID: pid, FD: fd}
}

func key(local, remote netip.AddrPort) string { return local.String() + "->" + remote.String() }

// sources returns the sources to test, skipping netlink where the kernel
// has no sock_diag.
func sources(t *testing.T) []string {
	t.Helper()
	out := []string{SourceProc}
	if _, err := DumpNetlink(States(Listen)); err == nil {
		out = append(out, SourceNetlink)
	} else {
		t.Logf("netlink unavailable, testing /proc only: %v", err)
	}
	return out
}

// checkPasses fails when the last scan of s did not attribute as fds says:
// with passes of the iterator, or with none.
func checkPasses(t *testing.T, s *Scanner, fds string) {
	t.Helper()
	switch p := s.lastStats.Passes; {
	case fds == FDsIterator && p == 0 && (s.lastStats.Wanted > s.lastStats.Cached || s.NoCache):
		t.Errorf("fds %s: attributed %+v without a pass", fds, s.lastStats)
	case fds == FDsProc && p != 0:
		t.Errorf("fds %s: %d passes of the iterator", fds, p)
	}
}

// fdSources returns the sources of socket fds to test attribution with:
// /proc always, the kernel's iterator where it can be had (root, Linux 5.11
// with BTF).
func fdSources(t *testing.T) []string {
	t.Helper()
	s := NewScanner("/proc")
	s.FDs = FDsIterator
	if _, err := s.openIterator(true); err != nil {
		t.Logf("socket fd iterator unavailable, testing /proc only: %v", err)
		return []string{FDsProc}
	}
	s.Close()
	return []string{FDsProc, FDsIterator}
}

func scan(t *testing.T, source, fds string, q Query) *Snapshot {
	t.Helper()
	s := NewScanner("/proc")
	s.Source = source
	s.FDs = fds
	snap, err := s.Scan(context.Background(), q)
	if err != nil {
		t.Fatalf("Scan(%s): %v", source, err)
	}
	checkPasses(t, s, fds)
	return snap
}

// fixture makes the sockets every scan test looks for: in this process and
// in a child, on 127.0.0.1 and ::1, in every state sockettest makes.
type fixture struct {
	self  []*sockettest.Socket
	child *sockettest.Child
	tw    *sockettest.Socket
	// closeWait lists every CLOSE_WAIT socket made, this process's and
	// the child's.
	closeWait []*sockettest.Socket
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{}
	f.self = append(f.self, sockettest.Listener(t, "tcp4"), sockettest.Listener(t, "tcp6"))
	f.self = append(f.self, sockettest.Established(t, "tcp4", 2)...)
	f.self = append(f.self, sockettest.Established(t, "tcp6", 1)...)
	cw := sockettest.CloseWait(t, "tcp4", 3, sockettest.PeerData(5))
	cw = append(cw, sockettest.CloseWait(t, "tcp6", 2)...)
	cw = append(cw, sockettest.CloseWait(t, "tcp4", 1, sockettest.ReadToEOF())...)
	f.self = append(f.self, cw...)
	f.tw = sockettest.TimeWait(t, "tcp4")
	f.child = sockettest.StartChild(t, sockettest.Spec{Network: "tcp6", Listeners: 1, Established: 1, CloseWait: 2, PeerData: 2})
	f.closeWait = append(cw, f.child.CloseWait...)
	return f
}

// TestScanRealSockets checks that every socket made, in this process and in
// the child, is reported with its state, addresses, Recv-Q, inode, pid and
// fd, through each source; and that the CLOSE_WAIT sockets reported are
// exactly those made.
func TestScanRealSockets(t *testing.T) {
	f := newFixture(t)
	want := append(slices.Clone(f.self), f.child.Sockets()...)
	for _, src := range sources(t) {
		for _, fds := range fdSources(t) {
			t.Run(src+"/"+fds, func(t *testing.T) {
				testScanRealSockets(t, f, want, src, fds)
			})
		}
	}
}

func testScanRealSockets(t *testing.T, f *fixture, want []*sockettest.Socket, src, fds string) {
	{
		{
			snap := scan(t, src, fds, Query{})
			if snap.Source != src {
				t.Errorf("snapshot source %q, want %q", snap.Source, src)
			}
			got := map[string]seen{}
			for _, s := range snap.Sockets {
				got[key(s.Local, s.Remote)] = fromScan(s)
			}
			for _, w := range append(want, f.tw) {
				g, ok := got[key(w.Local, w.Remote)]
				if !ok {
					t.Errorf("%s not reported", w)
					continue
				}
				if d := cmp.Diff(fromTest(w), g); d != "" {
					t.Errorf("%s (-want +got):\n%s", w, d)
				}
			}

			// Exactly the CLOSE_WAIT sockets made, in this process and the
			// child: nothing else in either holds one.
			var wantCW, gotCW []string
			for _, s := range f.closeWait {
				wantCW = append(wantCW, key(s.Local, s.Remote))
			}
			for _, s := range snap.Sockets {
				if s.State == CloseWait && (s.PID == os.Getpid() || s.PID == f.child.PID) {
					gotCW = append(gotCW, key(s.Local, s.Remote))
				}
			}
			slices.Sort(wantCW)
			slices.Sort(gotCW)
			if d := cmp.Diff(wantCW, gotCW); d != "" {
				t.Errorf("CLOSE_WAIT sockets of this process and the child (-want +got):\n%s", d)
			}

			// The processes carry their state counts.
			var self, child *Process
			for i := range snap.Processes {
				switch snap.Processes[i].PID {
				case os.Getpid():
					self = &snap.Processes[i]
				case f.child.PID:
					child = &snap.Processes[i]
				}
			}
			if self == nil || child == nil {
				t.Fatalf("processes %+v lack this process (%d) or the child (%d)", snap.Processes, os.Getpid(), f.child.PID)
			}
			if got := child.States["CLOSE_WAIT"]; got != 2 {
				t.Errorf("child CLOSE_WAIT count %d, want 2", got)
			}
			if got := self.States["CLOSE_WAIT"]; got != 6 {
				t.Errorf("own CLOSE_WAIT count %d, want 6", got)
			}
		}
	}
}

// TestRecvQCloseWait checks, on real sockets, what the kernel reports as
// Recv-Q in CLOSE_WAIT, which ExplainRecvQ relies on: the unread FIN counts
// one, data unread counts its bytes, a read to EOF leaves 0.
func TestRecvQCloseWait(t *testing.T) {
	finUnread := sockettest.CloseWait(t, "tcp4", 1)[0]
	finRead := sockettest.CloseWait(t, "tcp4", 1, sockettest.ReadToEOF())[0]
	dataUnread := sockettest.CloseWait(t, "tcp6", 1, sockettest.PeerData(5))[0]
	for _, src := range sources(t) {
		t.Run(src, func(t *testing.T) {
			snap := scan(t, src, "", Query{States: States(CloseWait), PIDs: []int{os.Getpid()}})
			byKey := map[string]Socket{}
			for _, s := range snap.Sockets {
				byKey[key(s.Local, s.Remote)] = s
			}
			for _, c := range []struct {
				s    *sockettest.Socket
				want uint32
				says string
			}{{finUnread, 1, "FIN was never read"}, {finRead, 0, "FIN was read"}, {dataUnread, 6, "5 bytes of data unread"}} {
				got, ok := byKey[key(c.s.Local, c.s.Remote)]
				if !ok {
					t.Errorf("%s not reported", c.s)
					continue
				}
				if got.RecvQ != c.want {
					t.Errorf("%s: Recv-Q %d, want %d", c.s, got.RecvQ, c.want)
				}
				if e := ExplainRecvQ(got); !regexp.MustCompile(regexp.QuoteMeta(c.says)).MatchString(e) {
					t.Errorf("ExplainRecvQ = %q, want it to say %q", e, c.says)
				}
			}
		})
	}
}

// TestScanSourcesAgree compares what netlink and /proc report for this
// process's sockets.
func TestScanSourcesAgree(t *testing.T) {
	newFixture(t)
	if !slices.Contains(sources(t), SourceNetlink) {
		t.Skip("netlink unavailable")
	}
	q := Query{PIDs: []int{os.Getpid()}}
	norm := func(snap *Snapshot) []seen {
		var out []seen
		for _, s := range snap.Sockets {
			out = append(out, fromScan(s))
		}
		return out
	}
	nl, pr := norm(scan(t, SourceNetlink, "", q)), norm(scan(t, SourceProc, "", q))
	if d := cmp.Diff(pr, nl); d != "" {
		t.Errorf("sockets (-proc +netlink):\n%s", d)
	}
	if len(nl) < 10 {
		t.Errorf("only %d sockets: the fixture makes more", len(nl))
	}
}

// TestScanFilters runs each filter on the real sockets.
func TestScanFilters(t *testing.T) {
	f := newFixture(t)
	cw4 := f.closeWait[0] // one of 3 to the same 127.0.0.1 listener, Recv-Q 6
	cw6 := f.closeWait[3] // one of 2 to the same ::1 listener
	me, child := os.Getpid(), f.child.PID
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range sources(t) {
		tests := []struct {
			name string
			q    Query
			// check is called on every socket reported; count is how many
			// of the fixture's are wanted.
			check func(Socket) bool
			want  []*sockettest.Socket
		}{
			{"state close-wait, own", Query{States: States(CloseWait), PIDs: []int{me}},
				func(s Socket) bool { return s.State == CloseWait && s.PID == me }, f.closeWait[:6]},
			{"pid child", Query{PIDs: []int{child}},
				func(s Socket) bool { return s.PID == child }, f.child.Sockets()},
			{"port", Query{RemotePorts: []uint16{cw4.Remote.Port()}, PIDs: []int{me}},
				func(s Socket) bool { return s.Remote.Port() == cw4.Remote.Port() }, f.closeWait[:3]},
			{"remote", Query{Remotes: []Endpoint{mustEndpoint(t, cw6.Remote.String())}},
				func(s Socket) bool { return s.Remote == cw6.Remote }, f.closeWait[3:5]},
			{"brokers", Query{Brokers: []Endpoint{mustEndpoint(t, cw6.Remote.String())}, States: States(CloseWait)},
				func(s Socket) bool { return s.Remote == cw6.Remote && s.State == CloseWait }, f.closeWait[3:5]},
			// The child's command line is exactly this test binary and
			// -test.run=^$: no other process on the host has it, not even
			// another package's sockettest child.
			{"process", Query{Process: regexp.MustCompile(`^` + regexp.QuoteMeta(exe) + ` -test\.run=\^\$$`), States: States(CloseWait)},
				func(s Socket) bool { return s.PID == child }, f.child.CloseWait},
		}
		for _, tt := range tests {
			t.Run(src+"/"+tt.name, func(t *testing.T) {
				snap := scan(t, src, "", tt.q)
				got := map[string]bool{}
				for _, s := range snap.Sockets {
					if !tt.check(s) {
						t.Errorf("reported %s %s->%s pid %d, which the filter excludes", s.State, s.Local, s.Remote, s.PID)
					}
					got[key(s.Local, s.Remote)] = true
				}
				for _, w := range tt.want {
					if !got[key(w.Local, w.Remote)] {
						t.Errorf("%s not reported", w)
					}
				}
			})
		}
	}
}

func mustEndpoint(t *testing.T, s string) Endpoint {
	t.Helper()
	e, err := ParseEndpoint(s)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestScanChildInNetNS checks that a process in its own network namespace
// (invisible to the host's dump) is seen with its pid and namespace.
func TestScanChildInNetNS(t *testing.T) {
	c := sockettest.StartChild(t, sockettest.Spec{Network: "tcp4", Listeners: 1, CloseWait: 2, PeerData: 1, NetNS: true})
	host, err := NetNSOf("/proc", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range sources(t) {
		t.Run(src, func(t *testing.T) {
			snap := scan(t, src, "", Query{})
			got := map[string]seen{}
			var ns uint64
			for _, s := range snap.Sockets {
				if s.PID == c.PID {
					got[key(s.Local, s.Remote)] = fromScan(s)
					ns = s.NetNS
				}
			}
			for _, w := range c.Sockets() {
				if d := cmp.Diff(fromTest(w), got[key(w.Local, w.Remote)]); d != "" {
					t.Errorf("%s (-want +got):\n%s", w, d)
				}
			}
			if ns == 0 || ns == host {
				t.Errorf("child's sockets in namespace %d, want its own (host is %d)", ns, host)
			}
			var p *Process
			for i := range snap.Processes {
				if snap.Processes[i].PID == c.PID {
					p = &snap.Processes[i]
				}
			}
			if p == nil || p.NetNS != ns || p.States["CLOSE_WAIT"] != 2 {
				t.Errorf("child process = %+v, want netns %d and 2 CLOSE_WAIT", p, ns)
			}
		})
	}
}

// TestScanRepeatedUsesCache checks that a second scan verifies the sockets
// found by the first instead of walking again.
func TestScanRepeatedUsesCache(t *testing.T) {
	for _, fds := range fdSources(t) {
		t.Run(fds, func(t *testing.T) { testScanRepeatedUsesCache(t, newFixture(t), fds) })
	}
}

func testScanRepeatedUsesCache(t *testing.T, f *fixture, fds string) {
	s := NewScanner("/proc")
	defer s.Close()
	s.Source = SourceProc
	s.FDs = fds
	// Only the fixture's sockets are wanted (by their listeners' ports):
	// CLOSE_WAIT sockets that tests of other packages, run alongside by
	// go test ./..., make between two scans would rightly need a walk.
	q := Query{States: States(CloseWait), PIDs: []int{os.Getpid(), f.child.PID}}
	for _, c := range f.closeWait {
		q.RemotePorts = append(q.RemotePorts, c.Remote.Port())
	}
	first, err := s.Scan(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	checkPasses(t, s, fds)
	second, err := s.Scan(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if s.lastStats.Cached != len(f.closeWait) || s.lastStats.Walked != 0 {
		t.Errorf("second scan: %+v, want %d sockets verified from the cache and no walk", s.lastStats, len(f.closeWait))
	}
	norm := func(snap *Snapshot) []seen {
		var out []seen
		for _, x := range snap.Sockets {
			out = append(out, fromScan(x))
		}
		return out
	}
	if d := cmp.Diff(norm(first), norm(second)); d != "" {
		t.Errorf("second scan differs (-first +second):\n%s", d)
	}

	// A closed socket leaves; its cache entry goes with the walk of its pid.
	gone := f.closeWait[0]
	gone.Close()
	third, err := s.Scan(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range third.Sockets {
		if x.Inode == gone.Inode && x.State == CloseWait {
			t.Errorf("closed socket %s still reported", gone)
		}
	}
	if len(third.Sockets) != len(f.closeWait)-1 {
		t.Errorf("third scan: %d sockets, want %d", len(third.Sockets), len(f.closeWait)-1)
	}
}

// TestScanUnordered: a repeated scan with Unordered reports the same
// sockets as one that sorts, each with its holder, and keeps no sort keys.
func TestScanUnordered(t *testing.T) {
	f := newFixture(t)
	for _, src := range sources(t) {
		t.Run(src, func(t *testing.T) {
			q := Query{States: States(CloseWait, Established, Listen), PIDs: []int{os.Getpid(), f.child.PID}}
			scanWith := func(unordered bool) ([]seen, *Scanner) {
				t.Helper()
				s := NewScanner("/proc")
				defer s.Close()
				s.Source, s.Unordered = src, unordered
				var out []seen
				for range 2 { // the second scan is the repeated one
					snap, err := s.Scan(context.Background(), q)
					if err != nil {
						t.Fatal(err)
					}
					out = out[:0]
					for _, x := range snap.Sockets {
						out = append(out, fromScan(x))
					}
				}
				return out, s
			}
			sorted, _ := scanWith(false)
			got, s := scanWith(true)
			if len(s.sortKeys) != 0 || cap(s.sortKeys) != 0 {
				t.Errorf("an unordered scan kept %d sort keys", cap(s.sortKeys))
			}
			bySeen := func(a, b seen) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) }
			slices.SortFunc(got, bySeen)
			want := slices.Clone(sorted)
			slices.SortFunc(want, bySeen)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("unordered scan (-sorted +unordered):\n%s", d)
			}
			for _, x := range f.closeWait {
				if !slices.Contains(got, fromTest(x)) {
					t.Errorf("CLOSE_WAIT %s missing from the unordered scan", x)
				}
			}
		})
	}
}

// TestScanUnknownPID: a --pid that does not exist is in Missing, said by
// MissingError, and the scan goes on with the others (not a note, nor a
// failure).
func TestScanUnknownPID(t *testing.T) {
	snap := scan(t, SourceProc, "", Query{PIDs: []int{1 << 30, os.Getpid(), 1<<30 + 1, 1 << 30}})
	if d := cmp.Diff([]int{1 << 30, 1<<30 + 1}, snap.Missing); d != "" {
		t.Errorf("missing pids (-want +got):\n%s", d)
	}
	want := fmt.Sprintf("--pid %d names no process (no /proc/%d); --pid %d names no process (no /proc/%d)", 1<<30, 1<<30, 1<<30+1, 1<<30+1)
	if err := snap.MissingError(); err == nil || err.Error() != want {
		t.Errorf("MissingError() = %v, want %q", err, want)
	}
	for _, n := range snap.Notes {
		if strings.Contains(n, "no such process") || strings.Contains(n, "names no process") {
			t.Errorf("note %q: a missing pid is said once, by MissingError", n)
		}
	}
	one := (&Snapshot{Missing: []int{999999}}).MissingError()
	if one == nil || one.Error() != "--pid 999999 names no process (no /proc/999999)" {
		t.Errorf("one missing pid: %v", one)
	}
	if err := (&Snapshot{}).MissingError(); err != nil {
		t.Errorf("no missing pid: %v, want nil", err)
	}
}

// TestScanRepeatedCarriesAge: a repeated netlink scan asks tcp_info on its
// first scan and then every InfoEvery; in between, CLOSE_WAIT ages are the
// last tcp_info scan's plus the time since (on the scanner's clock), a
// CLOSE_WAIT socket new since then has none until the next tcp_info scan,
// and other states report none.
func TestScanRepeatedCarriesAge(t *testing.T) {
	if _, err := DumpNetlink(States(Listen)); err != nil {
		t.Skipf("netlink sock_diag unavailable: %v", err)
	}
	f := newFixture(t)
	t0 := time.Now()
	clock := t0
	s := NewScanner("/proc")
	s.Source = SourceNetlink
	s.Now = func() time.Time { return clock }
	q := Query{States: States(CloseWait, Established), PIDs: []int{os.Getpid(), f.child.PID}}
	byInode := func(snap *Snapshot) map[uint64]Socket {
		m := map[uint64]Socket{}
		for _, x := range snap.Sockets {
			m[x.Inode] = x
		}
		return m
	}
	first, err := s.Scan(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	fm := byInode(first)
	for _, cw := range f.closeWait {
		if x, ok := fm[cw.Inode]; !ok || !x.HasAge {
			t.Fatalf("first scan: CLOSE_WAIT %s: %+v, want it with tcp_info's age", cw, x)
		}
	}

	added := sockettest.CloseWait(t, "tcp4", 1)[0]
	clock = t0.Add(3 * time.Second)
	second, err := s.Scan(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	sm := byInode(second)
	for _, cw := range f.closeWait {
		x := sm[cw.Inode]
		if want := fm[cw.Inode].Age + 3*time.Second; !x.HasAge || x.Age != want {
			t.Errorf("second scan: CLOSE_WAIT %s: age %v (known %v), want %v carried forward", cw, x.Age, x.HasAge, want)
		}
	}
	if x, ok := sm[added.Inode]; !ok || x.State != CloseWait || x.HasAge {
		t.Errorf("second scan: new CLOSE_WAIT %s: %+v (seen %v), want it without an age", added, x, ok)
	}
	for _, x := range second.Sockets {
		if x.State != CloseWait && x.HasAge {
			t.Errorf("second scan: %s socket %s -> %s has age %v, want none", x.State, x.Local, x.Remote, x.Age)
		}
	}

	clock = t0.Add(DefaultInfoEvery + time.Second)
	third, err := s.Scan(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if x := byInode(third)[added.Inode]; !x.HasAge {
		t.Errorf("third scan (tcp_info again): new CLOSE_WAIT %s has no age", added)
	}
}

// TestScanSeveralNetNS checks the join of several namespaces' dumps: two
// children in namespaces of their own and sockets of the test in the
// host's, scanned one-shot (NoCache: each namespace's dump joined into one
// slice from its spill chunks) and repeated. Every socket is there once,
// with its holder and its namespace.
func TestScanSeveralNetNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("entering another network namespace needs root")
	}
	var children []*sockettest.Child
	for i := range 2 {
		children = append(children, sockettest.StartChild(t, sockettest.Spec{Network: "tcp4", CloseWait: 3 + i, Listeners: 1, NetNS: true}))
	}
	mine := sockettest.CloseWait(t, "tcp4", 2)
	host, err := NetNSOf("/proc", 0)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		seen
		ns uint64
	}
	wants := map[uint64]want{} // by inode
	for _, c := range children {
		ns, err := NetNSOf("/proc", c.PID)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.Sockets() {
			wants[w.Inode] = want{fromTest(w), ns}
		}
	}
	for _, w := range mine {
		wants[w.Inode] = want{fromTest(w), host}
	}
	// Second, a query that keeps only child 0's CLOSE_WAIT by their remote
	// port: the others are dumped and must be dropped from the joined slice.
	var ports []uint16
	for _, w := range children[0].Sockets() {
		if w.State == "CLOSE_WAIT" {
			ports = append(ports, w.Remote.Port())
		}
	}
	queries := []Query{{States: States(CloseWait, Listen)}, {States: States(CloseWait, Listen), RemotePorts: ports}}
	for _, noCache := range []bool{true, false} {
		for qi, q := range queries {
			t.Run(fmt.Sprintf("NoCache=%v/query%d", noCache, qi), func(t *testing.T) {
				expect := map[uint64]want{}
				for ino, w := range wants {
					x := Socket{Remote: netip.MustParseAddrPort(w.Remote)}
					x.State, _ = ParseState(w.State)
					if q.matchSocket(&x) {
						expect[ino] = w
					}
				}
				if qi == 1 && len(expect) >= len(wants)-1 {
					t.Fatalf("the port filter keeps %d of %d sockets: it tests nothing", len(expect), len(wants))
				}
				s := NewScanner("/proc")
				s.Source = SourceNetlink
				s.NoCache = noCache
				for round := range 2 {
					snap, err := s.Scan(context.Background(), q)
					if err != nil {
						t.Fatal(err)
					}
					count := map[uint64]int{}
					for _, x := range snap.Sockets {
						count[x.Inode]++
						if !q.matchSocket(&x) {
							t.Errorf("round %d: %s %s, which the query leaves out", round, x.State, key(x.Local, x.Remote))
						}
						if x.Inode != 0 && count[x.Inode] == 2 {
							t.Errorf("round %d: inode %d reported twice", round, x.Inode)
						}
						w, ok := expect[x.Inode]
						if !ok {
							continue
						}
						if d := cmp.Diff(w.seen, fromScan(x)); d != "" || x.NetNS != w.ns {
							t.Errorf("round %d: %s in netns %d, want %d (-want +got):\n%s", round, key(x.Local, x.Remote), x.NetNS, w.ns, d)
						}
					}
					for ino, w := range expect {
						if count[ino] != 1 {
							t.Errorf("round %d: %s -> %s (inode %d) reported %d times, want once", round, w.Local, w.Remote, ino, count[ino])
						}
					}
				}
			})
		}
	}
}

// TestScanRecycle checks the ownership of a repeated scan's sockets: a
// snapshot not given back stays as it was through later scans, and one given
// back (Recycle) is emptied and its memory is the next dump's, which finds
// the same sockets as a scan into new memory.
func TestScanRecycle(t *testing.T) {
	f := newFixture(t)
	for _, src := range sources(t) {
		t.Run(src, func(t *testing.T) {
			s := NewScanner("/proc")
			defer s.Close()
			s.Source = src
			q := Query{States: States(CloseWait, Established), PIDs: []int{os.Getpid(), f.child.PID}}
			for _, c := range f.closeWait {
				q.RemotePorts = append(q.RemotePorts, c.Remote.Port())
			}
			scan := func() *Snapshot {
				t.Helper()
				snap, err := s.Scan(context.Background(), q)
				if err != nil {
					t.Fatal(err)
				}
				return snap
			}
			first := scan()
			held := slices.Clone(first.Sockets)
			second := scan()
			if !slices.Equal(held, first.Sockets) {
				t.Errorf("a later scan altered a snapshot not given back:\nbefore %+v\nafter  %+v", held, first.Sockets)
			}
			if sameMemory(first.Sockets, second.Sockets) {
				t.Error("two scans share sockets without a Recycle")
			}
			mem := second.Sockets
			s.Recycle(second)
			if second.Sockets != nil {
				t.Errorf("Recycle left %d sockets in the snapshot", len(second.Sockets))
			}
			third := scan()
			norm := func(socks []Socket) []seen {
				var out []seen
				for _, x := range socks {
					out = append(out, fromScan(x))
				}
				return out
			}
			if d := cmp.Diff(norm(held), norm(third.Sockets)); d != "" {
				t.Errorf("scan into recycled memory differs (-first +third):\n%s", d)
			}
			if len(third.Sockets) != len(f.closeWait) {
				t.Errorf("third scan: %d sockets, want %d", len(third.Sockets), len(f.closeWait))
			}
			// Only a netlink dump decodes into the recycled memory, and only
			// when it fits there: the host's namespace holds every other
			// process's sockets too, which may have grown since, and a dump
			// that outgrew the memory is joined into new memory. So until a
			// dump fits (bounded), each is recycled for the next.
			if src != SourceNetlink {
				if sameMemory(mem, third.Sockets) {
					t.Errorf("a %s scan reused the recycled sockets", src)
				}
				return
			}
			for try := 1; ; try++ {
				fits := s.lastDumped <= cap(mem)
				if reused := sameMemory(mem, third.Sockets); reused != fits {
					t.Fatalf("scan of %d sockets into recycled room for %d reused it: %v, want %v", s.lastDumped, cap(mem), reused, fits)
				}
				if fits {
					break
				}
				if try == 20 {
					t.Fatalf("in %d scans no dump fitted the memory the one before recycled (the host's sockets grew every time)", try)
				}
				mem = third.Sockets
				s.Recycle(third)
				third = scan()
			}
		})
	}
}
