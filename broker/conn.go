package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Reason says why a connection to the embedded broker was closed.
type Reason string

// Close reasons, as the broker's log and Stats name them.
const (
	// ReasonIdle: the broker closed it after Idle without a request received
	// or a response sent (the broker's connections.max.idle.ms).
	ReasonIdle Reason = "idle"
	// ReasonClientClosed: the client closed first; the broker read EOF.
	ReasonClientClosed Reason = "client closed (EOF)"
	// ReasonClientReset: the client reset the connection (RST).
	ReasonClientReset Reason = "client reset"
	// ReasonShutdown: the cluster was closed.
	ReasonShutdown Reason = "shutdown"
	// ReasonError: kfake dropped the connection (an unparsable request, a
	// failed write).
	ReasonError Reason = "broker error"
)

// listener wraps one broker's net.Listener: every accepted connection is a
// trackedConn, and a reaper closes the ones idle longer than idle, as Kafka's
// broker-side Selector does with connections.max.idle.ms. Addr returns the
// advertised address, because kfake advertises in its metadata responses
// whatever its listener's Addr says.
type listener struct {
	net.Listener
	c         *Cluster
	node      int32
	advertise net.Addr

	mu    sync.Mutex
	conns map[*trackedConn]struct{}
	cnt   Counts
}

// hostPort is a net.Addr for an advertised host that may be a name.
type hostPort string

func (h hostPort) Network() string { return "tcp" }
func (h hostPort) String() string  { return string(h) }

func (l *listener) Addr() net.Addr { return l.advertise }

func (l *listener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tc := &trackedConn{Conn: conn, l: l, accepted: now, done: make(chan struct{})}
	tc.last.Store(now.UnixNano())
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	l.cnt.Accepted++
	l.cnt.Open++
	l.mu.Unlock()
	l.c.log.Info("accepted connection", "node", l.node, "remote", conn.RemoteAddr().String(), "local", conn.LocalAddr().String())
	return tc, nil
}

// reap closes, every tick, the connections idle longer than idle.
func (l *listener) reap(idle time.Duration, stop <-chan struct{}) {
	tick := idle / 10
	tick = min(max(tick, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			var expired []*trackedConn
			l.mu.Lock()
			for tc := range l.conns {
				if now.Sub(tc.lastActivity()) > idle {
					expired = append(expired, tc)
				}
			}
			l.mu.Unlock()
			for _, tc := range expired {
				tc.closeFor(ReasonIdle)
			}
		}
	}
}

// closeAll closes every open connection for reason (cluster shutdown).
func (l *listener) closeAll(reason Reason) {
	l.mu.Lock()
	all := make([]*trackedConn, 0, len(l.conns))
	for tc := range l.conns {
		all = append(all, tc)
	}
	l.mu.Unlock()
	for _, tc := range all {
		tc.closeFor(reason)
	}
}

func (l *listener) counts() Counts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cnt
}

// trackedConn is a broker-side connection that records when it last received
// request bytes or sent response bytes: Kafka's idle clock, which any
// network activity on the channel resets.
type trackedConn struct {
	net.Conn
	l        *listener
	accepted time.Time
	last     atomic.Int64 // UnixNano of the last read or write of at least one byte

	mu     sync.Mutex
	reason Reason // the first reason found wins
	closed bool
	// done is closed once the close has been counted and logged, so that a
	// second closer (Cluster.Close racing kfake's own close) returns only
	// after the first one's: Stats after Close never shows the conn still
	// open, and Close returns with every close in the log.
	done chan struct{}
}

func (c *trackedConn) lastActivity() time.Time { return time.Unix(0, c.last.Load()) }

func (c *trackedConn) touch() { c.last.Store(time.Now().UnixNano()) }

func (c *trackedConn) setReason(r Reason) {
	c.mu.Lock()
	if c.reason == "" {
		c.reason = r
	}
	c.mu.Unlock()
}

func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.touch()
	}
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		c.setReason(ReasonClientClosed)
	case errors.Is(err, syscall.ECONNRESET):
		c.setReason(ReasonClientReset)
	}
	return n, err
}

func (c *trackedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.touch()
	}
	return n, err
}

// Close is what kfake calls when it is done with the connection: after a
// read error (the client's EOF, or our own close), a failed write, or the
// cluster's shutdown.
func (c *trackedConn) Close() error {
	r := ReasonError
	if c.l.c.closing.Load() {
		r = ReasonShutdown
	}
	return c.closeFor(r)
}

// closeFor closes the connection once, counting and logging it with the
// reason already found (EOF seen by Read) or else r.
func (c *trackedConn) closeFor(r Reason) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.done
		return nil
	}
	c.closed = true
	if c.reason == "" {
		c.reason = r
	}
	reason := c.reason
	c.mu.Unlock()

	// Count before the socket closes: a client that has seen the close
	// then always finds it in Stats.
	l := c.l
	l.mu.Lock()
	delete(l.conns, c)
	l.cnt.Open--
	switch reason {
	case ReasonIdle:
		l.cnt.ClosedIdle++
	case ReasonClientClosed, ReasonClientReset:
		l.cnt.ClosedByClient++
	case ReasonShutdown:
		l.cnt.ClosedShutdown++
	default:
		l.cnt.ClosedOther++
	}
	l.mu.Unlock()
	err := c.Conn.Close()
	defer close(c.done)

	now := time.Now()
	level := slog.LevelInfo
	if reason == ReasonError {
		level = slog.LevelWarn
	}
	l.c.log.Log(context.Background(), level, "closed connection",
		"node", l.node,
		"remote", c.Conn.RemoteAddr().String(),
		"reason", string(reason),
		"age", now.Sub(c.accepted).Round(time.Millisecond).String(),
		"idle_for", now.Sub(c.lastActivity()).Round(time.Millisecond).String())
	return err
}
