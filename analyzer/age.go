package analyzer

import (
	"slices"
	"time"

	"github.com/kdiag/kdiag/internal/human"
)

// A CLOSE_WAIT socket's age is rarely known exactly. tcp_info gives two
// times: the last ACK received (tcpi_last_ack_recv), which the FIN updates
// and every later ACK updates again, and the last data received, before
// which the FIN cannot have come. Go dials with a 15 s keepalive, and the
// peer's FIN_WAIT_2 side answers each probe with an ACK, so 15 s after the
// FIN the first time has become a lower bound that keepalive keeps young,
// and only the range [last ACK, last data] is known. Printing its lower
// end as "the age" is how a CLOSE_WAIT held for a minute reads as 8 s.
//
// When the peer closed the connection for idleness, the FIN came the
// peer's idle timeout after the last data, so the range's upper end
// narrows to (time since the last data) - (idle timeout): the age, within
// the peer's poll interval. The idle timeout is known where kdiag measured
// it (another socket of the same closes, whose FIN time was exact: its
// IdleAtFIN) or where the user gave it (--broker-idle-ms). AgeBounds holds
// all of this and says it in words.

// AgeBounds is what is known of a CLOSE_WAIT socket's age at one time.
type AgeBounds struct {
	// Min is the least the age can be: since the last ACK received, or
	// since the first sample that saw the socket in CLOSE_WAIT, the
	// earlier of the two.
	Min time.Duration `json:"min_ns"`
	// Max is the most it can be, when HasMax: since the last data
	// received, less PeerIdle when that narrowed it.
	Max    time.Duration `json:"max_ns,omitempty"`
	HasMax bool          `json:"has_max"`
	// PeerIdle is the peer's idle timeout that narrowed Max (0: none did):
	// the FIN of an idle close comes that long after the last data.
	PeerIdle time.Duration `json:"peer_idle_ns,omitempty"`
}

// exactWithin is how close Min and Max must be for the age to be given as
// one figure: below human.Age's resolution of ages under ten seconds.
const exactWithin = 100 * time.Millisecond

// Exact reports whether the age is known to within exactWithin.
func (b AgeBounds) Exact() bool { return b.HasMax && b.Max-b.Min <= exactWithin }

// Likely is the age to go by: the upper end when it is exact or was
// narrowed by the peer's idle timeout (the FIN of an idle close came then,
// so a socket is never called younger than it is), else the lower end,
// which is proven.
func (b AgeBounds) Likely() time.Duration {
	if b.HasMax && (b.Exact() || b.PeerIdle > 0) {
		return b.Max
	}
	return b.Min
}

// Known reports whether anything bounds the age: false for a socket a
// one-shot scan first saw in state CLOSE (no tcp_info, no earlier sample).
func (b AgeBounds) Known() bool { return b.Min > 0 || b.HasMax }

// String writes the bounds for people: "10s" when exact, "~59s" when the
// peer's idle timeout narrowed them, "14s-1m02s" for a range, "≥14s"
// when nothing bounds it from above, "unknown" when nothing is known.
func (b AgeBounds) String() string {
	switch {
	case !b.Known():
		return "unknown"
	case b.Exact():
		return human.Age(b.Max)
	case b.HasMax && b.PeerIdle > 0:
		return "~" + human.Age(b.Max)
	case b.HasMax:
		return human.Age(b.Min) + "-" + human.Age(b.Max)
	}
	return "≥" + human.Age(b.Min)
}

// Words says the bounds in a sentence's words: "10s", "~59s (its last
// data 1m02s ago, then the peer's 3.1s idle timeout)", "at least 14s, at
// most 1m02s", "at least 14s".
func (b AgeBounds) Words() string {
	switch {
	case !b.Known():
		return "of unknown age"
	case b.Exact():
		return human.Age(b.Max)
	case b.HasMax && b.PeerIdle > 0:
		return "~" + human.Age(b.Max) + " (its last data " + human.Age(b.Max+b.PeerIdle) + " ago, then the peer's " +
			human.Age(b.PeerIdle) + " idle timeout; at least " + human.Age(b.Min) + " by tcp_info)"
	case b.HasMax:
		return "at least " + human.Age(b.Min) + ", at most " + human.Age(b.Max)
	}
	return "at least " + human.Age(b.Min)
}

// BoundsAt returns what is known of the socket's age at t. peerIdle, when
// positive, is the peer's idle timeout: it narrows the upper bound as an
// idle close would (see the comment above AgeBounds), unless that would
// put the FIN after the latest time the samples allow, which means the
// peer closed for another reason, and the bounds stand as tcp_info gave
// them.
func (c CloseWaitSocket) BoundsAt(t time.Time, peerIdle time.Duration) AgeBounds {
	b := AgeBounds{Min: max(c.AgeAt(t), 0)}
	if c.FINEarliest.IsZero() {
		return b
	}
	b.Max, b.HasMax = max(t.Sub(c.FINEarliest), b.Min), true
	if b.Exact() || peerIdle <= 0 {
		return b
	}
	if fin := c.FINEarliest.Add(peerIdle); !fin.After(c.Since()) {
		b.Max, b.PeerIdle = max(t.Sub(fin), b.Min), peerIdle
	}
	return b
}

// MeasuredPeerIdle is the peer's idle timeout, as the CLOSE_WAIT sockets whose FIN
// time was exact measured it (IdleAtFIN): the least of them, since a broker
// closes a connection idle at least its timeout, on its next poll. n says
// how many sockets measured it; ok is false when none did.
func MeasuredPeerIdle(socks []CloseWaitSocket) (idle time.Duration, n int, ok bool) {
	for _, c := range socks {
		if c.IdleAtFIN > 0 && (n == 0 || c.IdleAtFIN < idle) {
			idle = c.IdleAtFIN
		}
		if c.IdleAtFIN > 0 {
			n++
		}
	}
	return idle, n, n > 0
}

// oldestBy returns the socket whose Likely age at t is greatest.
func oldestBy(socks []CloseWaitSocket, t time.Time, peerIdle time.Duration) (CloseWaitSocket, AgeBounds, bool) {
	if len(socks) == 0 {
		return CloseWaitSocket{}, AgeBounds{}, false
	}
	i := 0
	best := socks[0].BoundsAt(t, peerIdle)
	for j := 1; j < len(socks); j++ {
		if b := socks[j].BoundsAt(t, peerIdle); b.Likely() > best.Likely() || b.Likely() == best.Likely() && b.Max > best.Max {
			i, best = j, b
		}
	}
	return socks[i], best, true
}

// Oldest returns the process's CLOSE_WAIT (or held CLOSE) socket that is
// likely the oldest at the analysis's end and what is known of its age,
// narrowed by the peer's idle timeout where it is known (PeerIdleOf); ok
// is false when it holds none.
func (p *ProcessSeries) Oldest(a *Analysis) (CloseWaitSocket, AgeBounds, bool) {
	idle, _ := PeerIdleOf(a, p)
	return oldestBy(p.CloseWaitSockets, a.End, idle)
}

// PeerIdleOf is the peer idle timeout to narrow p's ages with, and where it
// comes from: the analysis's BrokerIdle when the user gave it, else what
// p's own sockets measured, else what any process's sockets to the same
// remotes measured. 0 and "" when nothing says.
func PeerIdleOf(a *Analysis, p *ProcessSeries) (time.Duration, string) {
	if a != nil && a.BrokerIdle > 0 {
		return a.BrokerIdle, "given"
	}
	if idle, _, ok := MeasuredPeerIdle(p.CloseWaitSockets); ok {
		return idle, "measured"
	}
	if a == nil {
		return 0, ""
	}
	var others []CloseWaitSocket
	for i := range a.Processes {
		q := &a.Processes[i]
		if q.Key == p.Key {
			continue
		}
		for _, c := range q.CloseWaitSockets {
			if c.IdleAtFIN > 0 && slices.ContainsFunc(p.CloseWaitSockets, func(x CloseWaitSocket) bool { return x.Remote == c.Remote }) {
				others = append(others, c)
			}
		}
	}
	if idle, _, ok := MeasuredPeerIdle(others); ok {
		return idle, "measured on other processes"
	}
	return 0, ""
}
