package netstat

import (
	"net/netip"
	"time"
)

// Transition is one state change of a TCP socket as the kernel made it
// (kdiag watch --events takes them from the inet_sock_set_state
// tracepoint): into CLOSE_WAIT when the peer's FIN came, and from
// CLOSE_WAIT to CLOSE when the kernel reset the socket (a keepalive probe's
// RST).
type Transition struct {
	// Local and Remote are the socket's addresses; a reset's local port is
	// 0 (the kernel releases it first), so a reset is joined to its socket
	// by Sock.
	Local, Remote netip.AddrPort
	New           State
	At            time.Time
	// Sock identifies the socket while it lives (the kernel's struct sock
	// address).
	Sock uint64
}

// TransitionSource drains the transitions that arrived since its last call
// (package events' Counter.Transitions, converted).
type TransitionSource func() ([]Transition, error)

// tupleKey is a connection's addresses: what ties a transition to a
// dumped socket. Transitions carry no namespace: two namespaces with the
// same 4-tuple are told apart by nothing, and such a key is dropped
// (ambiguous) rather than given to either.
type tupleKey struct{ local, remote netip.AddrPort }

// transitionLog is what a Scanner keeps of the transitions: when each
// connection entered CLOSE_WAIT and, once reset, when it left it.
type transitionLog struct {
	fin   map[tupleKey]time.Time
	bySck map[uint64]tupleKey
	reset map[tupleKey]time.Time
	// seen marks the keys the last scan used, for pruning.
	seen map[tupleKey]uint64
	gen  uint64
	err  error // the source's last error, said once
}

// applyTransitions drains s.Transitions and gives the sockets of snap the
// times they tell: a CLOSE_WAIT socket whose FIN came during the watch gets
// its exact age (tcp_info's, which keepalive ACKs reset, at best bounds it);
// a held CLOSE socket whose addresses are known gets, as its age, the time
// since the kernel reset it.
func (s *Scanner) applyTransitions(snap *Snapshot, n *notes) {
	if s.Transitions == nil {
		return
	}
	l := &s.trans
	if l.fin == nil {
		l.fin, l.bySck, l.reset, l.seen = map[tupleKey]time.Time{}, map[uint64]tupleKey{}, map[tupleKey]time.Time{}, map[tupleKey]uint64{}
	}
	ts, err := s.Transitions()
	if err != nil && l.err == nil {
		n.add("the kernel's state-change records are unavailable (%v): CLOSE_WAIT ages are tcp_info's", err)
	}
	l.err = err
	for _, t := range ts {
		switch t.New {
		case CloseWait:
			k := tupleKey{t.Local, t.Remote}
			if _, dup := l.fin[k]; dup {
				l.fin[k] = time.Time{} // two sockets of one 4-tuple: ambiguous
			} else {
				l.fin[k] = t.At
			}
			l.bySck[t.Sock] = k
		case Close:
			if k, ok := l.bySck[t.Sock]; ok {
				l.reset[k] = t.At
				delete(l.bySck, t.Sock)
			}
		}
	}
	l.gen++
	for i := range snap.Sockets {
		x := &snap.Sockets[i]
		k := tupleKey{x.Local, x.Remote}
		switch x.State {
		case CloseWait:
			if at, ok := l.fin[k]; ok && !at.IsZero() {
				x.Age, x.HasAge, x.AgeSpan = max(snap.Time.Sub(at), 0), true, 0
				l.seen[k] = l.gen
			}
		case Close:
			if at, ok := l.reset[k]; ok && x.Remote.IsValid() {
				x.Age, x.HasAge, x.AgeSpan = max(snap.Time.Sub(at), 0), true, 0
				l.seen[k] = l.gen
			}
		}
	}
	// Forget what no scan uses any more, once it is not new: a FIN that
	// came since the dump is kept for the next scan.
	for k, g := range l.seen {
		if g != l.gen {
			delete(l.seen, k)
			delete(l.fin, k)
			delete(l.reset, k)
		}
	}
	for k, at := range l.fin {
		if _, used := l.seen[k]; !used && snap.Time.Sub(at) > time.Minute {
			delete(l.fin, k)
		}
	}
	for sck, k := range l.bySck {
		if _, ok := l.fin[k]; !ok {
			delete(l.bySck, sck)
		}
	}
}
