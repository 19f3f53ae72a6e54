package netstat

import (
	"reflect"
	"time"
)

// StateChanges returns how many times, since some fixed start, a TCP socket
// entered or left one of the states in mask (events.Counter counts them
// from the kernel's inet_sock_set_state tracepoint).
type StateChanges func(mask StateSet) (uint64, error)

// DefaultRefreshEvery is how long a repeated scan gated by
// Scanner.Changes serves its last dump when RefreshEvery is 0: the
// attribution of a socket can change without a state change (an fd passed
// to another process, a holder that exits while a forked child keeps the
// socket), and so can Recv-Q and Send-Q, so a full scan runs at least this
// often. It is DefaultInfoEvery, so that quiet periods' full scans are the
// ones that refresh the CLOSE_WAIT ages from tcp_info.
const DefaultRefreshEvery = DefaultInfoEvery

// ungated are the states whose changes the tracepoint does not report: a
// TIME_WAIT socket is a timewait socket that replaces the full one without
// a state change of its own, and NEW_SYN_RECV is a request socket. A query
// for them always dumps.
const ungated = StateSet(1<<TimeWait | 1<<NewSynRecv)

// Gateable reports whether a Scanner's Changes can tell a scan of q that
// nothing changed: not when q asks for TIME_WAIT or NEW_SYN_RECV (the
// default, all states, does).
func (q Query) Gateable() bool { return q.states()&ungated == 0 }

// scanGate is what a Scanner with Changes keeps of its last dump: last is
// the last snapshot it returned, that dump or the latest served copy of it
// (nil before the first dump, and while the counter wakes every scan),
// dumped when that dump was made.
type scanGate struct {
	last   *Snapshot
	dumped time.Time
	q      Query
	// changes is the count read before the last dump: a count still equal
	// means nothing changed state since that dump began.
	changes uint64
	// woken counts the scans in a row that found the count moved since
	// the dump before them: from wokenDrop on, the gate keeps no snapshot
	// to serve (see dumpedAt); still says a scan found it still since,
	// and the gate keeps one again.
	woken int
	still bool
}

// wokenDrop is how many scans in a row must find the count moved before
// the gate stops keeping the last dump. On a host whose watched states
// churn (every connection made or closed to a watched port moves the
// count) no scan is ever served, and keeping the last dump to serve held a
// second snapshot through every scan: at 60,000 sockets 14 MB more peak
// resident memory than --events off, for nothing. So the gate keeps a dump
// only once a scan has found the count still since the dump before it
// (that scan would have been served), from the second scan on, and stops
// after wokenDrop scans in a row find it moved.
const wokenDrop = 5

// note records, for a scan at now that dumps, whether it would have been
// served had the gate kept the last dump: the same query, the count still,
// the last dump younger than refresh.
func (g *scanGate) note(q Query, changes uint64, now time.Time, refresh time.Duration) {
	if g.dumped.IsZero() {
		return // the first scan
	}
	age := now.Sub(g.dumped)
	if changes == g.changes && age >= 0 && age < refresh && reflect.DeepEqual(q, g.q) {
		g.woken, g.still = 0, true // serving would have paid
		return
	}
	if changes != g.changes {
		if g.woken++; g.woken >= wokenDrop {
			g.still = false
		}
	}
}

// dumpedAt records a dump of q made after the count read changes, and
// keeps snap to serve once a scan found the count still, until it moves at
// every scan (see wokenDrop).
func (g *scanGate) dumpedAt(snap *Snapshot, q Query, changes uint64) {
	g.dumped, g.q, g.changes, g.last = snap.Time, q, changes, nil
	if g.still {
		g.last = snap
	}
}

// changes reads s.Changes for q's states; gated is false when the scan
// must dump regardless: no counter, a single scan, a state the counter does
// not see, or a failed read.
func (s *Scanner) changes(q Query) (n uint64, gated bool) {
	if s.Changes == nil || s.NoCache || !q.Gateable() {
		return 0, false
	}
	n, err := s.Changes(q.states())
	if err != nil {
		return 0, false
	}
	return n, true
}

// fresh reports whether a scan at now for q may serve the last dump:
// the same query, no state change since, and that dump younger than
// refresh (and not in the future: a clock set back forces a dump).
func (g *scanGate) fresh(q Query, changes uint64, now time.Time, refresh time.Duration) bool {
	if g.last == nil || changes != g.changes {
		return false
	}
	age := now.Sub(g.dumped)
	return age >= 0 && age < refresh && reflect.DeepEqual(q, g.q)
}

// carry returns the last dump as a snapshot at now, and keeps it as the
// last: the last snapshot returned with the ages of the sockets that had
// one advanced by the time since (nothing was received: a receive would
// not change the state, but in CLOSE_WAIT the peer has sent its FIN and
// sends nothing more), its processes and notes, and Unchanged set. Its
// sockets are the last snapshot's own, advanced in place (see
// Scanner.Changes): a copy each served scan was 7.7 MB at 60,000 sockets,
// allocated every second and live beside the one it was made from.
func (g *scanGate) carry(now time.Time) *Snapshot {
	p := g.last
	d := now.Sub(p.Time)
	for i := range p.Sockets {
		if p.Sockets[i].HasAge {
			p.Sockets[i].Age += d
		}
	}
	out := &Snapshot{
		Time:      now,
		Source:    p.Source,
		Sockets:   p.Sockets,
		Processes: p.Processes,
		Notes:     p.Notes,
		Details:   p.Details,
		Missing:   p.Missing,
		Unchanged: true,
		Dump:      p.Dump,
	}
	g.last = out
	return out
}
