//go:build linux

package sockettest

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
)

// Broker is a listener on 127.0.0.1 that stands for a Kafka broker, with
// the connections clients made to it from other loopback addresses: Linux
// routes all of 127.0.0.0/8 to the loopback, so clients bound to 127.0.0.2,
// 127.0.0.3, ... are distinct client hosts as far as the broker's sockets
// tell. Each connection's two ends are this process's, and every helper
// waits (bounded) until the kernel shows both in the state it made:
//
//	b := sockettest.NewBroker(t)
//	cs := b.Connect("127.0.0.2", 3) // 3 ESTABLISHED, both ends
//	b.ServerClose(cs[0])            // the broker's idle close: its end FIN_WAIT2 (no fd), the client's CLOSE_WAIT
//	b.ClientClose(cs[1])            // the client closes: its end FIN_WAIT2 (no fd), the broker's CLOSE_WAIT
//	b.BothClose(cs[2])              // the broker closes, then the client: the broker's end TIME_WAIT
//
// Everything is closed by t.Cleanup; the ends left without a file
// (FIN_WAIT2, TIME_WAIT) live in the kernel for net.ipv4.tcp_fin_timeout
// and 60 s, whatever the test does.
type Broker struct {
	// Listener is the broker's LISTEN socket on 127.0.0.1.
	Listener *Socket
	t        testing.TB
	ln       *net.TCPListener
	mu       sync.Mutex
	conns    []*net.TCPConn
}

// Conn is one connection to a Broker: the client's end and the broker's
// (the accepted one), each as the kernel showed it after the last helper.
type Conn struct {
	Client, Server *Socket
}

// NewBroker listens on 127.0.0.1, on a port the kernel picks.
func NewBroker(t testing.TB) *Broker {
	t.Helper()
	ln, err := newListener("tcp4")
	if err != nil {
		t.Fatalf("sockettest.NewBroker: %v", err)
	}
	b := &Broker{Listener: ln, t: t, ln: ln.conn.(*net.TCPListener)}
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		closeAll(b.conns).Close()
		ln.Close()
	})
	return b
}

// Connect opens n connections to the broker from the loopback address from
// (e.g. "127.0.0.2"), and returns them ESTABLISHED at both ends.
func (b *Broker) Connect(from string, n int) []*Conn {
	b.t.Helper()
	out, err := b.connect(from, n)
	if err != nil {
		b.t.Fatalf("sockettest: Broker.Connect(%q, %d): %v", from, n, err)
	}
	return out
}

func (b *Broker) connect(from string, n int) ([]*Conn, error) {
	src, err := netip.ParseAddr(from)
	if err != nil || !src.Is4() || !src.IsLoopback() {
		return nil, fmt.Errorf("client address %q: want an IPv4 loopback address (127.x.y.z)", from)
	}
	servers := make(map[netip.AddrPort]*net.TCPConn, n)
	accepted := acceptN(b.ln, n, func(c *net.TCPConn) error {
		servers[netip.MustParseAddrPort(c.RemoteAddr().String())] = c
		return nil
	})
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
	clients := make([]*net.TCPConn, 0, n)
	var dialErr error
	for range n {
		c, err := d.Dial("tcp4", b.Listener.Local.String())
		if err != nil {
			dialErr = err
			break
		}
		clients = append(clients, c.(*net.TCPConn))
	}
	if dialErr != nil {
		// The accept goroutine waits for n connections: give it the
		// ones missing, so that it ends.
		for range n - len(clients) {
			if c, err := net.Dial("tcp4", b.Listener.Local.String()); err == nil {
				clients = append(clients, c.(*net.TCPConn))
			}
		}
	}
	aerr := <-accepted
	b.mu.Lock()
	b.conns = append(b.conns, clients...)
	for _, s := range servers {
		b.conns = append(b.conns, s)
	}
	b.mu.Unlock()
	if dialErr != nil || aerr != nil {
		return nil, fmt.Errorf("dial %v, accept %v", dialErr, aerr)
	}
	out := make([]*Conn, 0, n)
	for _, c := range clients {
		cs, err := describeConn("tcp4", c, "ESTABLISHED")
		if err != nil {
			return nil, err
		}
		srv := servers[cs.Local]
		if srv == nil {
			return nil, fmt.Errorf("no accepted end for client %s", cs.Local)
		}
		ss, err := describeConn("tcp4", srv, "ESTABLISHED")
		if err != nil {
			return nil, err
		}
		out = append(out, &Conn{Client: cs, Server: ss})
	}
	return out, nil
}

// ServerClose closes the broker's end, as a broker's idle close does: the
// client's end goes to CLOSE_WAIT (and stays there, the client not closing
// it; Recv-Q 1, the FIN unread), the broker's to FIN_WAIT2 with no file (FD -1, Inode 0: the kernel
// keeps it as a timewait socket for net.ipv4.tcp_fin_timeout). The broker's
// end is half-closed first and closed once the kernel shows it in
// FIN_WAIT2, so that closing it moves it to its fileless FIN_WAIT2 at once
// (tcp_close: tcp_time_wait with substate FIN_WAIT2).
func (b *Broker) ServerClose(c *Conn) {
	b.t.Helper()
	if err := halfClose(c.Server, "FIN_WAIT2", c.Client, "CLOSE_WAIT"); err != nil {
		b.t.Fatalf("sockettest: Broker.ServerClose(%s): %v", c.Server, err)
	}
	gone(c.Server, "FIN_WAIT2")
}

// ClientClose closes the client's end while the broker keeps its own: the
// broker's end goes to CLOSE_WAIT (held by this process, Recv-Q 1), the client's to
// FIN_WAIT2 with no file.
func (b *Broker) ClientClose(c *Conn) {
	b.t.Helper()
	if err := halfClose(c.Client, "FIN_WAIT2", c.Server, "CLOSE_WAIT"); err != nil {
		b.t.Fatalf("sockettest: Broker.ClientClose(%s): %v", c.Client, err)
	}
	gone(c.Client, "FIN_WAIT2")
}

// ClientShutdown is a close in progress, as Java NIO leaves one: the
// broker closes (ServerClose), then the client's end is shut down for
// writing and reaches CLOSE once the broker's end acknowledges its FIN,
// while its fd stays open: a socket in no kernel table that the process
// still holds, until c.Client.Close() releases it. (Java closes a channel
// registered with a Selector this way and releases the fd at the
// selector's next select.)
func (b *Broker) ClientShutdown(c *Conn) {
	b.t.Helper()
	b.ServerClose(c)
	if err := c.Client.conn.(*net.TCPConn).CloseWrite(); err != nil {
		b.t.Fatalf("sockettest: Broker.ClientShutdown(%s): %v", c.Client, err)
	}
	c.Client.State, c.Client.RecvQ = "CLOSE", 0
	if err := waitFDState(c.Client); err != nil {
		b.t.Fatalf("sockettest: Broker.ClientShutdown(%s): %v", c.Client, err)
	}
	c.Server.State = "TIME_WAIT"
}

// BothClose closes the broker's end (ServerClose), then the client's: the
// broker's end, which closed first, goes to TIME_WAIT (no file), for 60 s.
// The client's end is half-closed and closed once the kernel shows it in
// CLOSE, after the broker's end acknowledged its FIN: that
// acknowledgement is sent as the broker's end enters TIME_WAIT.
func (b *Broker) BothClose(c *Conn) {
	b.t.Helper()
	b.ClientShutdown(c)
	if err := c.Client.Close(); err != nil {
		b.t.Fatalf("sockettest: Broker.BothClose(%s): %v", c.Client, err)
	}
	gone(c.Client, "CLOSED")
}

// halfClose shuts s down for writing (a FIN), waits until the kernel shows
// it in state, and peer (if any) in peerState, then closes s's fd.
func halfClose(s *Socket, state string, peer *Socket, peerState string) error {
	if s.conn == nil {
		return fmt.Errorf("%s has no file to close", s)
	}
	if err := s.conn.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	s.State = state
	if err := waitFDState(s); err != nil {
		return err
	}
	if peer != nil {
		peer.State = peerState
		if peerState == "CLOSE_WAIT" {
			peer.RecvQ = 1 // the FIN, which nothing reads
		}
		if err := waitFDState(peer); err != nil {
			return err
		}
	}
	return s.conn.Close()
}

// gone marks s closed: in state (as the kernel names it, "CLOSED" when it
// is in no table at all) with no file.
func gone(s *Socket, state string) {
	s.State, s.FD, s.Inode, s.UID, s.conn = state, -1, 0, 0, nil
}
