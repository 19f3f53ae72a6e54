// Connections: how one is started (resolve, dial, reconnect backoff, as
// ClusterConnectionStates), what closes it (the idle expiry of Selector,
// request timeouts of NetworkClient, the peer), and what closing it does.

package producer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// connState is where a connection is in its setup: dialing, waiting for
// its APIVERSIONS response, or ready for requests.
type connState int

const (
	stateConnecting connState = iota
	stateCheckingAPIVersions
	stateReady
)

// closeReason is why a connection ended.
type closeReason int

const (
	closeIdle          closeReason = iota // client: connections.max.idle.ms
	closeShutdown                         // client: Close
	closeWriteFailed                      // client, after a failed write
	closeTimeout                          // client: request.timeout.ms
	closeProtocol                         // client: a response it cannot use
	closePeerEOF                          // broker closed first: EOF
	closePeerReset                        // broker reset the connection
	closeConnectFailed                    // the connection never came up
)

func (r closeReason) String() string {
	return [...]string{"idle expiry by client", "producer closing", "write failed", "request timeout",
		"bad response", "peer closed (EOF)", "peer reset", "connect failed"}[r]
}

// conn is one connection to a node. Only the network goroutine touches its
// fields, except reads and closed, which its reader goroutine selects on.
type conn struct {
	id         uint64
	node       Node
	desc       string // Java's socketDescription: "localhost/127.0.0.1"
	ip         string
	nc         net.Conn
	state      connState
	versions   map[int16][2]int16 // broker's min and max per API key
	inflight   []*inflight
	lastActive time.Time
	reads      chan struct{} // on-demand: one token per response to read
	closed     chan struct{}
	isClosed   bool
}

// nodeState is ClusterConnectionStates' per-node backoff.
type nodeState struct {
	lastAttempt time.Time
	backoff     time.Duration
	failures    int
	connected   bool // had a connection before: the next one is a reconnect
	addrIndex   int  // which of the host's addresses to try next
}

// disconnectedError is what in-flight requests of a closed connection get;
// it is retriable, as Java's NetworkException.
type disconnectedError struct {
	node   int32
	reason closeReason
	err    error
}

func (e *disconnectedError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("disconnected from node %d (%s): %v", e.node, e.reason, e.err)
	}
	return fmt.Sprintf("disconnected from node %d (%s)", e.node, e.reason)
}

// checkConnections closes idle connections (Selector's IdleExpiryManager)
// and those whose oldest request timed out (NetworkClient).
func (s *sender) checkConnections(now time.Time, soon func(time.Time)) {
	idle := s.cfg().ConnectionsMaxIdle
	for _, c := range s.sortedConns() {
		if c.state == stateConnecting {
			continue
		}
		if len(c.inflight) > 0 {
			deadline := c.inflight[0].sent.Add(s.cfg().RequestTimeout)
			if !now.Before(deadline) {
				s.p.log.Info(fmt.Sprintf("Disconnecting from node %d due to request timeout.", c.node.ID))
				s.closeConn(c, closeTimeout, nil, now)
				continue
			}
			soon(deadline)
			continue
		}
		if idle < 0 {
			continue
		}
		deadline := c.lastActive.Add(idle)
		if !now.Before(deadline) {
			s.p.log.Debug(fmt.Sprintf("About to close the idle connection from %d due to being idle for %d millis",
				c.node.ID, now.Sub(c.lastActive).Milliseconds()))
			s.closeConn(c, closeIdle, nil, now)
			continue
		}
		soon(deadline)
	}
}

func (s *sender) sortedConns() []*conn {
	out := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].node.ID < out[j].node.ID })
	return out
}

func (s *sender) canConnect(id int32, now time.Time) bool {
	if s.stopping {
		return false
	}
	ns := s.nodes[id]
	return ns == nil || !now.Before(ns.lastAttempt.Add(ns.backoff))
}

// connect starts a connection: the address is resolved here, on the network
// goroutine, as ClusterConnectionStates does on the Sender thread; the TCP
// handshake runs in a dialer goroutine that reports back.
func (s *sender) connect(n Node, now time.Time) {
	ns := s.nodes[n.ID]
	if ns == nil {
		ns = &nodeState{}
		s.nodes[n.ID] = ns
	}
	ns.lastAttempt = now
	ip, desc, err := s.resolve(n.Host, ns.addrIndex)
	if err != nil {
		s.p.log.Warn(fmt.Sprintf("Error connecting to node %s", n), "err", err)
		s.backoff(ns)
		s.p.stats.connectFailures.Add(1)
		return
	}
	s.nextConnID++
	c := &conn{
		id:     s.nextConnID,
		node:   n,
		desc:   desc,
		ip:     ip,
		reads:  make(chan struct{}, s.cfg().MaxInFlight+1),
		closed: make(chan struct{}),
	}
	s.conns[n.ID] = c
	s.p.log.Debug(fmt.Sprintf("Initiating connection to node %s using address %s", n, desc))
	s.p.wg.Add(1)
	go func() {
		defer s.p.wg.Done()
		d := net.Dialer{Timeout: s.cfg().SocketConnectionSetupTimeout}
		nc, err := d.DialContext(s.p.ctx, "tcp", net.JoinHostPort(ip, fmt.Sprint(n.Port)))
		select {
		case s.p.events <- event{c: c, kind: evDialed, nc: nc, err: err}:
		case <-c.closed:
			if nc != nil {
				nc.Close()
			}
		}
	}()
}

// resolve returns the first address of host and Java's description of it
// (InetAddress.toString: "localhost/127.0.0.1", "/127.0.0.1" for a literal).
//
// With several addresses it takes the i-th (modulo their number), IPv4
// first as the JVM orders them by default (java.net.preferIPv6Addresses=
// false): after a failed attempt the next one is tried, as
// client.dns.lookup=use_all_dns_ips does.
func (s *sender) resolve(host string, i int) (ip, desc string, err error) {
	if a := net.ParseIP(host); a != nil {
		return a.String(), "/" + a.String(), nil
	}
	ctx, cancel := context.WithTimeout(s.p.ctx, s.cfg().SocketConnectionSetupTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return "", "", err
	}
	if len(addrs) == 0 {
		return "", "", fmt.Errorf("no address for %s", host)
	}
	sort.SliceStable(addrs, func(a, b int) bool { return addrs[a].IP.To4() != nil && addrs[b].IP.To4() == nil })
	a := addrs[i%len(addrs)].IP.String()
	return a, host + "/" + a, nil
}

// backoff is ClusterConnectionStates.updateReconnectBackoff: exponential
// from reconnect.backoff.ms to reconnect.backoff.max.ms, 20% jitter.
func (s *sender) backoff(ns *nodeState) {
	cfg := s.cfg()
	b := cfg.ReconnectBackoff << min(ns.failures, 30)
	if b > cfg.ReconnectBackoffMax || b < 0 {
		b = cfg.ReconnectBackoffMax
	}
	ns.backoff = jitter(b)
	ns.failures++
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// closeConn closes a connection and fails its in-flight requests, which
// retry elsewhere or later, and asks for a metadata update, as
// NetworkClient.processDisconnection does.
func (s *sender) closeConn(c *conn, why closeReason, err error, now time.Time) {
	if c.isClosed {
		return
	}
	c.isClosed = true
	close(c.closed)
	if s.conns[c.node.ID] == c {
		delete(s.conns, c.node.ID)
	}
	if c.nc != nil {
		c.nc.Close()
		s.p.stats.open.Add(-1)
		attrs := []any{"reason", why.String()}
		if err != nil {
			attrs = append(attrs, "err", err.Error())
		}
		switch why {
		case closeIdle:
			s.p.stats.closedIdle.Add(1)
			s.p.log.Debug(fmt.Sprintf("Idle connection to node %d disconnected.", c.node.ID), attrs...)
		case closeShutdown:
			s.p.stats.closedOnClose.Add(1)
			s.p.log.Debug(fmt.Sprintf("Closing connection with %s (channel %d)", c.desc, c.node.ID), attrs...)
		case closePeerEOF, closePeerReset:
			s.p.stats.peerCloses.Add(1)
			s.p.log.Debug(fmt.Sprintf("Connection with %s (channel %d) disconnected", c.desc, c.node.ID), attrs...)
			s.p.log.Info(fmt.Sprintf("Node %d disconnected.", c.node.ID))
		default:
			s.p.stats.closedOnError.Add(1)
			s.p.log.Debug(fmt.Sprintf("Connection with %s (channel %d) disconnected", c.desc, c.node.ID), attrs...)
			if why != closeTimeout {
				s.p.log.Info(fmt.Sprintf("Node %d disconnected.", c.node.ID))
			}
		}
	}
	if ns := s.nodes[c.node.ID]; ns != nil {
		ns.lastAttempt = now
		s.backoff(ns)
	}
	in := c.inflight
	c.inflight = nil
	for _, r := range in {
		s.p.log.Debug(fmt.Sprintf("Cancelled in-flight %s request with correlation id %d due to node %d being disconnected (elapsed time since send: %dms)",
			strings.ToUpper(kmsg.NameForKey(r.req.Key())), r.corrID, c.node.ID, now.Sub(r.sent).Milliseconds()))
		r.done(nil, &disconnectedError{node: c.node.ID, reason: why, err: err})
	}
	if !s.stopping {
		// The disconnect may be the result of stale metadata
		// (DefaultMetadataUpdater.handleServerDisconnect).
		s.mdNeed = true
	}
}
