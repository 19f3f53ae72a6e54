package broker

import (
	"context"
	"errors"
	"fmt"
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
	// ReasonInvalidRequest: the broker refused a request frame (larger than
	// socket.request.max.bytes, an unknown API key, a version it does not
	// serve, a header or body that does not parse) and closed the
	// connection, as Kafka's SocketServer does; kfake never saw the frame.
	ReasonInvalidRequest Reason = "invalid request"
	// ReasonError: kfake dropped the connection (a request it could not
	// handle, a failed write).
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
	// maxRequest and versions are what every request frame is checked
	// against before kfake reads it (frameReader).
	maxRequest int32
	versions   versionTable

	// acceptFailed counts the failed accepts of the episode under way
	// (acceptBackoff), which began at acceptFailingSince; acceptWarned
	// says it was warned of, and acceptLastWarning is the last warning.
	acceptFailed       int
	acceptFailingSince time.Time
	acceptWarned       bool
	acceptLastWarning  time.Time

	mu    sync.Mutex
	conns map[*trackedConn]struct{}
	cnt   Counts
}

// hostPort is a net.Addr for an advertised host that may be a name.
type hostPort string

func (h hostPort) Network() string { return "tcp" }
func (h hostPort) String() string  { return string(h) }

func (l *listener) Addr() net.Addr { return l.advertise }

// Accept returns the next connection, as a trackedConn. kfake's accept loop
// (cluster.go, broker.listen) returns on any error and closes the listener,
// so a broker out of file descriptors for a moment would refuse every
// connection from then on: Accept itself waits out the errors that pass
// (acceptBackoff) and returns only when the listener is closed or fails
// for good.
func (l *listener) Accept() (net.Conn, error) {
	conn, err := l.acceptBackoff()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tc := &trackedConn{Conn: conn, l: l, accepted: now, done: make(chan struct{})}
	tc.frames = &frameReader{r: socketReader{tc}, max: l.maxRequest, versions: l.versions, room: tc}
	tc.last.Store(now.UnixNano())
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	// Kafka's connection id (SocketServer's Processor.connectionId):
	// "local-remote-index". The index tells apart two connections from
	// the same client port, one closed and the next one open, which is
	// what a client's reconnect often is: the log's readers follow each
	// connection by it.
	tc.id = fmt.Sprintf("%s-%s-%d", conn.LocalAddr(), conn.RemoteAddr(), l.cnt.Accepted)
	l.cnt.Accepted++
	l.cnt.Open++
	l.mu.Unlock()
	l.c.log.Info("accepted connection", "node", l.node, "remote", conn.RemoteAddr().String(), "local", conn.LocalAddr().String(), "connection", tc.id)
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
			for _, tc := range l.expired(now, idle) {
				tc.closeFor(ReasonIdle)
			}
		}
	}
}

// expired returns the connections that at now have been idle longer than
// idle: no byte read or written since now-idle.
func (l *listener) expired(now time.Time, idle time.Duration) []*trackedConn {
	var out []*trackedConn
	l.mu.Lock()
	defer l.mu.Unlock()
	for tc := range l.conns {
		if now.Sub(tc.lastActivity()) > idle {
			out = append(out, tc)
		}
	}
	return out
}

// closeIdleNow closes, for idleness, every connection that is idle now, and
// returns how many.
func (l *listener) closeIdleNow() int {
	return l.closeIdleWhere(func(*trackedConn) bool { return true })
}

// closeIdleWhere is closeIdleNow for the connections match keeps.
func (l *listener) closeIdleWhere(match func(*trackedConn) bool) int {
	var idle []*trackedConn
	l.mu.Lock()
	for tc := range l.conns {
		if match(tc) && tc.idleNow() {
			idle = append(idle, tc)
		}
	}
	l.mu.Unlock()
	for _, tc := range idle {
		tc.closeFor(ReasonIdle)
	}
	return len(idle)
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
// network activity on the channel resets. kfake reads it through frames:
// only whole request frames that frameReader accepted.
type trackedConn struct {
	net.Conn
	l        *listener
	id       string // Kafka's connection id, logged with each event
	accepted time.Time
	last     atomic.Int64 // UnixNano of the last read or write of at least one byte

	// frames and pending belong to the one goroutine of kfake that reads
	// the connection: pending is what is left of the accepted frame.
	frames  *frameReader
	pending []byte
	// reading is set while part of a request frame has arrived; inflight
	// counts the requests handed to kfake and not yet answered. Both zero
	// is "idle now" for CloseIdle.
	reading  atomic.Bool
	inflight atomic.Int32

	// roomMu guards the connection's share of the cluster's
	// requestBudget: filling, the frame being read, and handed, the
	// frames kfake has taken and the broker is not done with, oldest
	// first. roomClosed is set by the close, which gives it all back.
	roomMu     sync.Mutex
	filling    *heldFrame
	handed     []handedFrame
	roomClosed bool

	mu     sync.Mutex
	reason Reason // the first reason found wins
	detail string // what went wrong, for the close's log line
	closed bool
	// done is closed once the close has been counted and logged, so that a
	// second closer (Cluster.Close racing kfake's own close) returns only
	// after the first one's: Stats after Close never shows the conn still
	// open, and Close returns with every close in the log.
	done chan struct{}
}

func (c *trackedConn) lastActivity() time.Time { return time.Unix(0, c.last.Load()) }

func (c *trackedConn) touch() { c.last.Store(time.Now().UnixNano()) }

// setReason records why the connection is closing, and what went wrong if
// detail is set; the first reason found wins, a detail fills in a missing
// one.
func (c *trackedConn) setReason(r Reason, detail string) {
	c.mu.Lock()
	if c.reason == "" {
		c.reason = r
	}
	if c.detail == "" {
		c.detail = detail
	}
	c.mu.Unlock()
}

// handedFrame is a frame kfake has taken, holding its room until the broker
// is done with it.
type handedFrame struct {
	f *heldFrame
	// noResponse: kfake writes nothing back (Produce with acks=0), so the
	// frame is given back when kfake asks for the connection's next one,
	// which it does as soon as its loop has taken this one: the loop
	// handles one request at a time, so at most the one it is handling
	// is outside the bound.
	noResponse bool
}

// admit takes a share of the cluster's requestBudget for a frame of size
// bytes (frameRoom).
func (c *trackedConn) admit(size int) error {
	f, err := c.l.c.budget.admit(int64(size))
	if err != nil {
		return err
	}
	c.roomMu.Lock()
	if c.roomClosed {
		c.roomMu.Unlock()
		c.l.c.budget.release(f)
		return errBudgetClosed
	}
	c.filling = f
	c.roomMu.Unlock()
	return nil
}

// grow waits for room for n bytes of the frame being read (frameRoom); the
// connection's close ends the wait. The frame's share is counted as Kafka
// counts a request, without its 4-byte size prefix, so that a frame of
// exactly the bound fits.
func (c *trackedConn) grow(n int) error {
	c.roomMu.Lock()
	f := c.filling
	c.roomMu.Unlock()
	if f == nil {
		return errBudgetClosed
	}
	return c.l.c.budget.reserve(f, min(int64(n), f.size), c.done)
}

// roomNextFrame is called as kfake asks for the connection's next frame:
// kfake took the last one into its loop before asking, so a frame it
// answers with nothing is done with. A frame refused or cut short gives
// its room back too.
func (c *trackedConn) roomNextFrame() {
	c.roomMu.Lock()
	var done []*heldFrame
	if c.filling != nil {
		done = append(done, c.filling)
		c.filling = nil
	}
	kept := c.handed[:0]
	for _, h := range c.handed {
		if h.noResponse {
			done = append(done, h.f)
		} else {
			kept = append(kept, h)
		}
	}
	c.handed = kept
	c.roomMu.Unlock()
	for _, f := range done {
		c.l.c.budget.release(f)
	}
}

// roomHanded moves the frame just read to the frames kfake holds.
func (c *trackedConn) roomHanded(noResponse bool) {
	c.roomMu.Lock()
	if c.filling != nil {
		c.handed = append(c.handed, handedFrame{f: c.filling, noResponse: noResponse})
		c.filling = nil
	}
	c.roomMu.Unlock()
}

// roomAnswered gives back the room of the oldest frame kfake answered:
// it answers a connection's requests one at a time, in order, and those
// before it that need no answer are done with too.
func (c *trackedConn) roomAnswered() {
	c.roomMu.Lock()
	var done []*heldFrame
	for len(c.handed) > 0 {
		h := c.handed[0]
		c.handed = c.handed[1:]
		done = append(done, h.f)
		if !h.noResponse {
			break
		}
	}
	if len(c.handed) == 0 {
		c.handed = nil
	}
	c.roomMu.Unlock()
	for _, f := range done {
		c.l.c.budget.release(f)
	}
}

// roomClose gives back all the connection's room, for good.
func (c *trackedConn) roomClose() {
	c.roomMu.Lock()
	c.roomClosed = true
	var done []*heldFrame
	if c.filling != nil {
		done = append(done, c.filling)
		c.filling = nil
	}
	for _, h := range c.handed {
		done = append(done, h.f)
	}
	c.handed = nil
	c.roomMu.Unlock()
	for _, f := range done {
		c.l.c.budget.release(f)
	}
}

// Read hands kfake the frame frameReader accepted, reading the next one
// when it is used up. A refused frame closes the connection here, before
// kfake sees a byte of it; kfake then sees the read error and lets go.
func (c *trackedConn) Read(b []byte) (int, error) {
	if len(c.pending) == 0 {
		c.pending = nil // let the used frame go while the next one arrives
		c.roomNextFrame()
		frame, h, err := c.frames.next()
		if err == nil && !h.NoResponse {
			// Counted before reading is cleared: idleNow never sees
			// the request neither read nor in flight.
			c.inflight.Add(1)
		}
		c.reading.Store(false)
		if err != nil {
			c.roomNextFrame() // a refused or cut frame holds nothing
			var trunc *truncatedError
			switch {
			case errors.Is(err, ErrRequestTooLarge), errors.Is(err, ErrUnknownAPIKey),
				errors.Is(err, ErrUnsupportedVersion), errors.Is(err, ErrMalformedRequest):
				c.setReason(ReasonInvalidRequest, err.Error())
				_ = c.closeFor(ReasonInvalidRequest)
			case errors.As(err, &trunc):
				c.setReason(ReasonClientClosed, err.Error())
			}
			return 0, err
		}
		c.roomHanded(h.NoResponse)
		c.pending = frame
		if log := c.l.c.log; log.Enabled(context.Background(), slog.LevelDebug) {
			log.Debug("request", "node", c.l.node, "remote", c.Conn.RemoteAddr().String(), "api", h.String(), "correlation", h.Correlation, "bytes", len(frame), "connection", c.id)
		}
	}
	n := copy(b, c.pending)
	c.pending = c.pending[n:]
	if len(c.pending) == 0 {
		// kfake has its own copy: let this one go now, not when kfake
		// asks for the next frame.
		c.pending = nil
	}
	return n, nil
}

// socketReader reads the connection's socket for frameReader: every byte
// read resets the idle clock, and a read error says who closed.
type socketReader struct{ c *trackedConn }

func (s socketReader) Read(b []byte) (int, error) {
	n, err := s.c.Conn.Read(b)
	if n > 0 {
		s.c.reading.Store(true)
		s.c.touch()
	}
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		s.c.setReason(ReasonClientClosed, "")
	case errors.Is(err, syscall.ECONNRESET):
		s.c.setReason(ReasonClientReset, "")
	}
	return n, err
}

// Write is kfake writing one whole response (client_conn.go's write makes
// one Write call per response): it answers the oldest request in flight.
func (c *trackedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.touch()
	}
	if err == nil && c.inflight.Load() > 0 {
		c.inflight.Add(-1)
	}
	if err == nil {
		c.roomAnswered()
	}
	return n, err
}

// idleNow says the connection has no request being read or answered, nor
// one waiting in the socket to be read: the client waits for nothing from
// the broker.
func (c *trackedConn) idleNow() bool {
	return !c.reading.Load() && c.inflight.Load() == 0 && unreadBytes(c.Conn) == 0
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
	reason, detail := c.reason, c.detail
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
	case ReasonInvalidRequest:
		l.cnt.ClosedInvalid++
	default:
		l.cnt.ClosedOther++
	}
	l.mu.Unlock()
	err := c.Conn.Close()
	c.roomClose()
	defer close(c.done)

	now := time.Now()
	level := slog.LevelInfo
	if reason == ReasonError || reason == ReasonInvalidRequest {
		level = slog.LevelWarn
	}
	attrs := []any{
		"node", l.node,
		"remote", c.Conn.RemoteAddr().String(),
		"reason", string(reason),
		"age", now.Sub(c.accepted).Round(time.Millisecond).String(),
		"idle_for", now.Sub(c.lastActivity()).Round(time.Millisecond).String(),
		"connection", c.id,
	}
	if detail != "" {
		attrs = append(attrs, "error", detail)
	}
	l.c.log.Log(context.Background(), level, "closed connection", attrs...)
	return err
}
