// Requests and responses on a connection: the events the dialer and reader
// goroutines hand to the network goroutine, the reader (poll or on-demand:
// where a FIN is or is not seen), and writing a request.

package producer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// inflight is a request waiting for its response.
type inflight struct {
	corrID int32
	req    kmsg.Request
	sent   time.Time
	done   func(kmsg.Response, error)
}

// eventKind says what an event reports: a dial's result, a response frame,
// or a read error (the peer's FIN or reset among them).
type eventKind int

const (
	evDialed eventKind = iota
	evFrame
	evReadErr
)

// event is what dialer and reader goroutines tell the network goroutine.
type event struct {
	c     *conn
	kind  eventKind
	nc    net.Conn
	frame []byte
	err   error
}

func (s *sender) handle(ev event) {
	c := ev.c
	now := time.Now()
	if c.isClosed {
		if ev.nc != nil {
			ev.nc.Close()
		}
		return
	}
	switch ev.kind {
	case evDialed:
		if ev.err != nil {
			s.p.log.Info(fmt.Sprintf("Node %d disconnected.", c.node.ID))
			s.p.log.Warn(fmt.Sprintf("Connection to node %d (%s:%d) could not be established. Node may not be available.",
				c.node.ID, c.desc, c.node.Port), "err", ev.err)
			s.p.stats.connectFailures.Add(1)
			s.nodes[c.node.ID].addrIndex++
			s.closeConn(c, closeConnectFailed, ev.err, now)
			return
		}
		c.nc = ev.nc
		c.state = stateCheckingAPIVersions
		c.lastActive = now
		s.p.stats.opened.Add(1)
		s.p.stats.open.Add(1)
		ns := s.nodes[c.node.ID]
		ns.setupFailures = 0 // ClusterConnectionStates.checkingApiVersions resets the setup timeout
		if ns.connected {
			s.p.stats.reconnects.Add(1)
		} else {
			ns.connected = true
		}
		s.p.log.Debug(fmt.Sprintf("Completed connection to node %d. Fetching API versions.", c.node.ID))
		s.p.wg.Add(1)
		go s.reader(c, ev.nc)
		s.p.log.Debug(fmt.Sprintf("Initiating API versions fetch from node %d.", c.node.ID))
		s.apiVersions(c, min(modelVersions[s.cfg().Model][keyAPIVersions], (&kmsg.ApiVersionsRequest{}).MaxVersion()), now)
	case evFrame:
		if len(c.inflight) == 0 {
			s.closeConn(c, closeProtocol, errors.New("response without a request"), now)
			return
		}
		in := c.inflight[0]
		c.inflight = c.inflight[1:]
		c.lastActive = now
		resp, err := parseResponse(ev.frame, in.corrID, in.req)
		if err != nil {
			s.closeConn(c, closeProtocol, err, now)
			in.done(nil, &disconnectedError{node: c.node.ID, reason: closeProtocol, err: err})
			return
		}
		in.done(resp, nil)
	case evReadErr:
		reason := closeProtocol
		switch {
		case errors.Is(ev.err, io.EOF), errors.Is(ev.err, io.ErrUnexpectedEOF):
			reason = closePeerEOF
		case errors.Is(ev.err, syscall.ECONNRESET), errors.Is(ev.err, syscall.EPIPE):
			reason = closePeerReset
		}
		s.closeConn(c, reason, ev.err, now)
	}
}

// reader reads responses from one connection. With the poll reader it reads
// all the time, so a FIN is seen as soon as it arrives (Java's Selector).
// With on-demand it reads only when the network goroutine has sent a
// request (a token in c.reads): a FIN on an idle connection stays unread and
// the socket in CLOSE_WAIT.
func (s *sender) reader(c *conn, nc net.Conn) {
	defer s.p.wg.Done()
	onDemand := s.cfg().Reader == ReaderOnDemand
	for {
		if onDemand {
			select {
			case <-c.reads:
			case <-c.closed:
				return
			}
		}
		frame, err := readFrame(nc)
		ev := event{c: c, kind: evFrame, frame: frame}
		if err != nil {
			ev = event{c: c, kind: evReadErr, err: err}
		}
		// Blocks while the network goroutine is busy (a slow callback):
		// the FIN waits here, unprocessed, and the socket is not closed.
		select {
		case s.p.events <- ev:
		case <-c.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

// request writes req and, when it succeeds, waits for its response.
func (s *sender) request(c *conn, req kmsg.Request, now time.Time, done func(kmsg.Response, error)) {
	corr := s.corr
	if !s.write(c, req, now) {
		done(nil, &disconnectedError{node: c.node.ID, reason: closeWriteFailed})
		return
	}
	c.inflight = append(c.inflight, &inflight{corrID: corr, req: req, sent: now, done: done})
	if s.cfg().Reader == ReaderOnDemand {
		c.reads <- struct{}{}
	}
}

// write frames and writes one request (size, RequestHeader v1 or v2 by
// kmsg.RequestFormatter, body) with the next correlation ID. On failure it
// closes the connection.
func (s *sender) write(c *conn, req kmsg.Request, now time.Time) bool {
	corr := s.corr
	s.corr++
	if s.corr < 0 {
		s.corr = 0
	}
	buf := s.p.formatter.AppendRequest(nil, req, corr)
	_ = c.nc.SetWriteDeadline(now.Add(s.cfg().RequestTimeout))
	if _, err := c.nc.Write(buf); err != nil {
		s.closeConn(c, closeWriteFailed, err, now)
		return false
	}
	c.lastActive = now
	return true
}
