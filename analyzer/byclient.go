package analyzer

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"github.com/kdiag/kdiag/netstat"
)

// A broker host's view. On the host of a Kafka broker, the sockets whose
// local port is one the broker listens on (netstat.Query.ListenPorts) are
// the broker's side of its clients' connections, and their remote address
// is the client's host (or pod). Each state there mirrors one on the client:
//
//   - ESTABLISHED: connections the client keeps. A client that creates a
//     producer per request and never closes it shows as ever more of them
//     from one address.
//   - FIN_WAIT_2: connections the broker closed (its idle close,
//     connections.max.idle.ms) that the client has not closed: the client's
//     side is in CLOSE_WAIT. The broker's socket has no file any more and
//     lasts net.ipv4.tcp_fin_timeout (60 s); after that the client may hold
//     its CLOSE_WAIT for ever, which only kdiag on the client's host shows.
//   - CLOSE_WAIT: connections the client closed and the broker has not: rare,
//     a broker that does not read them.
//   - TIME_WAIT: connections the broker closed first, then the client: 60 s
//     of the broker's closes.

// ClientCounts is one client address as a broker host sees it: its
// connections to the listening ports by state, the local end most of them
// go to, and (from a ClientTracker) how many it opened lately.
type ClientCounts struct {
	// Client is the client's address, an IPv4-mapped IPv6 address unmapped.
	Client netip.Addr `json:"client"`
	// Counts are its connections by state, as the broker's side shows them.
	Counts Counts `json:"states"`
	// Listener is the local end (the broker's address and port, as the
	// client dialled it) that most of its connections go to, ListenerConns
	// how many; Listeners counts the distinct local ends it uses.
	Listener      netip.AddrPort `json:"top_listener"`
	ListenerConns int            `json:"top_listener_connections"`
	Listeners     int            `json:"listeners"`
	// Opened counts the connections it opened over the ClientTracker's
	// rate window (new client ports between samples), OpenedPerMinute the
	// same as a rate over the time the window's samples span; HasRate says
	// whether there was such a span (two samples). A one-shot scan has
	// neither.
	Opened          int     `json:"opened,omitempty"`
	OpenedPerMinute float64 `json:"opened_per_minute,omitempty"`
	HasRate         bool    `json:"-"`
}

// Connections returns its connections, every state.
func (c ClientCounts) Connections() int { return c.Counts.Total() }

// listenerCount is how many of a client's connections go to one local end.
// A client uses one or a few of the broker's addresses, so a slice scanned
// in full costs less than a map per client.
type listenerCount struct {
	ap netip.AddrPort
	n  int
}

// clientOf returns the client address of a broker-side socket of a
// listening port (one of ports; any, when ports is empty), and whether it
// is one: listeners, held CLOSE sockets of unknown address, and sockets
// that a listener of their port does not serve (see listenerSet) are not.
func clientOf(s *netstat.Socket, ports []uint16, ls listenerSet) (netip.Addr, bool) {
	if s.State == netstat.Listen || !s.Remote.IsValid() || s.Remote.Port() == 0 {
		return netip.Addr{}, false
	}
	if len(ports) > 0 && !slices.Contains(ports, s.Local.Port()) {
		return netip.Addr{}, false
	}
	if !ls.serves(s) {
		return netip.Addr{}, false
	}
	return s.Remote.Addr().Unmap(), true
}

// listenerSet holds the addresses the listeners of a snapshot listen on,
// by network namespace and port. A connection the kernel accepted has its
// listener's port and an address the listener listens on; a socket of the
// same port on another address is another connection's client end, whose
// ephemeral port happens to be the same number (a port in the ephemeral
// range, 32768-60999 by default; or a TIME_WAIT left from before the
// listener). With no listener of its namespace and port in the snapshot
// (none asked for, or the broker gone while its closed connections linger),
// the port alone decides.
type listenerSet map[listenerKey][]netip.Addr

type listenerKey struct {
	netns uint64
	port  uint16
}

// listenersOf returns the listeners of socks on ports (any port, when
// empty).
func listenersOf(socks []netstat.Socket, ports []uint16) listenerSet {
	var ls listenerSet
	for i := range socks {
		s := &socks[i]
		if s.State != netstat.Listen || len(ports) > 0 && !slices.Contains(ports, s.Local.Port()) {
			continue
		}
		if ls == nil {
			ls = listenerSet{}
		}
		k := listenerKey{s.NetNS, s.Local.Port()}
		ls[k] = append(ls[k], s.Local.Addr().Unmap())
	}
	return ls
}

// serves reports whether a listener of s's port in s's namespace listens on
// s's local address (an unspecified address listens on every one), or
// there is no listener to ask.
func (ls listenerSet) serves(s *netstat.Socket) bool {
	addrs, ok := ls[listenerKey{s.NetNS, s.Local.Port()}]
	if !ok {
		return true
	}
	local := s.Local.Addr().Unmap()
	for _, a := range addrs {
		if a.IsUnspecified() || a == local {
			return true
		}
	}
	return false
}

// clientTally accumulates one sample's ClientCounts of one client.
type clientTally struct {
	counts    Counts
	listeners []listenerCount
}

func (t *clientTally) add(s *netstat.Socket) {
	if int(s.State) < len(t.counts) {
		t.counts[s.State]++
	}
	local := netip.AddrPortFrom(s.Local.Addr().Unmap(), s.Local.Port())
	for i := range t.listeners {
		if t.listeners[i].ap == local {
			t.listeners[i].n++
			return
		}
	}
	t.listeners = append(t.listeners, listenerCount{local, 1})
}

// result returns the tally as the ClientCounts of client.
func (t *clientTally) result(client netip.Addr) ClientCounts {
	c := ClientCounts{Client: client, Counts: t.counts, Listeners: len(t.listeners)}
	for _, l := range t.listeners {
		if l.n > c.ListenerConns || l.n == c.ListenerConns && l.ap.Compare(c.Listener) < 0 {
			c.Listener, c.ListenerConns = l.ap, l.n
		}
	}
	return c
}

// ByClient counts the broker-side sockets of socks, those whose local port
// is one of ports (every socket with a remote when ports is empty) on an
// address a listener of socks listens on (see listenerSet), by client
// address, in SortClients' order. Listeners are left out (they have no
// client), and so are held CLOSE sockets whose address is unknown.
func ByClient(socks []netstat.Socket, ports []uint16) []ClientCounts {
	tallies := map[netip.Addr]*clientTally{}
	ls := listenersOf(socks, ports)
	for i := range socks {
		a, ok := clientOf(&socks[i], ports, ls)
		if !ok {
			continue
		}
		t := tallies[a]
		if t == nil {
			t = &clientTally{}
			tallies[a] = t
		}
		t.add(&socks[i])
	}
	out := make([]ClientCounts, 0, len(tallies))
	for a, t := range tallies {
		out = append(out, t.result(a))
	}
	SortClients(out)
	return out
}

// SortClients orders clients most connections first, then most opened,
// then by address: the client that leaks connections, or opens them
// fastest, comes first.
func SortClients(cs []ClientCounts) {
	slices.SortFunc(cs, func(x, y ClientCounts) int {
		return cmp.Or(cmp.Compare(y.Connections(), x.Connections()), cmp.Compare(y.Opened, x.Opened), x.Client.Compare(y.Client))
	})
}

// DefaultRateWindow is how far back a ClientTracker counts the connections
// each client opened, when not told.
const DefaultRateWindow = time.Minute

// ClientTracker follows a broker host's clients over a series of snapshots
// (kdiag watch --listen-ports): each sample's ClientCounts, and the
// connections each client opened between samples, counted as the Tracker
// counts them toward brokers (openedCounter): a connection (the client's
// port and the listener's) in ESTABLISHED or SYN_RECV that the sample before
// had not. A connection opened and closed between two samples is not seen,
// so the count is a floor (TIME_WAIT, which lasts 60 s, shows the broker's
// closes of such connections). It keeps only the samples of its rate window.
// Not safe for concurrent use.
type ClientTracker struct {
	// Ports are the listening ports whose sockets are the clients'
	// connections (Query.ListenPorts); empty: every socket with a remote.
	Ports []uint16
	// RateWindow is how far back Opened counts; 0 means DefaultRateWindow.
	RateWindow time.Duration

	// times are the sample times kept, from absolute sample base on.
	times []time.Time
	base  int
	// lastDump is the netstat.Snapshot.Dump of the last sample, 0 when
	// unknown: a sample that serves the same dump has the same sockets.
	lastDump uint64
	clients  map[netip.Addr]*clientState
}

// clientState is what a ClientTracker keeps of one client.
type clientState struct {
	cur  clientTally
	last ClientCounts
	// opened counts its connections, by local port << 16 | client port:
	// a client may use one port toward two of the broker's ports.
	opened openedCounter[uint32]
}

// Add ingests one snapshot; snapshots must come in time order (an older one
// is ignored).
func (t *ClientTracker) Add(s *netstat.Snapshot) {
	if n := len(t.times); n > 0 && s.Time.Before(t.times[n-1]) {
		return
	}
	if t.clients == nil {
		t.clients = map[netip.Addr]*clientState{}
	}
	idx := t.base + len(t.times)
	t.times = append(t.times, s.Time)
	if s.Unchanged && s.Dump != 0 && s.Dump == t.lastDump {
		// The same sockets as the last sample: the same counts, nothing
		// opened (no connection changed state, so none was made).
		t.trim()
		return
	}
	t.lastDump = s.Dump
	ls := listenersOf(s.Sockets, t.Ports)
	for i := range s.Sockets {
		sk := &s.Sockets[i]
		a, ok := clientOf(sk, t.Ports, ls)
		if !ok {
			continue
		}
		c := t.clients[a]
		if c == nil {
			c = &clientState{}
			t.clients[a] = c
		}
		c.cur.add(sk)
		if sk.State == netstat.Established || sk.State == netstat.SynRecv {
			c.opened.see(uint32(sk.Local.Port())<<16 | uint32(sk.Remote.Port()))
		}
	}
	for a, c := range t.clients {
		// A client first seen after the first sample had no connection
		// at the sample before (the sockets of every client were there to
		// see): all of its connections are new. Those of the first sample
		// were open before kdiag looked.
		c.opened.count(idx, idx > 0)
		c.last = c.cur.result(a)
		c.cur = clientTally{listeners: c.cur.listeners[:0]}
	}
	t.trim()
}

// window returns the absolute index of the sample the rate counts from:
// the latest at or before RateWindow before the last sample, else the
// first kept.
func (t *ClientTracker) window() int {
	w := cmp.Or(t.RateWindow, DefaultRateWindow)
	cut := t.times[len(t.times)-1].Add(-w)
	i := 0
	for i+1 < len(t.times) && !t.times[i+1].After(cut) {
		i++
	}
	return t.base + i
}

// trim drops the samples before the rate window, and the clients with no
// connection now and none opened within it.
func (t *ClientTracker) trim() {
	from := t.window()
	if drop := from - t.base; drop > 0 {
		t.times = slices.Delete(t.times, 0, drop)
		t.base = from
	}
	for a, c := range t.clients {
		c.opened.trim(from + 1)
		if c.last.Connections() == 0 && len(c.opened.at) == 0 {
			delete(t.clients, a)
		}
	}
}

// Clients returns each client at the last sample, with the connections it
// opened over the rate window, in SortClients' order.
func (t *ClientTracker) Clients() []ClientCounts {
	if len(t.times) == 0 {
		return nil
	}
	from := t.window()
	span := t.times[len(t.times)-1].Sub(t.times[from-t.base])
	out := make([]ClientCounts, 0, len(t.clients))
	for _, c := range t.clients {
		x := c.last
		x.Opened = c.opened.since(from + 1)
		if span > 0 {
			x.OpenedPerMinute, x.HasRate = float64(x.Opened)/span.Minutes(), true
		}
		out = append(out, x)
	}
	SortClients(out)
	return out
}
