package analyzer

import (
	"cmp"
	"encoding/json"
	"math/bits"
	"net/netip"
	"slices"
	"time"

	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/netstat"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// Tracker accumulates snapshots one at a time. It keeps, per process and
// tracked remote, one Counts per sample, and the live CLOSE_WAIT sockets; a
// snapshot itself is not retained. Not safe for concurrent use.
type Tracker struct {
	opts Options
	// times holds the sample times in the window; base is the absolute
	// index of times[0] (samples dropped by Options.Window before it).
	times []time.Time
	base  int
	procs map[ProcessKey]*procState
	// cw holds the live CLOSE_WAIT sockets by inode; cwTuple those the
	// source gave no inode for, by 4-tuple. gen marks the ones the current
	// sample saw, so the sweep for closed ones needs no per-sample set.
	cw      map[inodeID]*cwSocket
	cwTuple map[tupleID]*cwSocket
	gen     uint32
	notes   map[string]int
	// lastDump is the netstat.Snapshot.Dump of the last sample added, 0
	// when unknown: a sample that serves the same dump again has the same
	// sockets (see addUnchanged).
	lastDump uint64
	// noteOrder keeps notes in the order first seen, for stable output.
	noteOrder []string
	// unseen sums the samples in which CLOSE_WAIT sockets could not be
	// attributed (netstat.Snapshot.Unseen).
	unseen  Unseen
	sources map[string]bool
	// loc is the location of the samples' times, which cwSocket's times
	// are given back in.
	loc *time.Location
	// fitTimes, fitCounts and windowCounts are fit's and window's
	// buffers, reused: an analysis fits every process's series, and
	// Current runs at every sample (an hour's window at 1 Hz: 3,600
	// samples, 115 KB a fit and 375 KB a window, per process per sample).
	fitTimes     []time.Time
	fitCounts    []int
	windowCounts []Counts
}

type procState struct {
	key       ProcessKey
	proc      netstat.Process
	first     int // absolute index of counts[0]
	firstSeen time.Time
	lastSeen  time.Time
	counts    series
	cur       Counts
	remotes   map[remoteKey]*remoteState
	closed    int
	// ports is a bitset of the local ports of its connected sockets: a
	// map insert per socket per sample would cost more than the rest.
	ports *[1 << 16 / 64]uint64
	// lastKey and lastRemote cache the previous socket's remote: sockets
	// of one process toward one broker come in runs.
	lastKey    remoteKey
	lastRemote *remoteState
	// client is what Options.Identify said, asked once the process's
	// metadata is known.
	client *clients.Client
}

type remoteKey struct {
	ap    netip.AddrPort
	other bool
}

type remoteState struct {
	first  int
	counts series
	cur    Counts
	// kafka marks a broker (Options.IsBroker, else the default Kafka
	// ports): only toward brokers are new connections counted.
	kafka bool
	// opened counts its connections by their local ports (ESTABLISHED or
	// SYN_SENT: one first seen in CLOSE_WAIT was opened before its close,
	// which the CLOSE_WAIT findings count): a new local port is a new
	// connection.
	opened openedCounter[uint16]
}

// openedCounter counts the connections opened between samples: it is told
// each sample's connections (see) by a key unique among them (toward a
// broker, the local port; on a broker host, the client's port and the
// listener's: ClientTracker), and records at each sample how many keys the
// sample before had not (count).
type openedCounter[K cmp.Ordered] struct {
	// keys are the current sample's, prev the last's (sorted); at records
	// the connections a sample saw that the one before it had not, by
	// absolute sample.
	keys, prev []K
	at         []openedAt
}

// openedAt is how many connections sample idx saw opened.
type openedAt struct{ idx, n int32 }

// see adds a connection of the current sample.
func (o *openedCounter[K]) see(k K) { o.keys = append(o.keys, k) }

// count records, at sample idx, the connections whose key the last sample
// did not see: opened since. Those of a first sample (known false) were
// open before kdiag looked.
func (o *openedCounter[K]) count(idx int, known bool) {
	slices.Sort(o.keys)
	// Both sorted: one merge pass counts the keys prev lacks.
	n, j := 0, 0
	for _, k := range o.keys {
		for j < len(o.prev) && o.prev[j] < k {
			j++
		}
		if j == len(o.prev) || o.prev[j] != k {
			n++
		}
	}
	if known && n > 0 {
		o.at = append(o.at, openedAt{int32(idx), int32(n)})
	}
	o.prev, o.keys = o.keys, o.prev[:0]
}

// trim forgets the counts of samples before base.
func (o *openedCounter[K]) trim(base int) {
	for len(o.at) > 0 && int(o.at[0].idx) < base {
		o.at = o.at[1:]
	}
}

// since returns the connections opened at samples idx and later.
func (o *openedCounter[K]) since(idx int) int {
	n := 0
	for i := len(o.at) - 1; i >= 0 && int(o.at[i].idx) >= idx; i-- {
		n += int(o.at[i].n)
	}
	return n
}

// inodeID identifies a socket across samples: its inode (unique while it
// lives) in its namespace.
type inodeID struct{ netns, inode uint64 }

// tupleID identifies a socket without inode by its namespace and 4-tuple.
type tupleID struct {
	netns         uint64
	local, remote netip.AddrPort
}

// NewTracker returns an empty tracker with opts' thresholds.
func NewTracker(opts Options) *Tracker {
	opts = opts.withDefaults()
	t := &Tracker{
		opts:    opts,
		loc:     time.Local,
		procs:   make(map[ProcessKey]*procState),
		cw:      make(map[inodeID]*cwSocket),
		cwTuple: make(map[tupleID]*cwSocket),
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

// isBroker asks Options.IsBroker, uncached: netstat.IsBroker compares a
// port or a few addresses, and it is asked once for each new remote past
// MaxRemotes and for each remote an analysis lists. (A cache of its
// answers took 1 MB of a watch's heap at 4,096 remotes.)
func (t *Tracker) isBroker(ap netip.AddrPort) bool {
	return t.opts.IsBroker != nil && t.opts.IsBroker(ap)
}

// Samples returns the number of samples in the window.
func (t *Tracker) Samples() int { return len(t.times) }

// Add ingests one snapshot. Snapshots must come in time order; one older than
// the last is ignored, since a fit needs ascending times.
func (t *Tracker) Add(s *netstat.Snapshot) {
	if n := len(t.times); n > 0 && s.Time.Before(t.times[n-1]) {
		return
	}
	if s.Unchanged && s.Dump != 0 && s.Dump == t.lastDump && len(t.times) > 0 {
		t.addUnchanged(s)
		return
	}
	t.lastDump = s.Dump
	idx := t.base + len(t.times)
	t.addSample(s)

	byPID := make(map[int]*netstat.Process, len(s.Processes))
	for i := range s.Processes {
		byPID[s.Processes[i].PID] = &s.Processes[i]
	}
	t.gen++
	// byKey caches this sample's pid → state: ProcessKey hashes a
	// time.Time, an int is cheaper, and sockets of one pid often come in runs.
	byKey := make(map[int]*procState, len(s.Processes)+1)
	var (
		lastPID = -1
		ps      *procState
	)
	for i := range s.Sockets {
		sk := &s.Sockets[i]
		if sk.PID != lastPID || ps == nil {
			if ps = byKey[sk.PID]; ps == nil {
				ps = t.proc(sk.PID, byPID[sk.PID], s.Time, idx)
				byKey[sk.PID] = ps
			}
			lastPID = sk.PID
		}
		if int(sk.State) < len(ps.cur) {
			ps.cur[sk.State]++
		}
		if sk.State != netstat.Listen {
			port := sk.Local.Port()
			ps.ports[port/64] |= 1 << (port % 64)
		}
		if sk.Remote.IsValid() {
			// A held CLOSE socket a one-shot scan never saw connected
			// has no remote.
			rk := remoteKey{ap: normAddrPort(sk.Remote)}
			rs := ps.lastRemote
			if rs == nil || ps.lastKey != rk {
				rs = t.remote(ps, rk.ap, idx)
				ps.lastKey, ps.lastRemote = rk, rs
			}
			if int(sk.State) < len(rs.cur) {
				rs.cur[sk.State]++
			}
			if rs.kafka && (sk.State == netstat.Established || sk.State == netstat.SynSent) {
				rs.opened.see(sk.Local.Port())
			}
		}
		if sk.State == netstat.CloseWait || sk.State == netstat.Close && sk.Inode != 0 {
			t.closeWait(sk, ps, s.Time)
		}
	}
	for id, c := range t.cw {
		if c.gen != t.gen {
			t.closedOne(c)
			delete(t.cw, id)
		}
	}
	for id, c := range t.cwTuple {
		if c.gen != t.gen {
			t.closedOne(c)
			delete(t.cwTuple, id)
		}
	}
	for _, ps := range t.procs {
		ps.counts.push(ps.cur)
		ps.cur = Counts{}
		ps.lastRemote = nil
		for _, rs := range ps.remotes {
			rs.counts.push(rs.cur)
			rs.cur = Counts{}
			if rs.kafka {
				rs.opened.count(idx, ps.first < idx)
			}
		}
	}
	t.trim()
}

// addSample records s's time, source and notes.
func (t *Tracker) addSample(s *netstat.Snapshot) {
	t.times = append(t.times, s.Time)
	t.loc = s.Time.Location()
	if s.Source != "" {
		t.sources[s.Source] = true
	}
	for _, n := range s.Notes {
		if _, ok := t.notes[n]; !ok {
			t.noteOrder = append(t.noteOrder, n)
		}
		t.notes[n]++
	}
	t.unseen.LastCloseWait = 0
	if u := s.Unseen; u != nil && u.Sockets[netstat.CloseWait.String()] > 0 {
		n := u.Sockets[netstat.CloseWait.String()]
		t.unseen.Samples++
		t.unseen.MaxCloseWait = max(t.unseen.MaxCloseWait, n)
		t.unseen.LastCloseWait = n
		t.unseen.Reason = u.Reason
	}
}

// addUnchanged adds s, a snapshot that serves the same dump as the last
// sample (netstat's Scanner with events: the same sockets and processes,
// the ages advanced by the time between), without going through its
// sockets: every count repeats the last sample's, every live CLOSE_WAIT
// socket is seen again and is older by the time since, and the processes
// seen then are seen now. That is what Add would compute from the sockets,
// at a cost per process and CLOSE_WAIT socket instead of per socket.
func (t *Tracker) addUnchanged(s *netstat.Snapshot) {
	prev := t.times[len(t.times)-1]
	d := s.Time.Sub(prev)
	t.addSample(s)
	t.gen++
	at := s.Time.UnixNano()
	for _, c := range t.cw {
		t.seenAgain(c, at, d)
	}
	for _, c := range t.cwTuple {
		t.seenAgain(c, at, d)
	}
	for _, ps := range t.procs {
		if ps.lastSeen.Equal(prev) {
			ps.lastSeen = s.Time
		}
		ps.counts.push(ps.counts.lastCounts())
		for _, rs := range ps.remotes {
			rs.counts.push(rs.counts.lastCounts())
		}
	}
	t.trim()
}

// seenAgain marks c seen by the current sample at (Unix ns), d after the
// last.
func (t *Tracker) seenAgain(c *cwSocket, at int64, d time.Duration) {
	c.lastSeen, c.gen = at, t.gen
	if c.hasAge {
		c.age += d
	}
}

// proc returns the state of the process holding a socket of pid (meta is
// its entry in the snapshot, nil if none), creating it at sample idx.
func (t *Tracker) proc(pid int, meta *netstat.Process, at time.Time, idx int) *procState {
	key := ProcessKey{}
	if pid > 0 {
		key.PID = pid
		if meta != nil {
			key.Start = meta.StartTime
		}
	}
	ps := t.procs[key]
	if ps == nil {
		ps = &procState{key: key, first: idx, firstSeen: at, remotes: make(map[remoteKey]*remoteState), ports: new([1 << 16 / 64]uint64)}
		t.procs[key] = ps
	}
	if meta != nil {
		ps.proc = *meta
		ps.proc.States = nil // per-snapshot; the series has the counts
	} else if key.PID > 0 && ps.proc.PID == 0 {
		ps.proc.PID = key.PID
	}
	ps.lastSeen = at
	return ps
}

// cwSocket is a live CLOSE_WAIT (or held CLOSE) socket as the tracker
// keeps it between samples: CloseWaitSocket's fields with its process as a
// pointer, its times as Unix nanoseconds (0: none) and its addresses
// packed, 120 bytes (allocated in 128) where a CloseWaitSocket and its
// ProcessKey take 320 and netip.AddrPorts made it 160 (20,000 CLOSE_WAIT:
// 2.6 MB). export turns it into a CloseWaitSocket.
type cwSocket struct {
	proc                *procState
	inode               uint64
	firstSeen, lastSeen int64
	finAt, finEarliest  int64
	heldSince           int64
	age, idleAtFIN      time.Duration
	gen                 uint32
	recvQ               uint32
	local, remote       netstat.PackedAddrPort
	hasAge, held        bool
}

// export returns c as a CloseWaitSocket, its times in loc (the samples'
// location).
func (c *cwSocket) export(loc *time.Location) CloseWaitSocket {
	at := func(ns int64) time.Time {
		if ns == 0 {
			return time.Time{}
		}
		return time.Unix(0, ns).In(loc)
	}
	return CloseWaitSocket{
		Process: c.proc.key, Local: c.local.AddrPort(), Remote: c.remote.AddrPort(), Inode: c.inode,
		FirstSeen: at(c.firstSeen), LastSeen: at(c.lastSeen),
		RecvQ: c.recvQ, Age: c.age, HasAge: c.hasAge,
		FINAt: at(c.finAt), FINEarliest: at(c.finEarliest), IdleAtFIN: c.idleAtFIN,
		Held: c.held, HeldSince: at(c.heldSince),
	}
}

// closeWait records that the current sample holds sk, in CLOSE_WAIT, in ps.
func (t *Tracker) closeWait(sk *netstat.Socket, ps *procState, when time.Time) {
	at := when.UnixNano()
	var c *cwSocket
	if sk.Inode != 0 {
		id := inodeID{sk.NetNS, sk.Inode}
		c = t.cw[id]
		if c == nil || c.proc.key != ps.key {
			c = &cwSocket{proc: ps, local: netstat.PackAddrPort(sk.Local), remote: netstat.PackAddrPort(sk.Remote), inode: sk.Inode, firstSeen: at}
			t.cw[id] = c
		}
	} else {
		id := tupleID{sk.NetNS, sk.Local, sk.Remote}
		c = t.cwTuple[id]
		if c == nil || c.proc.key != ps.key {
			c = &cwSocket{proc: ps, local: netstat.PackAddrPort(sk.Local), remote: netstat.PackAddrPort(sk.Remote), firstSeen: at}
			t.cwTuple[id] = c
		}
	}
	c.proc = ps // the key's current state (trim may have made a new one)
	c.lastSeen, c.gen = at, t.gen
	if sk.State == netstat.Close {
		// Reset and held: the same socket, its CLOSE_WAIT age frozen at
		// what the samples said, its remote the one it had (or none).
		if !c.held {
			c.held, c.heldSince = true, at
		}
		if !c.remote.IsValid() {
			c.remote, c.local = netstat.PackAddrPort(sk.Remote), netstat.PackAddrPort(sk.Local)
		}
		return
	}
	c.recvQ, c.age, c.hasAge = sk.RecvQ, sk.Age, sk.HasAge
	if sk.IdleMS > 0 && c.idleAtFIN == 0 {
		c.idleAtFIN = time.Duration(sk.IdleMS) * time.Millisecond
	}
	if sk.HasAge {
		if fin := at - int64(sk.Age); c.finAt == 0 || fin < c.finAt {
			c.finAt = fin
		}
		if early := at - int64(sk.AgeMax()); c.finEarliest == 0 || early > c.finEarliest {
			c.finEarliest = early
		}
		if c.finEarliest > c.finAt {
			c.finEarliest = c.finAt // samples that disagree (a reused inode): trust the latest
		}
	}
}

func (t *Tracker) closedOne(c *cwSocket) {
	if ps := t.procs[c.proc.key]; ps != nil {
		ps.closed++
	}
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
	rs := &remoteState{first: idx, kafka: !k.other && (t.isBroker(ap) || t.opts.IsBroker == nil && slices.Contains(netstat.DefaultKafkaPorts, ap.Port()))}
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
		ps.first = trimCounts(&ps.counts, ps.first, t.base)
		if ps.counts.allZero() {
			delete(t.procs, key)
			continue
		}
		for rk, rs := range ps.remotes {
			rs.first = trimCounts(&rs.counts, rs.first, t.base)
			rs.opened.trim(t.base)
			if rs.counts.allZero() {
				delete(ps.remotes, rk)
			}
		}
	}
}

// trimCounts drops the samples of c (from absolute sample first) before
// base, and returns where c now starts.
func trimCounts(c *series, first, base int) int {
	if first >= base {
		return first
	}
	c.dropFront(min(base-first, c.len()))
	return base
}

// Analysis computes trends, verdicts and findings over the current window,
// with every point of every series (for reports and charts). It does not
// change the tracker.
func (t *Tracker) Analysis() *Analysis { return t.analysis(true) }

// Current is the cheap analysis a live view needs at every sample: the same
// trends, verdicts and Last counts, but no Points, no Findings, and only the
// oldest of each process's CLOSE_WAIT sockets, so its cost does not grow
// with the sockets held or the hour of history kept.
func (t *Tracker) Current() *Analysis { return t.analysis(false) }

func (t *Tracker) analysis(full bool) *Analysis {
	a := &Analysis{Samples: len(t.times), BrokerIdle: t.opts.BrokerIdle}
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
	if t.unseen.Samples > 0 {
		u := t.unseen
		a.Unseen = &u
	}
	live := make(map[ProcessKey][]CloseWaitSocket)
	oldest := make(map[ProcessKey]CloseWaitSocket)
	if full {
		// Each process's sockets in its own part of one array, sized
		// first: appending grew each process's slice by doubling, 18 MB
		// allocated for the 5.6 MB kept at case D (20,000 CLOSE_WAIT,
		// BenchmarkAnalysisCaseD), which made the peak of watch's end.
		counts := make(map[ProcessKey]int, len(t.procs))
		for _, c := range t.cw {
			counts[c.proc.key]++
		}
		for _, c := range t.cwTuple {
			counts[c.proc.key]++
		}
		all := make([]CloseWaitSocket, len(t.cw)+len(t.cwTuple))
		for k, n := range counts {
			live[k], all = all[:0:n], all[n:]
		}
	}
	add := func(c *cwSocket) {
		x := c.export(t.loc)
		if full {
			live[x.Process] = append(live[x.Process], x)
		} else if o, ok := oldest[x.Process]; !ok || olderCW(&x, &o) {
			oldest[x.Process] = x
		}
	}
	for _, c := range t.cw {
		add(c)
	}
	for _, c := range t.cwTuple {
		add(c)
	}
	for k, c := range oldest {
		live[k] = []CloseWaitSocket{c}
	}
	for key, ps := range t.procs {
		p := ProcessSeries{
			Key: key, Process: ps.proc, LastSeen: ps.lastSeen,
			Closed: ps.closed, LocalPorts: popcount(ps.ports),
		}
		p.Process.PID = key.PID
		p.Client = t.client(ps)
		if full {
			p.Points = t.points(&ps.counts, ps.first)
		}
		if j := ps.first - t.base; j >= 0 && j < len(t.times) {
			p.FirstSeen = t.times[j]
		} else if len(t.times) > 0 {
			p.FirstSeen = t.times[0]
		}
		if ps.firstSeen.After(p.FirstSeen) {
			p.FirstSeen = ps.firstSeen
		}
		p.Last = ps.counts.lastCounts()
		p.CloseWait = stepOf(t.fit(&ps.counts, ps.first, Counts.Leaked, time.Time{}, t.opts), t.window(&ps.counts, ps.first, time.Time{}))
		p.CloseWaitRecent = t.fitRecent(&ps.counts, ps.first, a.End)
		if p.CloseWait.Verdict == Step && p.CloseWaitRecent.Verdict == Growing {
			p.CloseWaitRecent.Verdict = Step // the same rise, seen through the recent part of the window
		}
		p.Established = t.fit(&ps.counts, ps.first, established, time.Time{}, t.opts)
		for rk, rs := range ps.remotes {
			r := RemoteSeries{Remote: rk.ap, Other: rk.other, Broker: !rk.other && t.isBroker(rk.ap)}
			r.Last = rs.counts.lastCounts()
			r.Opened = rs.opened.since(t.base)
			p.Opened += r.Opened
			if full {
				r.CloseWait = t.fit(&rs.counts, rs.first, Counts.Leaked, time.Time{}, t.opts)
			}
			p.Remotes = append(p.Remotes, r)
		}
		slices.SortFunc(p.Remotes, func(x, y RemoteSeries) int {
			return cmp.Or(
				cmp.Compare(y.Last.Get(netstat.CloseWait), x.Last.Get(netstat.CloseWait)),
				cmp.Compare(y.Last.Total(), x.Last.Total()),
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
	if full {
		a.Findings = diagnose(a, t.opts)
	}
	return a
}

// client identifies ps's process once its metadata is known, and keeps it.
func (t *Tracker) client(ps *procState) clients.Client {
	if ps.client != nil {
		return *ps.client
	}
	if ps.key.PID == 0 || ps.proc.Name == "" && ps.proc.Cmdline == "" {
		return clients.Client{}
	}
	var c clients.Client
	if t.opts.Identify != nil {
		c = t.opts.Identify(ps.proc)
	} else {
		c = clients.FromProcess(ps.proc)
	}
	ps.client = &c
	return c
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

// olderCW orders CLOSE_WAIT sockets oldest first.
func olderCW(x, y *CloseWaitSocket) bool {
	if c := x.Since().Compare(y.Since()); c != 0 {
		return c < 0
	}
	return cmp.Or(cmp.Compare(x.Inode, y.Inode), x.Local.Compare(y.Local)) < 0
}

// MaxPoints bounds a process's points in an Analysis: a longer series is
// cut into MaxPoints runs of consecutive samples, each given as one point
// at its first sample's time with each state's most over the run, so that
// a spike still shows. A chart is not wider than that, and the points of
// an hour at 1 Hz (3,600 samples, 128 bytes each) of every process
// holding sockets were what a watch's final analysis spent most on: 460
// KB a process, 90 MB for 200.
const MaxPoints = 600

// points pairs counts (starting at absolute sample first) with their times,
// at most MaxPoints of them.
func (t *Tracker) points(c *series, first int) []Point {
	off := first - t.base
	// The samples in the window: i from max(0, -off), below
	// min(c.len(), len(t.times)-off).
	n := max(0, min(c.len(), len(t.times)-off)-max(0, -off))
	out := make([]Point, 0, min(n, MaxPoints))
	k := 0 // the sample's place among the n
	c.each(func(i int, x Counts) bool {
		j := off + i
		if j < 0 || j >= len(t.times) {
			return true
		}
		// Sample k goes to run k*MaxPoints/n: runs of n/MaxPoints samples
		// or one more, in order.
		if b := k * MaxPoints / n; n <= MaxPoints || b >= len(out) {
			out = append(out, Point{Time: t.times[j], Counts: x})
		} else {
			p := &out[len(out)-1]
			for s, v := range x {
				p.Counts[s] = max(p.Counts[s], v)
			}
		}
		k++
		return true
	})
	return out
}

// fitRecent fits CLOSE_WAIT over the trailing Options.Recent. The recent
// window needs only half its length covered (MinDuration capped at Recent/2),
// or a short Recent could never give a verdict.
func (t *Tracker) fitRecent(c *series, first int, end time.Time) Trend {
	o := t.opts
	o.MinDuration = min(o.MinDuration, o.Recent/2)
	return t.fit(c, first, Counts.Leaked, end.Add(-o.Recent), o)
}

// window returns the counts (from absolute sample first) at or after from
// that are still in the tracker's window, in a buffer the next call reuses.
func (t *Tracker) window(c *series, first int, from time.Time) []Counts {
	off := first - t.base
	out := t.windowCounts[:0]
	c.each(func(i int, x Counts) bool {
		if j := off + i; j >= 0 && j < len(t.times) && !t.times[j].Before(from) {
			out = append(out, x)
		}
		return true
	})
	t.windowCounts = out
	return out
}

// stepOf turns a Growing CLOSE_WAIT trend into Step when the rise is
// bounded, by either of two signs:
//   - the rise is no more than the ESTABLISHED connections the process had
//     before it began: the broker closed connections it had, and it holds
//     what it had (5 closed at once, a sixth later, of 6 connections);
//   - the rise came at once and held: every change within two consecutive
//     sample intervals, all upward, none in the window's first or last
//     interval (the count may have been moving before it or go on after).
//
// Growth is what is left: more CLOSE_WAIT than connections it had, arriving
// over time: new connections made and never closed.
func stepOf(tr Trend, counts []Counts) Trend {
	if tr.Verdict != Growing || len(counts) < 3 {
		return tr
	}
	base := counts[0].Leaked()
	estBefore, top := 0, base
	rising := false
	first, last := -1, -1
	for i, c := range counts {
		l := c.Leaked()
		if !rising && l > base {
			rising = true
		}
		if !rising {
			estBefore = max(estBefore, c.Get(netstat.Established))
		}
		top = max(top, l)
		if i > 0 {
			switch d := l - counts[i-1].Leaked(); {
			case d < 0:
				first = -2 // a fall: not a single rise
			case d > 0 && first != -2:
				if first < 0 {
					first = i
				}
				last = i
			}
		}
	}
	bounded := top-base <= estBefore
	jump := first > 1 && last-first <= 1 && last < len(counts)-1
	if bounded || jump {
		tr.Verdict = Step
	}
	return tr
}

// established counts a sample's ESTABLISHED sockets.
func established(c Counts) int { return c.Get(netstat.Established) }

// fit fits the counts value takes of each sample (from absolute sample
// first) at or after from.
func (t *Tracker) fit(c *series, first int, value func(Counts) int, from time.Time, o Options) Trend {
	off := first - t.base
	times, counts := t.fitTimes[:0], t.fitCounts[:0]
	c.each(func(i int, x Counts) bool {
		if j := off + i; j >= 0 && j < len(t.times) && !t.times[j].Before(from) {
			times = append(times, t.times[j])
			counts = append(counts, value(x))
		}
		return true
	})
	t.fitTimes, t.fitCounts = times, counts // Fit keeps neither
	return Fit(times, counts, o)
}

func popcount(b *[1 << 16 / 64]uint64) int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}
