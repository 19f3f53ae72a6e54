// Each connection's timeline, from both sides: the broker's log (opened,
// requests, who closed it after how long idle) and the client's socket as
// the samples saw it (ESTABLISHED, CLOSE_WAIT for how long with what
// Recv-Q, CLOSE once keepalive reset it, gone).

package repro

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/netstat"
)

// What the client did with a connection the broker closed (Conn.Outcome).
const (
	// OutcomeClosedAtOnce: the client closed its socket within AtOnce of
	// the broker's FIN.
	OutcomeClosedAtOnce = "closed at once"
	// OutcomeClosedLater: it held the socket in CLOSE_WAIT for AtOnce or
	// longer, then closed it.
	OutcomeClosedLater = "held CLOSE_WAIT, then closed"
	// OutcomeHeldCloseWait: the socket was in CLOSE_WAIT to the end.
	OutcomeHeldCloseWait = "held CLOSE_WAIT to the end"
	// OutcomeHeldClose: the client's keepalive probe met no socket on the
	// broker's side and drew a reset: the kernel closed the connection
	// (state CLOSE), but the client still holds its file descriptor.
	OutcomeHeldClose = "held CLOSE after keepalive"
	// OutcomeUnseen: no sample saw the client's socket after the close
	// (it was gone, or never attributed to the command's processes).
	OutcomeUnseen = "not seen after the close"
)

// Conn is one connection to the embedded cluster, from both sides. Times
// are milliseconds since the command started; -1 is never.
type Conn struct {
	ID     int    `json:"id"`
	Node   int32  `json:"node"`
	Broker string `json:"broker"`
	// Client is the client's end, its local address.
	Client string `json:"client"`
	// PID is the process a sample saw holding it, 0 when none did.
	PID      int   `json:"pid,omitempty"`
	OpenedMS int64 `json:"opened_ms"`
	// Requests counts the requests the broker read on it.
	Requests      int   `json:"requests"`
	LastRequestMS int64 `json:"last_request_ms"`
	// ClosedMS is when the broker's side closed, -1 if open at the end;
	// ClosedBy says who closed first: "broker" (its idle close), "client",
	// "stopped" (the client, as kdiag stopped the command at the end),
	// "kdiag" (the cluster stopped at the end), or the broker's reason for
	// anything else. IdleMS is how long it had carried nothing then.
	ClosedMS int64  `json:"closed_ms"`
	ClosedBy string `json:"closed_by,omitempty"`
	IdleMS   int64  `json:"idle_ms,omitempty"`

	// What the client did after the broker closed (ClosedBy "broker").
	Outcome string `json:"outcome,omitempty"`
	// CloseWaitMS is the longest the client's socket was seen in
	// CLOSE_WAIT (the kernel's age of the FIN where it has it), and
	// RecvQ its largest Recv-Q then (1: the FIN, unread).
	CloseWaitMS int64  `json:"close_wait_ms"`
	RecvQ       uint32 `json:"recv_q,omitempty"`
	// HeldCloseMS is how long it was then seen in CLOSE, its fd held
	// after keepalive's reset (HeldCloseAtMS when that was first seen).
	HeldCloseMS   int64 `json:"held_close_ms,omitempty"`
	HeldCloseAtMS int64 `json:"held_close_at_ms,omitempty"`
	// GoneMS is the first sample after the broker's close without the
	// client's socket: the client closed it before then. -1 while held.
	GoneMS int64 `json:"gone_ms"`
	// ReconnectMS is when the client next opened a connection, to any
	// broker, after the broker closed this one (-1: it did not), and
	// ReconnectNode to which.
	ReconnectMS   int64 `json:"reconnect_ms"`
	ReconnectNode int32 `json:"reconnect_node"`
	// Held: the client held the socket (CLOSE_WAIT and then CLOSE) for
	// at least the run's --max-hold.
	Held bool `json:"held"`

	inode      uint64
	fd         int       // the client's fd for it, -1 when unknown
	heldNow    bool      // the last sample found it held in CLOSE
	cwFirst    time.Time // first sample that saw it in CLOSE_WAIT
	closeFirst time.Time // first sample that saw it in CLOSE
	seenAfter  bool      // a sample saw it after the broker's close
}

// HeldMS is how long the client held the socket after the broker's FIN:
// CLOSE_WAIT, then CLOSE.
func (c *Conn) HeldMS() int64 { return c.CloseWaitMS + c.HeldCloseMS }

// timeline builds the Conns from the broker's events and the samples.
//
// The broker's connection id, not the client's address, names a
// connection: a client that reconnects often gets the port it just closed,
// and the old connection must not take the new one's socket for its own
// (nor be left "held to the end" when the new one replaces it).
type timeline struct {
	started time.Time
	brokers map[string]bool // the cluster's addresses
	conns   []*Conn
	byID    map[string]*Conn // by the broker's connection id
	// followed are the connections the samples follow: open, or closed
	// by the broker and not yet gone. latest is the newest connection
	// from each client address to each broker: the one a socket found at
	// that address belongs to.
	followed []*Conn
	latest   map[string]*Conn
	next     int // events handled
	others   map[string]bool
}

func newTimeline(started time.Time, brokerAddrs []string) *timeline {
	tl := &timeline{started: started, brokers: map[string]bool{}, byID: map[string]*Conn{},
		latest: map[string]*Conn{}, others: map[string]bool{}}
	for _, a := range brokerAddrs {
		tl.brokers[a] = true
	}
	return tl
}

func (tl *timeline) ms(t time.Time) int64 { return t.Sub(tl.started).Milliseconds() }

// events applies the broker's events not yet seen.
func (tl *timeline) events(evs []BrokerEvent) {
	for _, ev := range evs[min(tl.next, len(evs)):] {
		switch ev.Kind {
		case "accepted":
			c := &Conn{ID: len(tl.conns) + 1, Node: ev.Node, Broker: ev.Broker, Client: ev.Client,
				OpenedMS: tl.ms(ev.At), LastRequestMS: -1, ClosedMS: -1, GoneMS: -1, ReconnectMS: -1, fd: -1}
			// The client's first new connection, to any broker, after
			// the broker closed one is its reconnect (a client reconnects
			// to whichever broker it needs next: Java for metadata, to
			// the least loaded node).
			for _, p := range tl.conns {
				if p.ClosedBy == "broker" && p.ReconnectMS < 0 {
					p.ReconnectMS, p.ReconnectNode = c.OpenedMS, c.Node
				}
			}
			tl.conns = append(tl.conns, c)
			tl.byID[ev.Conn] = c
			tl.followed = append(tl.followed, c)
			tl.latest[addrKey(c.Client, c.Broker)] = c
		case "request":
			if c := tl.byID[ev.Conn]; c != nil && c.ClosedMS < 0 {
				c.Requests++
				c.LastRequestMS = tl.ms(ev.At)
			}
		case "closed":
			c := tl.byID[ev.Conn]
			if c == nil || c.ClosedMS >= 0 {
				continue
			}
			c.ClosedMS, c.IdleMS = tl.ms(ev.At), ev.IdleFor.Milliseconds()
			switch ev.Reason {
			case broker.ReasonIdle:
				c.ClosedBy = "broker"
				continue // followed until the client lets it go
			case broker.ReasonClientClosed, broker.ReasonClientReset:
				c.ClosedBy = "client"
			case broker.ReasonShutdown:
				c.ClosedBy = "kdiag"
			default:
				c.ClosedBy = string(ev.Reason)
			}
			tl.unfollow(c)
		}
	}
	tl.next = len(evs)
}

// unfollow stops following c.
func (tl *timeline) unfollow(c *Conn) {
	tl.followed = slices.DeleteFunc(tl.followed, func(f *Conn) bool { return f == c })
}

// addrKey names a client address toward a broker.
func addrKey(client, broker string) string { return client + ">" + broker }

// socketOf is c's socket in a sample's sockets by address, or nil. The
// events are applied before the sample's scan (watch.sample), so a socket
// at an address a newer connection has since taken is that one's: the
// kernel lets a client port go to the same broker again only once the
// old socket has left its tables (the old one may still be held CLOSE,
// which the caller finds by inode). A socket whose inode differs from the
// one c was seen with is another's too.
func (tl *timeline) socketOf(c *Conn, local map[string]*netstat.Socket) *netstat.Socket {
	key := addrKey(c.Client, c.Broker)
	so := local[key]
	if so == nil || tl.latest[key] != c {
		return nil
	}
	if c.inode != 0 && so.Inode != 0 && so.Inode != c.inode {
		return nil
	}
	return so
}

// FDHolds says whether process pid's fd is still the socket of inode. A
// client socket that is in none of the kernel's TCP tables, while its fd
// still is, was reset (keepalive's probe met no socket on the broker's
// side): held CLOSE.
type FDHolds func(pid, fd int, inode uint64) bool

// ProcFDHolds reads /proc/<pid>/fd/<fd> (netstat.FDHolds): one readlink
// for each socket that left the tables, where netstat's own held-CLOSE
// detection passes over every fd of every process.
func ProcFDHolds(procRoot string) FDHolds {
	return func(pid, fd int, inode uint64) bool { return netstat.FDHolds(procRoot, pid, fd, inode) }
}

// sample applies one sample of the command's sockets, taken at now: the
// state of each connection's client end, and the connections to other
// endpoints. A connection whose socket the sample lacks is held CLOSE when
// the scan reported it so (by inode) or holds says its fd is still there.
func (tl *timeline) sample(now time.Time, socks []netstat.Socket, holds FDHolds) Sample {
	s := Sample{Elapsed: now.Sub(tl.started)}
	s.ElapsedMS = s.Elapsed.Milliseconds()
	local := map[string]*netstat.Socket{}
	held := map[uint64]*netstat.Socket{}
	for i := range socks {
		so := &socks[i]
		if so.State == netstat.Listen {
			continue
		}
		if so.State == netstat.Close {
			held[so.Inode] = so
			continue
		}
		remote := unmap(so.Remote).String()
		if !tl.brokers[remote] {
			if so.State == netstat.Established || so.State == netstat.SynSent {
				tl.others[remote] = true
			}
			continue
		}
		local[addrKey(unmap(so.Local).String(), remote)] = so
		switch so.State {
		case netstat.Established:
			s.Established++
		case netstat.CloseWait:
			s.CloseWait++
			s.OldestCloseWait = max(s.OldestCloseWait, so.Age)
		default:
			s.Other++
		}
	}
	for _, c := range tl.followed {
		tl.follow(c, now, tl.socketOf(c, local), held, holds)
		if c.heldNow {
			s.HeldClose++
		}
	}
	tl.followed = slices.DeleteFunc(tl.followed, func(c *Conn) bool { return c.ClosedBy == "broker" && c.GoneMS >= 0 })
	return s
}

// follow updates one connection with what the sample saw of its client
// end: so (by address) or, once keepalive reset it, its inode among the
// held CLOSE sockets.
func (tl *timeline) follow(c *Conn, now time.Time, so *netstat.Socket, held map[uint64]*netstat.Socket, holds FDHolds) {
	closedByBroker := c.ClosedBy == "broker"
	c.heldNow = false
	if so != nil {
		c.PID, c.fd = so.PID, so.FD
		if so.Inode != 0 {
			c.inode = so.Inode
		}
		if so.State == netstat.CloseWait {
			if c.cwFirst.IsZero() {
				c.cwFirst = now
			}
			age := now.Sub(c.cwFirst)
			if so.HasAge && so.Age > age {
				age = so.Age // the kernel knows when the FIN came
			}
			c.CloseWaitMS = max(c.CloseWaitMS, age.Milliseconds())
			c.RecvQ = max(c.RecvQ, so.RecvQ)
		}
		if closedByBroker {
			c.seenAfter = true
		}
		return
	}
	if c.inode != 0 && (held[c.inode] != nil || holds != nil && c.PID > 0 && c.fd >= 0 && holds(c.PID, c.fd, c.inode)) {
		c.heldNow = true
		if c.closeFirst.IsZero() {
			c.closeFirst = now
			c.HeldCloseAtMS = tl.ms(now)
		}
		c.HeldCloseMS = now.Sub(c.closeFirst).Milliseconds()
		if closedByBroker {
			c.seenAfter = true
		}
		return
	}
	if closedByBroker && c.GoneMS < 0 {
		c.GoneMS = tl.ms(now)
	}
}

// finish decides each broker-closed connection's outcome at the end of
// the run, and whether it was held past maxHold. A connection the client
// closed at stopMS or later was open until kdiag stopped the command.
func (tl *timeline) finish(maxHold time.Duration, stopMS int64) {
	for _, c := range tl.conns {
		if c.ClosedBy == "client" && c.ClosedMS >= stopMS {
			c.ClosedBy = "stopped"
		}
		if c.ClosedBy != "broker" {
			continue
		}
		gone := c.GoneMS >= 0
		switch {
		case !c.seenAfter && c.CloseWaitMS == 0 && c.HeldCloseMS == 0:
			c.Outcome = OutcomeUnseen
			if gone && c.PID != 0 {
				// Seen before the close, gone at the first sample after
				// it: closed within that sample interval.
				c.Outcome = OutcomeClosedAtOnce
			}
		case !c.closeFirst.IsZero() && gone && c.HeldCloseMS < AtOnce.Milliseconds():
			// The client closed the connection itself and released the
			// fd soon after: Java NIO shuts a channel registered with a
			// Selector down for writing at close() (the socket leaves
			// the kernel's tables once the broker ACKs the FIN) and
			// closes the fd when the Selector next deregisters its key,
			// so a sample between the two sees a fd holding a socket in
			// no table. It is not a keepalive reset.
			c.Outcome = OutcomeClosedAtOnce
			if c.CloseWaitMS >= AtOnce.Milliseconds() {
				c.Outcome = OutcomeClosedLater
			}
		case !c.closeFirst.IsZero():
			c.Outcome = OutcomeHeldClose
		case c.CloseWaitMS >= AtOnce.Milliseconds() && gone:
			c.Outcome = OutcomeClosedLater
		case gone:
			c.Outcome = OutcomeClosedAtOnce
		default:
			c.Outcome = OutcomeHeldCloseWait
		}
		c.Held = c.HeldMS() >= maxHold.Milliseconds() && c.Outcome != OutcomeClosedAtOnce
	}
}

// otherRemotes are the endpoints other than the brokers the command's
// processes connected to (or tried to), sorted.
func (tl *timeline) otherRemotes() []string {
	out := make([]string, 0, len(tl.others))
	for r := range tl.others {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// pids are the processes that held the connections, most connections
// first.
func (tl *timeline) pids() []int {
	n := map[int]int{}
	for _, c := range tl.conns {
		if c.PID != 0 {
			n[c.PID]++
		}
	}
	out := make([]int, 0, len(n))
	for p := range n {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b int) int {
		if n[a] != n[b] {
			return n[b] - n[a]
		}
		return a - b
	})
	return out
}

// String is one line of a connection's timeline, for people.
func (c *Conn) String() string {
	return fmt.Sprintf("#%d node %d %s -> %s", c.ID, c.Node, c.Client, c.Broker)
}

func unmap(ap netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()) }
