//go:build linux

// Package sockettest creates real TCP sockets on loopback, in known states,
// for tests and benchmarks of kdiag's socket sources (netstat), the scan and
// watch commands, and the scripts under bench/.
//
// Every helper makes the socket for real, through the kernel, on 127.0.0.1
// ("tcp4") or [::1] ("tcp6"), and waits (bounded) until the kernel reports the
// wanted state, so a test can look the socket up by its 4-tuple and check what
// kdiag says about it against what the helper knows: state, addresses, file
// descriptor, inode, Recv-Q and uid.
//
//	ln := sockettest.Listener(t, "tcp4")                              // LISTEN
//	est := sockettest.Established(t, "tcp6", 3)                       // 3 ESTABLISHED clients
//	cw := sockettest.CloseWait(t, "tcp4", 5, sockettest.PeerData(3))  // CLOSE_WAIT, Recv-Q 4 (3 bytes + FIN)
//	tw := sockettest.TimeWait(t, "tcp4")                              // TIME_WAIT, no fd
//
// The sockets are closed by t.Cleanup. A TIME_WAIT socket has no file and so
// no fd or inode; the kernel keeps it for 60 s whatever the test does.
//
// Sockets held by another process, possibly in its own network namespace, come
// from StartChild, which re-executes the test binary with the Spec in its
// environment; this package's init then makes the sockets in the child before
// any test code runs, so no TestMain is needed:
//
//	c := sockettest.StartChild(t, sockettest.Spec{CloseWait: 3, PeerData: 1, NetNS: true})
//	// c.PID, c.NetNSPath(), c.CloseWait[i].FD, .Inode, .Local, .Remote
//
// This package must not import netstat (netstat's own tests use it), so it
// learns socket states from TCP_INFO on the fd and, for TIME_WAIT, from a
// minimal lookup in /proc/net/tcp{,6} of its own.
package sockettest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stateWait bounds how long a helper waits for the kernel to show a socket in
// the wanted state. On loopback it takes microseconds; the bound only keeps a
// broken kernel or test from hanging.
const stateWait = 10 * time.Second

// Socket describes one socket a helper made, as the kernel reports it.
type Socket struct {
	// Network is "tcp4" or "tcp6".
	Network string `json:"network"`
	// State is the kernel's name for the state the helper waited for
	// ("LISTEN", "ESTABLISHED", "CLOSE_WAIT", "TIME_WAIT"), the spelling of
	// netstat.State.String.
	State string `json:"state"`
	// Local and Remote are the socket's addresses. A listener's Remote is the
	// unspecified address with port 0 (0.0.0.0:0 or [::]:0), which is what
	// inet_diag and /proc/net/tcp report for it.
	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`
	// PID is the process holding the socket (os.Getpid(), or the child's pid
	// for StartChild); FD its descriptor there, -1 when no file holds it
	// (TIME_WAIT).
	PID int `json:"pid"`
	FD  int `json:"fd"`
	// Inode is st_ino of fstat(FD): the number in "socket:[N]" and in the
	// inode column of /proc/net/tcp. 0 for TIME_WAIT.
	Inode uint64 `json:"inode"`
	// UID is the uid the kernel records for the socket: the creating
	// process's effective uid (0 for TIME_WAIT, which has no owner).
	UID uint32 `json:"uid"`
	// RecvQ is the Recv-Q the kernel reports (idiag_rqueue, rx_queue):
	// rcv_nxt - copied_seq, the sequence space received but not read. The
	// peer's FIN takes one sequence number, so a CloseWait socket whose
	// application never read shows PeerData+1 ("1: the FIN was never read"),
	// and 0 with ReadToEOF. 0 for the other helpers.
	RecvQ uint32 `json:"recv_q"`
	// Peer is the other end when this process holds it open (the accepted
	// side of an Established client), nil otherwise.
	Peer *Socket `json:"peer,omitempty"`

	conn io.Closer
}

// Close closes the socket (and nothing else). Cleanup closes it anyway; Close
// lets a test change a socket's state midway, e.g. leave CLOSE_WAIT.
func (s *Socket) Close() error {
	if s.conn == nil {
		return nil
	}
	return s.conn.Close()
}

// String writes "CLOSE_WAIT 127.0.0.1:41000->127.0.0.1:36000 fd 7 inode 123".
func (s *Socket) String() string {
	return fmt.Sprintf("%s %s->%s fd %d inode %d", s.State, s.Local, s.Remote, s.FD, s.Inode)
}

// Option changes what CloseWait makes.
type Option func(*options)

type options struct {
	peerData  int
	readToEOF bool
	keepAlive time.Duration
}

// KeepAlive makes each CloseWait client probe its idle connection every d
// (TCP_KEEPIDLE and TCP_KEEPINTVL d, rounded to seconds, at least 1): once
// the peer's FIN_WAIT_2 side is gone (net.ipv4.tcp_fin_timeout), the next
// probe gets an RST and the socket leaves CLOSE_WAIT for CLOSE, unhashed,
// its fd still held. Without it the clients keep Go's default (15 s); with
// d < 0 keepalive is off.
func KeepAlive(d time.Duration) Option { return func(o *options) { o.keepAlive = d } }

// keepAliveConfig probes every d (rounded to seconds, at least 1).
func keepAliveConfig(d time.Duration) net.KeepAliveConfig {
	k := max(d.Round(time.Second), time.Second)
	return net.KeepAliveConfig{Enable: true, Idle: k, Interval: k, Count: 9}
}

// PeerData makes each CloseWait peer write k bytes before it closes. The
// client's Recv-Q is then k+1: Recv-Q is rcv_nxt - copied_seq
// (net/ipv4/tcp_diag.c tcp_diag_get_info, tcp_ipv4.c get_tcp4_sock), and the
// FIN, unread, takes one sequence number. Without PeerData Recv-Q is 1.
func PeerData(k int) Option { return func(o *options) { o.peerData = k } }

// ReadToEOF makes each CloseWait client read everything, data and FIN (read
// returns EOF), without closing: Recv-Q 0, the case of an application that saw
// the close but leaked the socket.
func ReadToEOF() Option { return func(o *options) { o.readToEOF = true } }

// Listener returns a LISTEN socket on network's loopback ("tcp4": 127.0.0.1,
// "tcp6": [::1]), on a port the kernel picks. It accepts nothing.
func Listener(t testing.TB, network string) *Socket {
	t.Helper()
	s, err := newListener(network)
	if err != nil {
		t.Fatalf("sockettest.Listener(%q): %v", network, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Established returns n client sockets in ESTABLISHED, connected to one
// listener on network's loopback whose accepted ends are held open too (each
// client's Peer). The listener stays open until cleanup.
func Established(t testing.TB, network string, n int) []*Socket {
	t.Helper()
	socks, closer, err := newEstablished(network, n)
	t.Cleanup(func() { closer.Close() })
	if err != nil {
		t.Fatalf("sockettest.Established(%q, %d): %v", network, n, err)
	}
	return socks
}

// CloseWait returns n client sockets in CLOSE_WAIT: each connected to a
// listener on network's loopback that accepts, writes PeerData bytes if asked,
// and closes (Recv-Q: see Socket.RecvQ), a passive close as a Kafka broker's idle timeout makes. It
// waits until the kernel shows every client in CLOSE_WAIT. The listener is
// closed once it has accepted all n; the server ends linger in FIN_WAIT2
// without a file until the kernel reaps them (net.ipv4.tcp_fin_timeout).
func CloseWait(t testing.TB, network string, n int, opts ...Option) []*Socket {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	socks, closer, err := newCloseWait(network, n, o)
	t.Cleanup(func() { closer.Close() })
	if err != nil {
		t.Fatalf("sockettest.CloseWait(%q, %d): %v", network, n, err)
	}
	return socks
}

// TimeWait returns a socket in TIME_WAIT. TIME_WAIT falls to the side that
// closes first (the active closer), so the helper connects a client, closes
// it for writing, lets the accepted end read the FIN and close in turn, and
// waits until the kernel has moved the client's connection to TIME_WAIT. The socket has
// no file any more: FD is -1, Inode and UID are 0. The kernel keeps it 60 s
// (TCP_TIMEWAIT_LEN); nothing can close it sooner.
func TimeWait(t testing.TB, network string) *Socket {
	t.Helper()
	s, err := newTimeWait(network)
	if err != nil {
		t.Fatalf("sockettest.TimeWait(%q): %v", network, err)
	}
	return s
}

// Networks returns the networks the helpers can use here: "tcp4", and
// "tcp6" too unless [::1] cannot be listened on (IPv6 disabled, as in some
// containers), which it logs. Tests loop over it rather than assume ::1.
func Networks(t testing.TB) []string {
	t.Helper()
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Logf("sockettest: no IPv6 loopback (%v): tcp4 only", err)
		return []string{"tcp4"}
	}
	ln.Close()
	return []string{"tcp4", "tcp6"}
}

// loopback returns the listen address of network's loopback.
func loopback(network string) (string, error) {
	switch network {
	case "tcp4":
		return "127.0.0.1:0", nil
	case "tcp6":
		return "[::1]:0", nil
	}
	return "", fmt.Errorf("network %q: want tcp4 or tcp6", network)
}

func newListener(network string) (*Socket, error) {
	addr, err := loopback(network)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	s, err := describe(network, ln.(*net.TCPListener), "LISTEN")
	if err != nil {
		ln.Close()
		return nil, err
	}
	s.conn = ln
	return s, nil
}

// closers closes several things, the way t.Cleanup or the child does.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		errs = append(errs, cs[i].Close())
	}
	return errors.Join(errs...)
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// acceptN accepts n connections from ln and hands each to handle, in a
// goroutine so that clients can connect beyond the accept backlog.
func acceptN(ln net.Listener, n int, handle func(*net.TCPConn) error) <-chan error {
	done := make(chan error, 1)
	go func() {
		for range n {
			c, err := ln.Accept()
			if err != nil {
				done <- err
				return
			}
			if err := handle(c.(*net.TCPConn)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

func newEstablished(network string, n int) ([]*Socket, io.Closer, error) {
	var cs closers
	ln, err := newListener(network)
	if err != nil {
		return nil, cs, err
	}
	cs = append(cs, ln)
	// Server ends arrive in accept order, which need not be connect order:
	// match them to clients by address.
	servers := make(map[netip.AddrPort]*net.TCPConn, n)
	accepted := acceptN(ln.conn.(net.Listener), n, func(c *net.TCPConn) error {
		servers[netip.MustParseAddrPort(c.RemoteAddr().String())] = c
		return nil
	})
	clients := make([]*net.TCPConn, 0, n)
	for range n {
		c, err := net.Dial(network, ln.Local.String())
		if err != nil {
			ln.Close() // ends the accept goroutine
			<-accepted
			return nil, append(cs, closeAll(clients), closeAll(values(servers))), err
		}
		clients = append(clients, c.(*net.TCPConn))
	}
	err = <-accepted
	cs = append(cs, closeAll(clients), closeAll(values(servers)))
	if err != nil {
		return nil, cs, err
	}
	socks := make([]*Socket, 0, n)
	for _, c := range clients {
		s, err := describeConn(network, c, "ESTABLISHED")
		if err != nil {
			return nil, cs, err
		}
		srv := servers[s.Local]
		if srv == nil {
			return nil, cs, fmt.Errorf("no accepted end for client %s", s.Local)
		}
		if s.Peer, err = describeConn(network, srv, "ESTABLISHED"); err != nil {
			return nil, cs, err
		}
		socks = append(socks, s)
	}
	return socks, cs, nil
}

func newCloseWait(network string, n int, o options) ([]*Socket, io.Closer, error) {
	var cs closers
	ln, err := newListener(network)
	if err != nil {
		return nil, cs, err
	}
	data := make([]byte, o.peerData)
	for i := range data {
		data[i] = 'k'
	}
	accepted := acceptN(ln.conn.(net.Listener), n, func(c *net.TCPConn) error {
		defer c.Close()
		if len(data) > 0 {
			if _, err := c.Write(data); err != nil {
				return err
			}
		}
		return nil
	})
	clients := make([]*net.TCPConn, 0, n)
	var dialErr error
	var d net.Dialer
	switch {
	case o.keepAlive > 0:
		d.KeepAliveConfig = keepAliveConfig(o.keepAlive)
	case o.keepAlive < 0: // off (Spec.DeferKeepAlive)
		d.KeepAlive = -1
	}
	for range n {
		c, err := d.Dial(network, ln.Local.String())
		if err != nil {
			dialErr = err
			break
		}
		clients = append(clients, c.(*net.TCPConn))
	}
	if dialErr != nil {
		ln.Close()
	}
	err = <-accepted
	ln.Close()
	cs = append(cs, closeAll(clients))
	if err := errors.Join(dialErr, err); err != nil {
		return nil, cs, err
	}
	socks := make([]*Socket, 0, n)
	for _, c := range clients {
		s, err := describeConn(network, c, "CLOSE_WAIT")
		if err != nil {
			return nil, cs, err
		}
		s.RecvQ = uint32(o.peerData) + 1
		if o.readToEOF {
			c.SetReadDeadline(time.Now().Add(stateWait))
			if _, err := io.Copy(io.Discard, c); err != nil {
				return nil, cs, fmt.Errorf("%s: reading to EOF: %w", s, err)
			}
			c.SetReadDeadline(time.Time{})
			s.RecvQ = 0
		}
		socks = append(socks, s)
	}
	return socks, cs, nil
}

func newTimeWait(network string) (*Socket, error) {
	ln, err := newListener(network)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	accepted := acceptN(ln.conn.(net.Listener), 1, func(c *net.TCPConn) error {
		defer c.Close()
		// Read until the client's FIN, then close: the client, which closed
		// first, goes FIN_WAIT2 -> TIME_WAIT on this side's FIN.
		c.SetReadDeadline(time.Now().Add(stateWait))
		_, err := io.Copy(io.Discard, c)
		return err
	})
	c, err := net.Dial(network, ln.Local.String())
	if err != nil {
		ln.Close()
		<-accepted
		return nil, err
	}
	defer c.Close()
	s, err := describeConn(network, c.(*net.TCPConn), "ESTABLISHED")
	if err != nil {
		<-accepted
		return nil, err
	}
	// Half-close rather than close, so the fd stays to be asked: when the
	// peer's FIN reaches FIN_WAIT2, tcp_fin hands the connection to a new
	// timewait socket (tcp_time_wait) and the fd's socket turns CLOSE. Its
	// CLOSE state on TCP_INFO thus says the TIME_WAIT socket exists, with
	// no need to poll /proc/net/tcp (which is slow on a host with a large
	// table).
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		<-accepted
		return nil, err
	}
	if err := <-accepted; err != nil {
		return nil, err
	}
	s.State = "CLOSE"
	if err := waitFDState(s); err != nil {
		return nil, fmt.Errorf("waiting for TIME_WAIT: %w", err)
	}
	s.State, s.FD, s.Inode, s.UID, s.conn = "TIME_WAIT", -1, 0, 0, nil
	return s, nil
}

func closeAll[C io.Closer](cs []C) io.Closer {
	return closerFunc(func() error {
		var errs []error
		for _, c := range cs {
			errs = append(errs, c.Close())
		}
		return errors.Join(errs...)
	})
}

func values[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// describeConn describes a connected socket and waits until the kernel shows
// it in state.
func describeConn(network string, c *net.TCPConn, state string) (*Socket, error) {
	s, err := describe(network, c, state)
	if err != nil {
		return nil, err
	}
	s.conn = c
	if err := waitFDState(s); err != nil {
		return nil, err
	}
	return s, nil
}

// describe fills a Socket from a listener's or connection's fd.
func describe(network string, sc syscall.Conn, state string) (*Socket, error) {
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	s := &Socket{Network: network, State: state, PID: os.Getpid(), UID: uint32(os.Geteuid())}
	var serr error
	err = rc.Control(func(fd uintptr) {
		s.FD = int(fd)
		var st unix.Stat_t
		if serr = unix.Fstat(int(fd), &st); serr != nil {
			return
		}
		s.Inode = st.Ino
		var sa unix.Sockaddr
		if sa, serr = unix.Getsockname(int(fd)); serr != nil {
			return
		}
		s.Local = sockaddrToAddrPort(sa)
		if state == "LISTEN" {
			s.Remote = netip.AddrPortFrom(unspecified(network), 0)
			return
		}
		if sa, serr = unix.Getpeername(int(fd)); serr != nil {
			return
		}
		s.Remote = sockaddrToAddrPort(sa)
	})
	if err = errors.Join(err, serr); err != nil {
		return nil, err
	}
	return s, nil
}

func unspecified(network string) netip.Addr {
	if network == "tcp6" {
		return netip.IPv6Unspecified()
	}
	return netip.IPv4Unspecified()
}

func sockaddrToAddrPort(sa unix.Sockaddr) netip.AddrPort {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))
	}
	return netip.AddrPort{}
}

// kernelStates names the states of include/net/tcp_states.h that the helpers
// make, by number.
var kernelStates = map[uint8]string{
	unix.BPF_TCP_ESTABLISHED: "ESTABLISHED",
	unix.BPF_TCP_FIN_WAIT2:   "FIN_WAIT2",
	unix.BPF_TCP_TIME_WAIT:   "TIME_WAIT",
	unix.BPF_TCP_CLOSE:       "CLOSE",
	unix.BPF_TCP_CLOSE_WAIT:  "CLOSE_WAIT",
	unix.BPF_TCP_LISTEN:      "LISTEN",
}

// waitFDState polls TCP_INFO's tcpi_state on s.FD until it is s.State. One
// getsockopt per poll per socket keeps this cheap for thousands of sockets.
func waitFDState(s *Socket) error {
	rc, err := s.conn.(syscall.Conn).SyscallConn()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(stateWait)
	for delay := 50 * time.Microsecond; ; delay = min(2*delay, 20*time.Millisecond) {
		var info *unix.TCPInfo
		var gerr error
		if err := rc.Control(func(fd uintptr) {
			info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		}); err != nil {
			return err
		}
		if gerr != nil {
			return fmt.Errorf("getsockopt TCP_INFO on fd %d: %w", s.FD, gerr)
		}
		if kernelStates[info.State] == s.State {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: kernel still shows state %d after %v", s, info.State, stateWait)
		}
		time.Sleep(delay)
	}
}
