package metrics

import (
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/netutil"
)

// The metrics server's bounds (kdiag watch --listen). A scrape is one small
// GET and a page of a few kilobytes, so each bound is far above what a
// scraper needs and far below what lets a client hold the server.
const (
	// MaxConns is the most connections served at once, unless a quarter
	// of the open-file limit is fewer (ConnCap). Prometheus holds one
	// connection per server that scrapes, the kubelet's probe one more;
	// 50 clients scraping in a loop all were answered (issue 30).
	MaxConns = 64
	// ReadTimeout bounds reading a request, its header included: a
	// client that connects and sends nothing, or a byte at a time, is
	// closed after it.
	ReadTimeout = 10 * time.Second
	// WriteTimeout bounds a response, from the end of its request to its
	// last byte: a client that does not read its page is closed after it.
	WriteTimeout = 30 * time.Second
	// IdleTimeout closes a keep-alive connection idle this long: longer
	// than Prometheus's default scrape interval (1m), so its connection is
	// reused between scrapes, as Go's http.Transport keeps its own idle
	// connections 90 s.
	IdleTimeout = 90 * time.Second
)

// ServerOptions are the bounds of a Server; a zero field is the default
// above (MaxConns: ConnCap of kdiag's open-file limit).
type ServerOptions struct {
	MaxConns                               int
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// ConnCap is the most connections a server may hold under an open-file
// limit of nofile: MaxConns, or a quarter of nofile when that is fewer (at
// least 1). The other three quarters are the scanner's: it opens /proc
// directories and netlink sockets by the dozen on every scan, and a scan
// that gets EMFILE misses what it could not read. Before the cap, 236
// idle scrape connections under ulimit -n 256 made every scan fail with
// "open /proc: too many open files" (issue 30).
func ConnCap(nofile uint64) int {
	return int(max(1, min(MaxConns, nofile/4)))
}

// openFileLimit returns the soft RLIMIT_NOFILE (the Go runtime raises it to
// the hard limit at start), 0 when it cannot be read.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return 0
	}
	return uint64(l.Cur)
}

// Server serves HTTP on a listener within bounds: the timeouts of
// ServerOptions, and at most Cap connections at once. At the cap, a new
// connection closes the one idle longest between requests (else the one
// connected longest without sending one), and a connection that goes idle
// while all are held closes the longest idle, so that clients which
// connect and stay idle cannot lock out a scraper: they are dropped as new
// clients come, not only after IdleTimeout.
type Server struct {
	// Cap is the most connections held at once.
	Cap int
	srv *http.Server
	ln  net.Listener

	mu      sync.Mutex
	seq     uint64
	conns   map[net.Conn]*connEntry
	evicted int
}

// connEntry is an open connection's state, and the order in which it
// entered it (the oldest inactive one is closed first).
type connEntry struct {
	state   http.ConnState
	seq     uint64
	closing bool
}

// NewServer returns a Server of h on ln, bounded by o. It takes ln over:
// the connections it accepts are counted against the cap
// (netutil.LimitListener holds Accept at the cap, so the kernel's accept
// queue keeps the rest, not kdiag's fds or memory).
func NewServer(ln net.Listener, h http.Handler, o ServerOptions) *Server {
	if o.MaxConns <= 0 {
		o.MaxConns = MaxConns
		if nofile := openFileLimit(); nofile > 0 {
			o.MaxConns = ConnCap(nofile)
		}
	}
	s := &Server{Cap: o.MaxConns, ln: netutil.LimitListener(ln, o.MaxConns), conns: map[net.Conn]*connEntry{}}
	s.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cmpOr(o.ReadTimeout, ReadTimeout),
		ReadTimeout:       cmpOr(o.ReadTimeout, ReadTimeout),
		WriteTimeout:      cmpOr(o.WriteTimeout, WriteTimeout),
		IdleTimeout:       cmpOr(o.IdleTimeout, IdleTimeout),
		ConnState:         s.connState,
		// An oversized header is refused, not buffered: a scrape's is a
		// few hundred bytes.
		MaxHeaderBytes: 16 << 10,
	}
	return s
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Serve accepts connections until Shutdown; it returns http.ErrServerClosed
// then.
func (s *Server) Serve() error { return s.srv.Serve(s.ln) }

// Shutdown stops accepting, closes the idle connections and waits, until
// ctx ends, for the active ones to finish.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// Evicted returns how many connections were closed to make room at the cap.
func (s *Server) Evicted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evicted
}

// connState tracks the open connections (http.Server.ConnState, called
// before a new connection is served and at each change). net/http closes
// idle connections only after IdleTimeout, and x/net's LimitListener only
// counts; closing the longest-waiting one at the cap is what neither does.
func (s *Server) connState(c net.Conn, state http.ConnState) {
	var victim net.Conn
	s.mu.Lock()
	switch state {
	case http.StateNew:
		s.seq++
		s.conns[c] = &connEntry{state: state, seq: s.seq}
		victim = s.victimLocked(c)
	case http.StateActive:
		if e := s.conns[c]; e != nil {
			e.state = state
		}
	case http.StateIdle:
		if e := s.conns[c]; e != nil {
			s.seq++
			e.state, e.seq = state, s.seq
		}
		// A newcomer found every other connection serving a request:
		// LimitListener now holds Accept until one closes, which an idle
		// connection does only after IdleTimeout. Make room now.
		victim = s.victimLocked(nil)
	case http.StateClosed, http.StateHijacked:
		delete(s.conns, c)
	}
	s.mu.Unlock()
	if victim != nil {
		// Its serving goroutine sees the read fail and ends; the listener
		// gets the slot back at once (LimitListener releases on Close).
		victim.Close()
	}
}

// victimLocked picks, when the connections not yet closing fill the cap,
// one to close, and marks it closing: the longest idle between requests;
// else, for a newcomer (keep), the one connected longest without sending
// a request, other than keep. nil when every one is serving a request (the
// next connection then waits in the kernel's accept queue until one goes
// idle). A connection that went idle (keep nil) never closes one that has
// not yet been served: that is a newcomer the room was made for.
func (s *Server) victimLocked(keep net.Conn) net.Conn {
	open := 0
	var idle, fresh net.Conn
	var idleSeq, freshSeq uint64
	for k, e := range s.conns {
		if e.closing {
			continue
		}
		open++
		switch {
		case e.state == http.StateIdle && (idle == nil || e.seq < idleSeq):
			idle, idleSeq = k, e.seq
		case e.state == http.StateNew && keep != nil && k != keep && (fresh == nil || e.seq < freshSeq):
			fresh, freshSeq = k, e.seq
		}
	}
	victim := idle
	if victim == nil {
		victim = fresh
	}
	if open < s.Cap || victim == nil {
		return nil
	}
	s.conns[victim].closing = true
	s.evicted++
	return victim
}
