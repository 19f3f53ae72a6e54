package analyzer

import (
	"cmp"
	"encoding/json"
	"net/netip"
	"slices"
	"time"

	"github.com/kdiag/kdiag/netstat"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// maxLocalPorts bounds the distinct-local-port set per process; past it the
// count is a lower bound, which is all the diagnosis needs.
const maxLocalPorts = 1 << 16

// Tracker accumulates snapshots one at a time. It keeps, per process and
// tracked remote, one Counts per sample, and the live CLOSE_WAIT sockets; a
// snapshot itself is not retained. Not safe for concurrent use.
type Tracker struct {
	opts Options
	// brokers caches Options.IsBroker per remote.
	brokers map[netip.AddrPort]bool
	// times holds the sample times in the window; base is the absolute
	// index of times[0] (samples dropped by Options.Window before it).
	times []time.Time
	base  int
	procs map[ProcessKey]*procState
	cw    map[cwID]*CloseWaitSocket
	notes map[string]int
	// noteOrder keeps notes in the order first seen, for stable output.
	noteOrder []string
	sources   map[string]bool
}

type procState struct {
	proc      netstat.Process
	first     int // absolute index of counts[0]
	firstSeen time.Time
	lastSeen  time.Time
	counts    []Counts
	cur       Counts
	remotes   map[remoteKey]*remoteState
	closed    int
	ports     map[uint16]struct{}
}

type remoteKey struct {
	ap    netip.AddrPort
	other bool
}

type remoteState struct {
	first  int
	counts []Counts
	cur    Counts
}

// cwID identifies a socket across samples: its inode (unique while it lives)
// in its namespace, or its 4-tuple when the source gave no inode.
type cwID struct {
	netns, inode  uint64
	local, remote netip.AddrPort
}

// NewTracker returns an empty tracker with opts' thresholds.
func NewTracker(opts Options) *Tracker {
	opts = opts.withDefaults()
	t := &Tracker{
		opts:    opts,
		brokers: make(map[netip.AddrPort]bool),
		procs:   make(map[ProcessKey]*procState),
		cw:      make(map[cwID]*CloseWaitSocket),
		notes:   make(map[string]int),
		sources: make(map[string]bool),
	}
	return t
}

// normAddrPort unmaps IPv4-mapped IPv6 addresses so that ::ffff:10.0.0.1:9092
// and 10.0.0.1:9092 are one broker.
func normAddrPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

func (t *Tracker) isBroker(ap netip.AddrPort) bool {
	if t.opts.IsBroker == nil {
		return false
	}
	b, ok := t.brokers[ap]
	if !ok {
		b = t.opts.IsBroker(ap)
		if len(t.brokers) < 4096 { // a server's clients must not grow it forever
			t.brokers[ap] = b
		}
	}
	return b
}

// Samples returns the number of samples in the window.
func (t *Tracker) Samples() int { return len(t.times) }

// Add ingests one snapshot. Snapshots must come in time order; one older than
// the last is ignored, since a fit needs ascending times.
func (t *Tracker) Add(s *netstat.Snapshot) {
	if n := len(t.times); n > 0 && s.Time.Before(t.times[n-1]) {
		return
	}
	idx := t.base + len(t.times)
	t.times = append(t.times, s.Time)
	if s.Source != "" {
		t.sources[s.Source] = true
	}
	for _, n := range s.Notes {
		if _, ok := t.notes[n]; !ok {
			t.noteOrder = append(t.noteOrder, n)
		}
		t.notes[n]++
	}

	byPID := make(map[int]*netstat.Process, len(s.Processes))
	for i := range s.Processes {
		byPID[s.Processes[i].PID] = &s.Processes[i]
	}
	seen := make(map[cwID]bool)
	for i := range s.Sockets {
		sk := &s.Sockets[i]
		key := ProcessKey{}
		var meta *netstat.Process
		if sk.PID > 0 {
			key.PID = sk.PID
			if p := byPID[sk.PID]; p != nil {
				key.Start, meta = p.StartTime, p
			}
		}
		ps := t.procs[key]
		if ps == nil {
			ps = &procState{first: idx, firstSeen: s.Time, remotes: make(map[remoteKey]*remoteState), ports: make(map[uint16]struct{})}
			t.procs[key] = ps
		}
		if meta != nil {
			ps.proc = *meta
			ps.proc.States = nil // per-snapshot; the series has the counts
		} else if key.PID > 0 && ps.proc.PID == 0 {
			ps.proc.PID = key.PID
		}
		ps.lastSeen = s.Time
		if int(sk.State) < len(ps.cur) {
			ps.cur[sk.State]++
		}
		if sk.State != netstat.Listen && len(ps.ports) < maxLocalPorts {
			ps.ports[sk.Local.Port()] = struct{}{}
		}
		rs := t.remote(ps, normAddrPort(sk.Remote), idx)
		if int(sk.State) < len(rs.cur) {
			rs.cur[sk.State]++
		}
		if sk.State == netstat.CloseWait {
			id := cwID{netns: sk.NetNS, inode: sk.Inode}
			if sk.Inode == 0 {
				id.local, id.remote = sk.Local, sk.Remote
			}
			seen[id] = true
			c := t.cw[id]
			if c == nil || c.Process != key {
				c = &CloseWaitSocket{Process: key, Local: sk.Local, Remote: sk.Remote, Inode: sk.Inode, FirstSeen: s.Time}
				t.cw[id] = c
			}
			c.LastSeen, c.RecvQ, c.Age, c.HasAge = s.Time, sk.RecvQ, sk.Age, sk.HasAge
		}
	}
	for id, c := range t.cw {
		if !seen[id] {
			if ps := t.procs[c.Process]; ps != nil {
				ps.closed++
			}
			delete(t.cw, id)
		}
	}
	for _, ps := range t.procs {
		ps.counts = append(ps.counts, ps.cur)
		ps.cur = Counts{}
		for _, rs := range ps.remotes {
			rs.counts = append(rs.counts, rs.cur)
			rs.cur = Counts{}
		}
	}
	t.trim()
}

// remote returns the state of ap under ps, creating it, or the overflow
// bucket once MaxRemotes are tracked (brokers are always tracked).
func (t *Tracker) remote(ps *procState, ap netip.AddrPort, idx int) *remoteState {
	k := remoteKey{ap: ap}
	if rs := ps.remotes[k]; rs != nil {
		return rs
	}
	if len(ps.remotes) >= t.opts.MaxRemotes && !t.isBroker(ap) {
		k = remoteKey{other: true}
		if rs := ps.remotes[k]; rs != nil {
			return rs
		}
	}
	rs := &remoteState{first: idx}
	ps.remotes[k] = rs
	return rs
}

// trim drops samples older than Options.Window, and the processes and
// remotes that then have no socket left in the window.
func (t *Tracker) trim() {
	if t.opts.Window <= 0 || len(t.times) == 0 {
		return
	}
	cut := t.times[len(t.times)-1].Add(-t.opts.Window)
	drop := 0
	for drop < len(t.times)-1 && t.times[drop].Before(cut) {
		drop++
	}
	if drop == 0 {
		return
	}
	t.times = slices.Delete(t.times, 0, drop)
	t.base += drop
	for key, ps := range t.procs {
		ps.counts, ps.first = trimCounts(ps.counts, ps.first, t.base)
		if allZero(ps.counts) {
			delete(t.procs, key)
			continue
		}
		for rk, rs := range ps.remotes {
			rs.counts, rs.first = trimCounts(rs.counts, rs.first, t.base)
			if allZero(rs.counts) {
				delete(ps.remotes, rk)
			}
		}
	}
}

func trimCounts(c []Counts, first, base int) ([]Counts, int) {
	if first >= base {
		return c, first
	}
	n := min(base-first, len(c))
	return slices.Delete(c, 0, n), base
}

func allZero(c []Counts) bool {
	for i := range c {
		if c[i] != (Counts{}) {
			return false
		}
	}
	return true
}

// Analysis computes trends, verdicts and findings over the current window.
// It does not change the tracker, so a watch can call it at every sample.
func (t *Tracker) Analysis() *Analysis {
	a := &Analysis{Samples: len(t.times)}
	if len(t.times) > 0 {
		a.Start, a.End = t.times[0], t.times[len(t.times)-1]
	}
	for s := range t.sources {
		a.Sources = append(a.Sources, s)
	}
	slices.Sort(a.Sources)
	for _, n := range t.noteOrder {
		if c, ok := t.notes[n]; ok {
			a.Notes = append(a.Notes, Note{Text: n, Count: c})
		}
	}
	live := make(map[ProcessKey][]CloseWaitSocket)
	for _, c := range t.cw {
		live[c.Process] = append(live[c.Process], *c)
	}
	for key, ps := range t.procs {
		p := ProcessSeries{
			Key: key, Process: ps.proc, LastSeen: ps.lastSeen,
			Closed: ps.closed, LocalPorts: len(ps.ports),
		}
		p.Process.PID = key.PID
		p.Points = t.points(ps.counts, ps.first)
		if len(p.Points) > 0 {
			p.FirstSeen = p.Points[0].Time
		}
		if ps.firstSeen.After(p.FirstSeen) {
			p.FirstSeen = ps.firstSeen
		}
		p.CloseWait = t.fit(p.Points, netstat.CloseWait, time.Time{})
		p.CloseWaitRecent = t.fitRecent(p.Points, a.End)
		p.Established = t.fit(p.Points, netstat.Established, time.Time{})
		for rk, rs := range ps.remotes {
			r := RemoteSeries{Remote: rk.ap, Other: rk.other, Broker: !rk.other && t.isBroker(rk.ap)}
			r.Points = t.points(rs.counts, rs.first)
			r.CloseWait = t.fit(r.Points, netstat.CloseWait, time.Time{})
			p.Remotes = append(p.Remotes, r)
		}
		slices.SortFunc(p.Remotes, func(x, y RemoteSeries) int {
			return cmp.Or(
				cmp.Compare(y.CloseWait.Last, x.CloseWait.Last),
				cmp.Compare(lastTotal(y.Points), lastTotal(x.Points)),
				boolCmp(x.Other, y.Other),
				x.Remote.Compare(y.Remote))
		})
		p.CloseWaitSockets = live[key]
		slices.SortFunc(p.CloseWaitSockets, func(x, y CloseWaitSocket) int {
			return cmp.Or(x.Since().Compare(y.Since()), cmp.Compare(x.Inode, y.Inode), x.Local.Compare(y.Local))
		})
		a.Processes = append(a.Processes, p)
	}
	slices.SortFunc(a.Processes, func(x, y ProcessSeries) int {
		return cmp.Or(
			cmp.Compare(y.CloseWait.Max, x.CloseWait.Max),
			cmp.Compare(y.CloseWait.Last, x.CloseWait.Last),
			cmp.Compare(x.Key.PID, y.Key.PID),
			x.Key.Start.Compare(y.Key.Start))
	})
	a.Findings = diagnose(a, t.opts)
	return a
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

func lastTotal(p []Point) int {
	if len(p) == 0 {
		return 0
	}
	return p[len(p)-1].Counts.Total()
}

// points pairs counts (starting at absolute sample first) with their times.
func (t *Tracker) points(c []Counts, first int) []Point {
	off := first - t.base
	out := make([]Point, 0, len(c))
	for i := range c {
		if j := off + i; j >= 0 && j < len(t.times) {
			out = append(out, Point{Time: t.times[j], Counts: c[i]})
		}
	}
	return out
}

// fitRecent fits CLOSE_WAIT over the trailing Options.Recent. The recent
// window needs only half its length covered (MinDuration capped at Recent/2),
// or a short Recent could never give a verdict.
func (t *Tracker) fitRecent(p []Point, end time.Time) Trend {
	o := t.opts
	o.MinDuration = min(o.MinDuration, o.Recent/2)
	sub := *t
	sub.opts = o
	return sub.fit(p, netstat.CloseWait, end.Add(-o.Recent))
}

// fit fits one state's counts over the points at or after from.
func (t *Tracker) fit(p []Point, s netstat.State, from time.Time) Trend {
	times := make([]time.Time, 0, len(p))
	counts := make([]int, 0, len(p))
	for _, pt := range p {
		if pt.Time.Before(from) {
			continue
		}
		times = append(times, pt.Time)
		counts = append(counts, pt.Counts.Get(s))
	}
	return Fit(times, counts, t.opts)
}
