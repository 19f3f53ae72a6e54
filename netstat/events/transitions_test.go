//go:build linux

package events

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"

	"github.com/kdiag/kdiag/internal/sockettest"
)

// openTransitions returns a Counter that records transitions. It skips
// where Open does (no privilege, no BPF) and where the kernel has no BPF
// ring buffer (before 5.8); on a kernel that has one, a Counter without
// transitions (the verifier refused the program) fails the test, and so
// does one without IPv6 addresses where AF_INET6 sockets can be made.
func openTransitions(t *testing.T, remotePorts ...uint16) *Counter {
	t.Helper()
	c := open(t, remotePorts...)
	if c.noTransitions != nil {
		if err := features.HaveMapType(ebpf.RingBuf); err != nil {
			t.Skipf("no BPF ring buffer here (%v): %v", err, c.noTransitions)
		}
		t.Fatalf("the kernel has BPF ring buffers, yet: %v", c.noTransitions)
	}
	if err := c.IPv6(); err != nil {
		if fd, serr := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM, 0); serr == nil {
			unix.Close(fd)
			t.Fatalf("AF_INET6 sockets work here, yet: %v", err)
		}
		t.Logf("no AF_INET6 sockets here: %v", err)
	}
	return c
}

// collector gathers what a Counter's Transitions return.
type collector struct {
	t   *testing.T
	c   *Counter
	got []Transition
}

// until drains the Counter every 10 ms until done holds of everything
// gathered so far, failing the test after d: the records are in the ring
// by the time the state change that made them returns, so d only bounds a
// broken program.
func (k *collector) until(d time.Duration, what string, done func([]Transition) bool) {
	k.t.Helper()
	deadline := time.Now().Add(d)
	for {
		tr, err := k.c.Transitions()
		if err != nil {
			k.t.Fatalf("Transitions: %v", err)
		}
		k.got = append(k.got, tr...)
		if done(k.got) {
			return
		}
		if time.Now().After(deadline) {
			dropped, _ := k.c.Dropped()
			k.t.Fatalf("no %s after %v (%d dropped); got:\n%s", what, d, dropped, list(k.got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func list(ts []Transition) string {
	var s string
	for _, t := range ts {
		s += fmt.Sprintf("  %+v\n", t)
	}
	return s
}

// of returns the transitions in ts from old to nw that match.
func of(ts []Transition, old, nw uint8, match func(Transition) bool) []Transition {
	var out []Transition
	for _, t := range ts {
		if t.Old == old && t.New == nw && match(t) {
			out = append(out, t)
		}
	}
	return out
}

func family(network string) uint8 {
	if network == "tcp6" {
		return AFInet6
	}
	return AFInet
}

func cookie(t *testing.T, fd int) uint64 {
	t.Helper()
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		t.Fatalf("SO_COOKIE on fd %d: %v", fd, err)
	}
	return c
}

// TestTransitionsOfRealCloseWait makes real CLOSE_WAIT sockets on
// loopback and checks that each one's ESTABLISHED -> CLOSE_WAIT arrives
// once, with its 4-tuple, its family and a time between before and after;
// then closes them: the closes of sockets whose peer's data is read or
// none was sent go to LAST_ACK and must not be reported, the closes with
// unread data reset the connection (tcp_close: CLOSE_WAIT -> CLOSE) and
// must be, with the socket's Sock and cookie and their time. Other
// sockets of the host may add transitions; only this test's are judged.
func TestTransitionsOfRealCloseWait(t *testing.T) {
	c := openTransitions(t)
	k := &collector{t: t, c: c}
	before := time.Now()
	var plain, unread []*sockettest.Socket
	for _, nw := range sockettest.Networks(t) {
		plain = append(plain, sockettest.CloseWait(t, nw, 2)...)
		plain = append(plain, sockettest.CloseWait(t, nw, 1, sockettest.PeerData(5), sockettest.ReadToEOF())...)
		unread = append(unread, sockettest.CloseWait(t, nw, 2, sockettest.PeerData(3))...)
	}
	after := time.Now()
	all := append(slices.Clone(plain), unread...)

	sameTuple := func(s *sockettest.Socket) func(Transition) bool {
		return func(tr Transition) bool { return tr.Local == s.Local && tr.Remote == s.Remote }
	}
	k.until(5*time.Second, "ESTABLISHED -> CLOSE_WAIT of every socket", func(got []Transition) bool {
		for _, s := range all {
			if len(of(got, tcpEstablished, tcpCloseWait, sameTuple(s))) == 0 {
				return false
			}
		}
		return true
	})
	sock := map[*sockettest.Socket]uint64{}
	seen := map[uint64]*sockettest.Socket{}
	for _, s := range all {
		cw := of(k.got, tcpEstablished, tcpCloseWait, sameTuple(s))
		if len(cw) != 1 {
			t.Errorf("%v: %d ESTABLISHED -> CLOSE_WAIT, want 1:\n%s", s, len(cw), list(cw))
			continue
		}
		tr := cw[0]
		if tr.Family != family(s.Network) {
			t.Errorf("%v: family %d, want %d", s, tr.Family, family(s.Network))
		}
		if tr.At.Before(before) || tr.At.After(after) {
			t.Errorf("%v: at %v, not between %v and %v", s, tr.At, before, after)
		}
		if tr.Sock == 0 || seen[tr.Sock] != nil {
			t.Errorf("%v: Sock %#x, the same as %v's", s, tr.Sock, seen[tr.Sock])
		}
		sock[s], seen[tr.Sock] = tr.Sock, s
	}
	if t.Failed() {
		t.FailNow()
	}

	cookies := map[*sockettest.Socket]uint64{}
	for _, s := range unread {
		cookies[s] = cookie(t, s.FD)
	}
	mid := time.Now()
	// The plain closes first: had one been recorded, its record would be
	// in the ring before the resets'.
	for _, s := range append(slices.Clone(plain), unread...) {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	end := time.Now()
	k.until(5*time.Second, "CLOSE_WAIT -> CLOSE of every socket closed with unread data", func(got []Transition) bool {
		for _, s := range unread {
			if len(of(got, tcpCloseWait, tcpClose, func(tr Transition) bool { return tr.Sock == sock[s] })) == 0 {
				return false
			}
		}
		return true
	})
	for _, s := range plain {
		for _, tr := range k.got {
			if tr.Sock == sock[s] && tr.Old == tcpCloseWait {
				t.Errorf("%v, closed with nothing unread (CLOSE_WAIT -> LAST_ACK): reported %+v", s, tr)
			}
		}
	}
	for _, s := range unread {
		cl := of(k.got, tcpCloseWait, tcpClose, func(tr Transition) bool { return tr.Sock == sock[s] })
		if len(cl) != 1 {
			t.Errorf("%v: %d CLOSE_WAIT -> CLOSE, want 1:\n%s", s, len(cl), list(cl))
			continue
		}
		tr := cl[0]
		// The kernel has released the local port when the tracepoint
		// fires on the way to CLOSE (see Transition.Local).
		want := Transition{Family: family(s.Network), Local: netip.AddrPortFrom(s.Local.Addr(), 0), Remote: s.Remote,
			Old: tcpCloseWait, New: tcpClose, At: tr.At, Sock: sock[s], Cookie: cookies[s]}
		if tr != want {
			t.Errorf("%v: got %+v\nwant %+v", s, tr, want)
		}
		if tr.At.Before(mid) || tr.At.After(end) {
			t.Errorf("%v: reset at %v, not between %v and %v", s, tr.At, mid, end)
		}
	}
}

// closingServer listens on network's loopback and closes each connection
// it accepts, after writing data: its clients go to CLOSE_WAIT, with data
// unread. It stops at cleanup.
func closingServer(t testing.TB, network string, data []byte) netip.AddrPort {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "tcp6" {
		addr = "[::1]:0"
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go serveClosing(ln, data)
	return netip.MustParseAddrPort(ln.Addr().String())
}

func serveClosing(ln net.Listener, data []byte) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Write(data)
		c.Close()
	}
}

// dialCloseWait connects n clients to addr and waits (bounded) until the
// kernel shows each in CLOSE_WAIT. They are closed at cleanup.
func dialCloseWait(t testing.TB, d *net.Dialer, addr netip.AddrPort, n int) []*net.TCPConn {
	t.Helper()
	conns, err := dialCloseWaitErr(d, addr, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return conns
}

func dialCloseWaitErr(d *net.Dialer, addr netip.AddrPort, n int) ([]*net.TCPConn, error) {
	var conns []*net.TCPConn
	for range n {
		c, err := d.Dial("tcp", addr.String())
		if err != nil {
			return conns, err
		}
		conns = append(conns, c.(*net.TCPConn))
	}
	for _, c := range conns {
		if err := waitState(c, tcpCloseWait, 10*time.Second); err != nil {
			return conns, err
		}
	}
	return conns, nil
}

// waitState polls TCP_INFO until c's socket is in state, for at most d.
func waitState(c *net.TCPConn, state uint8, d time.Duration) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	for {
		var info *unix.TCPInfo
		var gerr error
		if err := rc.Control(func(fd uintptr) {
			info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		}); err != nil {
			return err
		}
		if gerr != nil {
			return gerr
		}
		if info.State == state {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v -> %v: state %d after %v, want %d", c.LocalAddr(), c.RemoteAddr(), info.State, d, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func addrPort(a net.Addr) netip.AddrPort { return netip.MustParseAddrPort(a.String()) }

// TestTransitionsFilterRemotePorts checks that a Counter opened with a
// remote port records the transitions of sockets to that port and no
// others, into CLOSE_WAIT and out of it alike: every transition it
// returns, from anywhere on the host, is to that port.
func TestTransitionsFilterRemotePorts(t *testing.T) {
	data := []byte("unread")
	want := closingServer(t, "tcp4", data)
	others := []netip.AddrPort{closingServer(t, "tcp4", data)}
	if slices.Contains(sockettest.Networks(t), "tcp6") {
		others = append(others, closingServer(t, "tcp6", data))
	}
	c := openTransitions(t, want.Port())
	k := &collector{t: t, c: c}
	var d net.Dialer
	wanted := dialCloseWait(t, &d, want, 3)
	var other []*net.TCPConn
	for _, o := range others {
		other = append(other, dialCloseWait(t, &d, o, 2)...)
	}
	for _, cn := range append(slices.Clone(other), wanted...) {
		cn.Close() // data unread: CLOSE_WAIT -> CLOSE
	}
	k.until(5*time.Second, "both transitions of every socket to the port", func(got []Transition) bool {
		for _, cn := range wanted {
			cw := of(got, tcpEstablished, tcpCloseWait, func(tr Transition) bool {
				return tr.Local == addrPort(cn.LocalAddr()) && tr.Remote == want
			})
			if len(cw) == 0 || len(of(got, tcpCloseWait, tcpClose, func(tr Transition) bool { return tr.Sock == cw[0].Sock })) == 0 {
				return false
			}
		}
		return true
	})
	for _, tr := range k.got {
		if tr.Remote.Port() != want.Port() {
			t.Errorf("filtered on port %d, got %+v", want.Port(), tr)
		}
	}
	if n := len(k.got); n != 2*len(wanted) {
		t.Errorf("%d transitions, want %d (two of each socket to port %d):\n%s", n, 2*len(wanted), want.Port(), list(k.got))
	}
}

// TestTransitionsOverflowCounted fills a small ring without draining it:
// what does not fit is counted by Dropped, exactly, and what fits is
// returned whole.
func TestTransitionsOverflowCounted(t *testing.T) {
	defer func(n uint32) { ringSize = n }(ringSize)
	ringSize = 4096 // a page: 46 records
	capacity := int(ringSize) / (recSize + 8)
	srv := closingServer(t, "tcp4", nil)
	c := openTransitions(t, srv.Port())
	n := capacity + 20
	var d net.Dialer
	dialCloseWait(t, &d, srv, n)
	got, err := c.Transitions()
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := c.Dropped()
	if err != nil {
		t.Fatal(err)
	}
	// Only this test's sockets are to srv's port: n ESTABLISHED ->
	// CLOSE_WAIT in all.
	if len(got) != capacity || int(dropped) != n-capacity {
		t.Errorf("%d transitions and %d dropped, want %d and %d", len(got), dropped, capacity, n-capacity)
	}
	// The ring has room again.
	more := dialCloseWait(t, &d, srv, 1)
	k := &collector{t: t, c: c}
	k.until(5*time.Second, "a transition once drained", func(got []Transition) bool {
		return len(of(got, tcpEstablished, tcpCloseWait, func(tr Transition) bool {
			return tr.Local == addrPort(more[0].LocalAddr())
		})) == 1
	})
	if d2, _ := c.Dropped(); d2 != dropped {
		t.Errorf("Dropped went %d -> %d with room in the ring", dropped, d2)
	}
}

// TestCookieFromDump checks what Transition.Cookie promises: a socket that
// an inet_diag dump has listed (here ss -e, which prints idiag_cookie as
// "sk:HEX") carries that cookie on its CLOSE_WAIT -> CLOSE, though nothing
// asked for it with SO_COOKIE.
func TestCookieFromDump(t *testing.T) {
	ss, err := exec.LookPath("ss")
	if err != nil {
		t.Skipf("needs ss (iproute2): %v", err)
	}
	c := openTransitions(t)
	k := &collector{t: t, c: c}
	s := sockettest.CloseWait(t, "tcp4", 1, sockettest.PeerData(1))[0]
	out, err := exec.Command(ss, "-tane", "dst", s.Remote.String(), "src", s.Local.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("ss: %v\n%s", err, out)
	}
	var dumped uint64
	for _, f := range strings.Fields(string(out)) {
		if h, ok := strings.CutPrefix(f, "sk:"); ok {
			if dumped, err = strconv.ParseUint(h, 16, 64); err != nil {
				t.Fatalf("ss: %q: %v", f, err)
			}
		}
	}
	if dumped == 0 {
		t.Fatalf("no sk: cookie for %v in ss's output:\n%s", s, out)
	}
	s.Close() // one byte unread: a reset
	var cl []Transition
	k.until(5*time.Second, "the reset", func(got []Transition) bool {
		cl = of(got, tcpCloseWait, tcpClose, func(tr Transition) bool { return tr.Remote == s.Remote && tr.Local.Addr() == s.Local.Addr() })
		return len(cl) > 0
	})
	if len(cl) != 1 || cl[0].Cookie != dumped {
		t.Errorf("ss listed %v with cookie %d; its resets:\n%s", s, dumped, list(cl))
	}
}
