// Package analyzer turns a series of netstat.Snapshot into what a user can act
// on: per process and per remote endpoint, the socket counts per state over
// time, the age of every CLOSE_WAIT socket, the growth rate fitted over the
// window, a verdict (steady, growing, draining) and a diagnosis in words.
//
// Everything here is a pure function of the snapshots: no clock, no I/O. A
// Tracker ingests snapshots one at a time and keeps only compact per-sample
// counts, so `kdiag watch` can run for hours at 1 Hz; Analyze is the same
// over a slice (a recording).
package analyzer

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/netstat"
)

// Options are the analyzer's thresholds. The zero value means the defaults
// documented on each field.
type Options struct {
	// MinSamples is the fewest samples a verdict needs (default 6).
	MinSamples int
	// MinDuration is the shortest window a verdict needs (default 30s): a
	// burst of connections opened at once is not a leak.
	MinDuration time.Duration
	// MinT is how many standard errors the fitted slope must be from zero to
	// count as a trend (default 3, roughly p < 0.01 for the sample counts a
	// watch collects).
	MinT float64
	// MinChange is the least fitted change over the window, in sockets, for
	// a trend (default 3): a significant drift of one socket is not a leak.
	MinChange float64
	// StuckAge is the CLOSE_WAIT age past which sockets that are not growing
	// still make a finding (default 60s): a healthy client closes within
	// milliseconds of the FIN.
	StuckAge time.Duration
	// Recent is the trailing part of the window whose own trend tells what
	// is happening now: still growing, holding or draining (default 2m).
	Recent time.Duration
	// Window bounds how much history a Tracker keeps; 0 keeps everything.
	Window time.Duration
	// MaxRemotes bounds the remote endpoints tracked per process (default
	// 64, brokers always tracked); the rest are counted under "other", so a
	// server with thousands of clients does not exhaust memory.
	MaxRemotes int
	// IsBroker tells whether a remote endpoint is a Kafka broker (from
	// --brokers); such remotes are marked, always tracked, and named first
	// in diagnoses. nil: none is. It is asked often (not cached): it must
	// be cheap, as netstat.IsBroker is.
	IsBroker func(netip.AddrPort) bool
	// Identify names the Kafka client library of a process, once per
	// process (kdiag watch reads the live process: clients.Identify); nil
	// means clients.FromProcess, from what the scan recorded of it.
	Identify func(netstat.Process) clients.Client
	// BrokerIdle is the brokers' connections.max.idle.ms when the user
	// gave it (--broker-idle-ms); 0 when not. It narrows CLOSE_WAIT ages
	// (AgeBounds) where no socket measured it.
	BrokerIdle time.Duration
}

// The defaults of Options.MinSamples and Options.MinDuration: what a window
// needs before the analyzer calls a trend.
const (
	DefaultMinSamples  = 6
	DefaultMinDuration = 30 * time.Second
)

func (o Options) withDefaults() Options {
	if o.MinSamples <= 0 {
		o.MinSamples = DefaultMinSamples
	}
	if o.MinDuration <= 0 {
		o.MinDuration = DefaultMinDuration
	}
	if o.MinT <= 0 {
		o.MinT = 3
	}
	if o.MinChange <= 0 {
		o.MinChange = 3
	}
	if o.StuckAge <= 0 {
		o.StuckAge = time.Minute
	}
	if o.Recent <= 0 {
		o.Recent = 2 * time.Minute
	}
	if o.MaxRemotes <= 0 {
		o.MaxRemotes = 64
	}
	return o
}

// ProcessKey identifies a process across a series: a pid and its start time,
// so that a pid the kernel reuses for a new process is a new process. The
// zero key holds the sockets no process could be found for.
type ProcessKey struct {
	PID   int       `json:"pid"`
	Start time.Time `json:"start_time"`
}

// String returns "pid 1234", or "unattributed" for the zero key.
func (k ProcessKey) String() string {
	if k.PID == 0 {
		return "unattributed"
	}
	return fmt.Sprintf("pid %d", k.PID)
}

// Counts are socket counts indexed by netstat.State.
type Counts [16]int

// Get returns the count for a state.
func (c Counts) Get(s netstat.State) int {
	if int(s) < len(c) {
		return c[s]
	}
	return 0
}

// Leaked returns the CLOSE_WAIT sockets plus the held CLOSE ones: a CLOSE
// socket a process holds is a CLOSE_WAIT one that a keepalive RST took out of
// the kernel's tables (netstat.Close), the same leak one stage later. Trends
// and verdicts of "CLOSE_WAIT" count both, so a leak does not look like it
// drains when its sockets move from one to the other.
func (c Counts) Leaked() int { return c.Get(netstat.CloseWait) + c.Get(netstat.Close) }

// Total returns the count over all states.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// MarshalJSON writes the non-zero counts keyed by the kernel's state names.
func (c Counts) MarshalJSON() ([]byte, error) {
	m := make(map[netstat.State]int)
	for s, v := range c {
		if v != 0 {
			m[netstat.State(s)] = v
		}
	}
	return jsonMarshal(m)
}

// Point is one sample of a series.
type Point struct {
	Time   time.Time `json:"time"`
	Counts Counts    `json:"counts"`
}

// CloseWaitSocket is one CLOSE_WAIT socket as the series saw it.
type CloseWaitSocket struct {
	Process ProcessKey     `json:"process"`
	Local   netip.AddrPort `json:"local"`
	Remote  netip.AddrPort `json:"remote"`
	Inode   uint64         `json:"inode"`
	// FirstSeen and LastSeen are the first and last samples that held it.
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// RecvQ at LastSeen: 1 means the FIN is unread, more means unread data
	// too, 0 means the application read the EOF but did not close.
	RecvQ uint32 `json:"recv_q"`
	// Age is tcp_info's time since the FIN at LastSeen, when HasAge.
	Age    time.Duration `json:"age_ns,omitempty"`
	HasAge bool          `json:"has_age"`
	// FINAt is the earliest arrival time of the FIN that any sample's
	// tcp_info age implied (sample time minus age: the latest the FIN can
	// have come by that sample); zero without ages.
	FINAt time.Time `json:"fin_at,omitempty"`
	// FINEarliest is the earliest the FIN can have come, by the sample
	// that bounds it most (sample time minus its age's upper bound,
	// netstat.Socket.AgeMax); equal to FINAt when a sample knew the age
	// exactly, zero without ages.
	FINEarliest time.Time `json:"fin_earliest,omitempty"`
	// IdleAtFIN is how long the connection had carried no data when the
	// FIN came (netstat.Socket.IdleMS), 0 when no sample knew it: for a
	// broker's idle close, about its connections.max.idle.ms.
	IdleAtFIN time.Duration `json:"idle_at_fin_ns,omitempty"`
	// Held is true once the socket was seen in state CLOSE: the kernel
	// reset it out of its tables (a keepalive probe's RST) and the process
	// still holds its fd; HeldSince is the first sample that saw it so.
	Held      bool      `json:"held,omitempty"`
	HeldSince time.Time `json:"held_since,omitempty"`
}

// Since is the best estimate of when the socket entered CLOSE_WAIT: the
// earlier of the first sample that saw it and the FIN's arrival by tcp_info.
// tcp_info's age is a lower bound: it is the time since anything was last
// received, and keepalive probes' ACKs reset it (Go dials with a 15 s
// keepalive, Java's socket.keepalive is opt-in), so a socket seen for longer
// than its age is older than the age says.
//
// Because a later keepalive ACK makes the age smaller, the estimate kept is
// the earliest FIN time any sample implied (FINAt), not the latest sample's.
func (c CloseWaitSocket) Since() time.Time {
	if !c.FINAt.IsZero() && c.FINAt.Before(c.FirstSeen) {
		return c.FINAt
	}
	return c.FirstSeen
}

// Exact reports whether the time of the FIN is known exactly (a sample's
// tcp_info could have had no ACK after it), so AgeAt is the age, not a
// lower bound of it.
func (c CloseWaitSocket) Exact() bool {
	return !c.FINAt.IsZero() && c.FINAt.Equal(c.FINEarliest) && !c.FINAt.After(c.FirstSeen)
}

// MaxAgeAt is the most the socket's CLOSE_WAIT age can be at t, and false
// when no sample bounded it (no tcp_info: the /proc source, or a socket
// first seen held CLOSE).
func (c CloseWaitSocket) MaxAgeAt(t time.Time) (time.Duration, bool) {
	if c.FINEarliest.IsZero() {
		return 0, false
	}
	return t.Sub(c.FINEarliest), true
}

// AgeAt is how long the socket had been in CLOSE_WAIT at t: the age when
// Exact, else the least it can be (MaxAgeAt bounds it from above).
func (c CloseWaitSocket) AgeAt(t time.Time) time.Duration { return t.Sub(c.Since()) }

// RemoteSeries is one remote endpoint of one process over time.
type RemoteSeries struct {
	// Remote is the endpoint; Other is true for the bucket of endpoints past
	// Options.MaxRemotes (Remote is then the zero value).
	Remote netip.AddrPort `json:"remote"`
	Other  bool           `json:"other,omitempty"`
	// Broker is true when Options.IsBroker says Remote is a broker.
	Broker bool `json:"broker,omitempty"`
	// Last is the counts at the last sample. (A series of points per
	// remote, as processes have, would cost the window's samples times a
	// process's remotes: 270 MB for a watch's hour of 9 processes with 65
	// remotes each, when the watch ended.)
	Last Counts `json:"last"`
	// CloseWait is the trend toward this endpoint (zero from Current).
	CloseWait Trend `json:"close_wait"`
	// Opened counts the connections to it that samples saw open that the
	// sample before had not (new local ports), over the window; counted
	// toward brokers only. A connection opened and closed between two
	// samples is not seen.
	Opened int `json:"opened,omitempty"`
}

// Name returns the endpoint as text, "other" for the overflow bucket.
func (r RemoteSeries) Name() string {
	if r.Other {
		return "other"
	}
	return r.Remote.String()
}

// ProcessSeries is one process over the window.
type ProcessSeries struct {
	Key ProcessKey `json:"key"`
	// Process is the latest metadata seen (name, cmdline, user, Kafka).
	Process netstat.Process `json:"process"`
	// Client is the Kafka client library it runs (Options.Identify).
	Client    clients.Client `json:"client"`
	FirstSeen time.Time      `json:"first_seen"`
	LastSeen  time.Time      `json:"last_seen"`
	// Last is the counts at the last sample.
	Last Counts `json:"last"`
	// Points has one entry per sample from FirstSeen to the end of the
	// window; samples after the process was last seen count zero (nil from
	// Tracker.Current). More than MaxPoints samples are given in MaxPoints
	// points, each the most of each state over its run of samples.
	Points []Point `json:"points"`
	// CloseWait is the trend over the window, CloseWaitRecent over its
	// trailing Options.Recent, Established the ESTABLISHED trend.
	CloseWait       Trend          `json:"close_wait"`
	CloseWaitRecent Trend          `json:"close_wait_recent"`
	Established     Trend          `json:"established"`
	Remotes         []RemoteSeries `json:"remotes"`
	// CloseWaitSockets are the CLOSE_WAIT sockets held at the last sample,
	// oldest first.
	CloseWaitSockets []CloseWaitSocket `json:"close_wait_sockets"`
	// Closed counts CLOSE_WAIT sockets that went away during the window.
	Closed int `json:"closed"`
	// Opened sums its remotes' Opened: the connections to brokers it
	// opened during the window, as the samples saw them.
	Opened int `json:"opened,omitempty"`
	// LocalPorts counts the distinct local ports of its connected sockets
	// over the window: many more than it holds at once means it keeps
	// opening new connections.
	LocalPorts int `json:"local_ports"`
}

// Name returns the process name, "(unattributed)" for the zero key.
func (p ProcessSeries) Name() string {
	if p.Key.PID == 0 {
		return "(unattributed)"
	}
	if p.Process.Name != "" {
		return p.Process.Name
	}
	return "?"
}

// OldestCloseWait returns the oldest CLOSE_WAIT socket held at the last
// sample, and false when it holds none.
func (p ProcessSeries) OldestCloseWait() (CloseWaitSocket, bool) {
	if len(p.CloseWaitSockets) == 0 {
		return CloseWaitSocket{}, false
	}
	return p.CloseWaitSockets[0], true
}

// Analysis is the result over a window.
type Analysis struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Samples int       `json:"samples"`
	// Sources are the scan sources seen ("netlink", "proc").
	Sources []string `json:"sources"`
	// Processes, most CLOSE_WAIT first.
	Processes []ProcessSeries `json:"processes"`
	Findings  []Finding       `json:"findings"`
	// Notes are the scans' notes, each once, with how many scans said it.
	Notes []Note `json:"notes,omitempty"`
	// Unseen, when set, says that in some samples CLOSE_WAIT sockets could
	// not be attributed because kdiag could not read their possible
	// holders: a leak there would not show in Processes or Findings.
	Unseen *Unseen `json:"unseen,omitempty"`
	// BrokerIdle is Options.BrokerIdle: the brokers' idle timeout the user
	// gave, which narrows CLOSE_WAIT ages (ProcessSeries.Oldest).
	BrokerIdle time.Duration `json:"broker_idle_ns,omitempty"`
}

// Unseen sums the samples whose CLOSE_WAIT kdiag could not attribute
// (netstat.Snapshot.Unseen).
type Unseen struct {
	// Samples is how many samples had such sockets.
	Samples int `json:"samples"`
	// MaxCloseWait is the most in one sample, LastCloseWait the last
	// sample's (0 when it had none).
	MaxCloseWait  int `json:"max_close_wait"`
	LastCloseWait int `json:"last_close_wait"`
	// Reason is the last such sample's reason.
	Reason string `json:"reason"`
}

// Blind reports whether the last sample could not attribute CLOSE_WAIT
// sockets: what it could not see may be a leak now, and a verdict of no
// finding is UNKNOWN. Samples before it that could not (a socket closed
// while a scan on a churning host ran) hid nothing that lasted: a leak's
// sockets stay, and the last sample saw them all.
func (u *Unseen) Blind() bool { return u != nil && u.LastCloseWait > 0 }

// Note is a scan note and the number of samples that carried it.
type Note struct {
	Text  string `json:"text"`
	Count int    `json:"count"`
}

// Analyze runs a Tracker over snaps, in order.
func Analyze(snaps []netstat.Snapshot, opts Options) *Analysis {
	t := NewTracker(opts)
	for i := range snaps {
		t.Add(&snaps[i])
	}
	return t.Analysis()
}
