// Connections: how one is started (resolve, dial, reconnect backoff, as
// ClusterConnectionStates), what closes it (the idle expiry of Selector,
// request timeouts of NetworkClient, the peer), and what closing it does.

package producer

import (
	"context"
	"fmt"
	"math"
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
	closeSetupTimeout                     // client: socket.connection.setup.timeout.ms
)

func (r closeReason) String() string {
	return [...]string{"idle expiry by client", "producer closing", "write failed", "request timeout",
		"bad response", "peer closed (EOF)", "peer reset", "connect failed", "connection setup timeout"}[r]
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

	// While connecting: when the attempt started, the network goroutine's
	// wake-up count then, its setup timeout, and what aborts its dial.
	started      time.Time
	startWake    uint64
	setupTimeout time.Duration
	cancelDial   context.CancelFunc
}

// nodeState is ClusterConnectionStates' per-node backoff.
type nodeState struct {
	lastAttempt time.Time
	backoff     time.Duration
	failures    int
	connected   bool // had a connection before: the next one is a reconnect
	addrIndex   int  // which of the host's addresses to try next
	// setupFailures counts the attempts in a row that ended while still
	// connecting; the next attempt's setup timeout grows with it.
	setupFailures int
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

// checkConnections closes those whose oldest request timed out
// (NetworkClient.handleTimedOutRequests) and at most one idle connection:
// Selector.maybeCloseOldestConnection, at the end of every poll, closes the
// least recently active connection if it has been idle for
// connections.max.idle.ms, and only that one (2.1.1 and 3.9.0 alike). The
// idle deadline is not a reason to wake (step's poll timeout does not
// include it), so with several idle connections the client closes one per
// poll, and the broker's own idle close may come first for the rest.
func (s *sender) checkConnections(now time.Time, soon func(time.Time)) {
	idle := s.cfg().ConnectionsMaxIdle
	var oldest *conn
	for _, c := range s.sortedConns() {
		if c.state == stateConnecting {
			s.checkSetupTimeout(c, now)
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
		}
		// Selector's idle clock runs whether or not a request is in
		// flight: any read or write on the channel resets it.
		if oldest == nil || c.lastActive.Before(oldest.lastActive) {
			oldest = c
		}
	}
	if idle < 0 || oldest == nil || now.Before(oldest.lastActive.Add(idle)) {
		return
	}
	s.p.log.Debug(fmt.Sprintf("About to close the idle connection from %d due to being idle for %d millis",
		oldest.node.ID, now.Sub(oldest.lastActive).Milliseconds()))
	s.closeConn(oldest, closeIdle, nil, now)
}

// checkSetupTimeout closes an attempt that is still connecting after its
// socket.connection.setup.timeout.ms, as NetworkClient.handleTimedOutConnections
// does after each poll: "now - lastConnectAttemptMs > timeout", looked at
// only once the network goroutine has waited for events since the attempt
// began (Java's poll between initiateConnect and the check). A timeout of 0
// or less, which a negative setting gives (setupTimeout), drops every
// attempt not connected by then.
func (s *sender) checkSetupTimeout(c *conn, now time.Time) {
	if s.wakeups > c.startWake && now.Sub(c.started) > c.setupTimeout {
		s.p.log.Info(fmt.Sprintf("Disconnecting from node %d due to socket connection setup timeout. The timeout value is %d ms.",
			c.node.ID, c.setupTimeout.Milliseconds()))
		s.p.stats.connectFailures.Add(1)
		s.nodes[c.node.ID].addrIndex++
		s.closeConn(c, closeSetupTimeout, nil, now)
	}
}

// setupCheckAt is when the network goroutine wakes to check an attempt's
// setup timeout: just past its deadline, and no sooner than
// reconnect.backoff.ms after it began, which is what Java's poll waits for a
// connection underway (DefaultMetadataUpdater.maybeUpdate returns
// reconnectBackoffMs), so that a timeout of 0 or less still gives the
// handshake that long unless another event wakes the goroutine first.
func (s *sender) setupCheckAt(c *conn) time.Time {
	return maxTime(c.started.Add(c.setupTimeout+time.Millisecond), c.started.Add(s.cfg().ReconnectBackoff))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// setupTimeout is the setup timeout of a node's next attempt after failures
// attempts in a row ended while connecting: ClusterConnectionStates'
// ExponentialBackoff(socket.connection.setup.timeout.ms, 2,
// socket.connection.setup.timeout.max.ms, 0.2).
func (s *sender) setupTimeout(failures int) time.Duration {
	cfg := s.cfg()
	ms := expBackoff(cfg.SocketConnectionSetupTimeout.Milliseconds(), cfg.SocketConnectionSetupTimeoutMax.Milliseconds(),
		failures, 0.2, rand.Float64())
	return time.Duration(ms) * time.Millisecond
}

// expBackoff is Kafka's ExponentialBackoff.backoff (clients,
// org.apache.kafka.common.utils.ExponentialBackoff), in milliseconds, with
// base 2 and u a uniform draw in [0, 1) for the jitter:
//
//	initial = min(max, initial); if max <= initial: initial, constant
//	else min(long(random(1-jitter, 1+jitter) * initial * 2^min(attempts, log2(max/max(initial, 1)))), max)
//
// Java validates neither bound, so a negative initial stays negative at
// every attempt (the product of a negative and a power of 2), and a
// setup timeout of 0 or less follows from socket.connection.setup.timeout.ms
// below 0.
func expBackoff(initial, maxV int64, attempts int, jitter, u float64) int64 {
	initial = min(maxV, initial)
	expMax := 0.0
	if maxV > initial {
		expMax = math.Log(float64(maxV)/float64(max(initial, 1))) / math.Log(2)
	}
	if expMax == 0 {
		return initial
	}
	term := float64(initial) * math.Pow(2, math.Min(float64(attempts), expMax))
	factor := 1.0
	if jitter >= 0x1p-1022 { // Java's Double.MIN_NORMAL
		factor = 1 - jitter + 2*jitter*u
	}
	return min(int64(factor*term), maxV) // Java's (long) cast truncates toward 0, as Go's conversion
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
	// The dial has no timeout of its own: the network goroutine enforces
	// socket.connection.setup.timeout.ms (checkSetupTimeout) and cancels it.
	ctx, cancel := context.WithCancel(s.p.ctx)
	c := &conn{
		id:           s.nextConnID,
		node:         n,
		desc:         desc,
		ip:           ip,
		reads:        make(chan struct{}, s.cfg().MaxInFlight+1),
		closed:       make(chan struct{}),
		started:      now,
		startWake:    s.wakeups,
		setupTimeout: s.setupTimeout(ns.setupFailures),
		cancelDial:   cancel,
	}
	s.conns[n.ID] = c
	s.p.log.Debug(fmt.Sprintf("Initiating connection to node %s using address %s", n, desc))
	s.p.wg.Add(1)
	go func() {
		defer s.p.wg.Done()
		defer cancel()
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, fmt.Sprint(n.Port)))
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
	// Java resolves on the Sender thread with no bound of its own; this
	// bound keeps a dead resolver from holding the network goroutine.
	bound := s.cfg().SocketConnectionSetupTimeout
	if bound <= 0 {
		bound = DefaultConfig().SocketConnectionSetupTimeout
	}
	ctx, cancel := context.WithTimeout(s.p.ctx, bound)
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
	if c.cancelDial != nil {
		c.cancelDial()
	}
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
		// "Node N disconnected." is INFO at 3.9.0, DEBUG at 2.1.1; 2.1.1
		// has no line of its own for an idle close.
		nodeDisconnected := s.p.log.Info
		if s.cfg().Model == ModelJava21 {
			nodeDisconnected = s.p.log.Debug
		}
		switch why {
		case closeIdle:
			s.p.stats.closedIdle.Add(1)
			if s.cfg().Model == ModelJava21 {
				s.p.log.Debug(fmt.Sprintf("Node %d disconnected.", c.node.ID), attrs...)
			} else {
				s.p.log.Debug(fmt.Sprintf("Idle connection to node %d disconnected.", c.node.ID), attrs...)
			}
		case closeShutdown:
			s.p.stats.closedOnClose.Add(1)
			s.p.log.Debug(fmt.Sprintf("Closing connection with %s (channel %d)", c.desc, c.node.ID), attrs...)
		case closePeerEOF, closePeerReset:
			s.p.stats.peerCloses.Add(1)
			s.p.log.Debug(fmt.Sprintf("Connection with %s (channel %d) disconnected", c.desc, c.node.ID), attrs...)
			nodeDisconnected(fmt.Sprintf("Node %d disconnected.", c.node.ID))
		default:
			s.p.stats.closedOnError.Add(1)
			s.p.log.Debug(fmt.Sprintf("Connection with %s (channel %d) disconnected", c.desc, c.node.ID), attrs...)
			if why != closeTimeout {
				nodeDisconnected(fmt.Sprintf("Node %d disconnected.", c.node.ID))
			}
		}
	}
	if ns := s.nodes[c.node.ID]; ns != nil {
		ns.lastAttempt = now
		s.backoff(ns)
		// ClusterConnectionStates.disconnected: an attempt that ends while
		// connecting (refused, timed out) lengthens the next one's setup
		// timeout; any other disconnect resets it.
		if c.state == stateConnecting {
			ns.setupFailures++
		} else {
			ns.setupFailures = 0
		}
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
