package netstat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kdiag/kdiag/netstat/sockfd"
)

// Sources a Scanner can read sockets from.
const (
	// SourceAuto uses netlink and falls back to /proc/net/tcp when netlink is
	// unavailable (or when ProcRoot is not /proc: a fixture tree has no
	// kernel behind it).
	SourceAuto = "auto"
	// SourceNetlink is the NETLINK_SOCK_DIAG dump, with the state filter in
	// the kernel and socket ages from tcp_info.
	SourceNetlink = "netlink"
	// SourceProc is /proc/net/tcp and tcp6 (no ages).
	SourceProc = "proc"
)

// SourceNames lists the values of Scanner.Source, for flag help.
var SourceNames = []string{SourceAuto, SourceNetlink, SourceProc}

// Scanner takes snapshots of the TCP sockets of a host's processes: it
// groups the processes by network namespace (/proc/<pid>/ns/net), dumps each
// namespace's sockets once, filters them by the query, and attributes the
// ones left to their (pid, fd) by reading only the fds of that namespace's
// processes. Its Attributor keeps what it found, so a repeated Scan (kdiag
// watch calls it every second) verifies known sockets instead of walking.
//
// A Scanner is safe to call repeatedly but not concurrently: Scan updates
// its caches without locks.
type Scanner struct {
	// ProcRoot is the root of the proc filesystem, "/proc" on a host.
	ProcRoot string
	// Source is SourceAuto (the default when ""), SourceNetlink or
	// SourceProc.
	Source string
	// Now is the clock for Snapshot.Time; nil means time.Now.
	Now func() time.Time
	// NoCache makes the scanner keep nothing between scans: set it for a
	// single scan (kdiag scan), leave it false for repeated ones (kdiag
	// watch), which the cache makes cheap.
	NoCache bool
	// InfoEvery is how often a repeated scan (NoCache false) asks the
	// kernel for tcp_info, and then only for CLOSE_WAIT sockets; the scans
	// in between carry CLOSE_WAIT ages forward (see ageCache) and report no
	// age for other states. 0 means DefaultInfoEvery. A single scan
	// (NoCache) asks tcp_info for every socket, every time.
	InfoEvery time.Duration

	// NoAges has a single scan (NoCache) ask the kernel for no tcp_info,
	// so that its sockets have no age: kdiag scan's broker host view sets
	// it for its table and JSON, which show none. tcp_info is most of a
	// dump's kernel time and a third of each reply (see
	// encodeInetDiagReq).
	NoAges bool

	// Changes, when set, counts the kernel's TCP state changes (kdiag
	// watch sets it from package events). A repeated scan then reads it
	// first and, when no socket entered or left a state the query asks
	// for since the count read before the last dump, serves that dump
	// again instead of a new one (see gate), for at most RefreshEvery.
	// The snapshots Scan returns must then not be modified, and hold
	// until the next Scan only: a served snapshot shares its sockets with
	// the last one, whose ages it advances in place (kdiag watch is done
	// with each snapshot before it scans again).
	Changes StateChanges
	// RefreshEvery is how long a scan gated by Changes may serve the last
	// dump; 0 means DefaultRefreshEvery.
	RefreshEvery time.Duration
	// FDs is where attribution reads which process holds which socket:
	// FDsAuto (the default when ""), FDsIterator or FDsProc.
	FDs string
	// Transitions, when set, drains the kernel's records of sockets
	// entering CLOSE_WAIT and being reset out of it (kdiag watch --events):
	// a CLOSE_WAIT that began during the watch then has its exact age, and
	// a held CLOSE socket the time since its reset (see applyTransitions).
	Transitions TransitionSource

	// Unordered leaves the sockets in the order the dumps listed them
	// instead of sorting them by state, then local and remote address:
	// kdiag watch, which only counts them, sets it unless it records the
	// snapshots, and saves the sort's keys (24 bytes a socket, kept for
	// the next scan: 1.4 MB at 60,000) and its time; kdiag scan sets it for
	// its table, one row a process (3.4 ms of a case D close-wait scan).
	Unordered bool

	// CountHeld has a one-shot scan (NoCache) whose query leaves CLOSE
	// out count the held CLOSE sockets it leaves out (Snapshot.HeldLeftOut,
	// and a note): those the query would keep with CLOSE in it, of the
	// processes its remote filters select from what it sees (see Query:
	// without the other states' sockets, not dumped, nor earlier scans).
	// They are the same leak as CLOSE_WAIT, one stage later. It reads them
	// from the pass over every socket fd, whose records then carry each
	// socket's state (sockfd.FD.HeldClose): no dump of the other states
	// and no walk of /proc. Where the socket fd iterator cannot be had it
	// says, in a note, that they were not counted. kdiag scan sets it.
	CountHeld bool

	// Phase, when set, is called as each stage of a full scan ends, with
	// its name (kdiag scan's hidden --phases prints them with the time:
	// where BENCHMARKS.md's breakdowns of a scan come from).
	Phase func(name string)

	// trans is what Transitions told, for the scans to come.
	trans transitionLog

	// dumps counts the full scans, for Snapshot.Dump.
	dumps uint64
	// gate is what the last full scan left for the scans that Changes
	// lets skip it.
	gate scanGate
	// ages carries CLOSE_WAIT ages between tcp_info scans.
	ages ageCache
	// others counts the last scan's sockets of states outside ageStates,
	// which decides how a tcp_info scan asks (see infoRequest).
	others int

	// cws remembers, in a repeated scan of a query with CLOSE, the
	// CLOSE_WAIT sockets it saw, by inode (see cwIndex): a socket the
	// kernel later resets keeps its inode, so the held CLOSE fd it becomes
	// is still known to point at its broker.
	cws cwIndex
	// held carries the held CLOSE sockets between full fd walks.
	held heldCache
	// chosen remembers, in a repeated scan, the processes the query's
	// remote filters selected for their held CLOSE sockets (see Query).
	chosen *chosenPIDs
	// tables is the scan's tableIndex, its memory reused by the next.
	tables tableIndex
	// sortKeys are a repeated scan's sort keys, reused by the next.
	sortKeys []sortKey
	// spare is the sockets' memory of a snapshot given back (Recycle),
	// which the next dump of the scanner's own namespace decodes into.
	spare []Socket
	// gateBack says the caller gave back (Recycle) the snapshot whose
	// sockets the gate keeps to serve: once the gate must dump again, that
	// memory is the dump's (see Recycle).
	gateBack bool
	// dedupInodes is a repeated scan's inode buffer for dedupSocketsWith.
	dedupInodes []uint64
	// lastDumped is the number of sockets the last scan's dumps listed.
	lastDumped int
	// kafka keeps, in a repeated scan, what each process's own files said
	// of its Kafka client (ownKafkaReason), by pid; kafkaMu guards it, as
	// processes reads them on several workers.
	kafka   map[int]kafkaSeen
	kafkaMu sync.Mutex

	attr *Attributor
	// iter is the socket fd iterator (FDs), opened on first use, with
	// iterProto when it reads each socket's protocol; iterErr is why auto
	// found none.
	iter      *sockfd.Iterator
	iterProto bool
	iterErr   error
	// lastStats sums the attribution stats of the last Scan.
	lastStats AttributeStats
	// euid decides whether other namespaces are dumped through netlink
	// (setns needs CAP_SYS_ADMIN) or through /proc/<pid>/net/tcp.
	euid int
}

// NewScanner returns a Scanner reading procRoot with the auto source.
func NewScanner(procRoot string) *Scanner {
	return &Scanner{ProcRoot: procRoot, Source: SourceAuto, attr: NewAttributor(procRoot), euid: os.Geteuid()}
}

// notes collects a scan's notes (Snapshot.Notes) and details
// (Snapshot.Details), each said once, in order.
type notes struct {
	list, details []string
	seen          map[string]bool
}

func (n *notes) add(format string, args ...any) {
	n.put(&n.list, fmt.Sprintf(format, args...))
}

// detail adds a detail: what a host whose processes and connections come
// and go makes of nearly every scan, and that limits nothing it reports.
func (n *notes) detail(format string, args ...any) {
	n.put(&n.details, fmt.Sprintf(format, args...))
}

func (n *notes) put(to *[]string, s string) {
	if n.seen == nil {
		n.seen = map[string]bool{}
	}
	if !n.seen[s] {
		n.seen[s] = true
		*to = append(*to, s)
	}
}

// merge adds o's notes and details after n's, in o's order.
func (n *notes) merge(o *notes) {
	for _, x := range o.list {
		n.add("%s", x)
	}
	for _, x := range o.details {
		n.detail("%s", x)
	}
}

// nsGroup is one network namespace and the candidate processes in it.
type nsGroup struct {
	ino  uint64
	host bool
	pids []int
}

// Scan takes one snapshot of the sockets q asks for. Conditions that limit
// what it sees (a process that exited, fds it may not read, a namespace it
// cannot enter) are Snapshot.Notes; it returns an error only when it cannot
// read the host's sockets or list its processes at all.
//
// It is a sequence of stages, each a method below, in this order.
func (s *Scanner) Scan(ctx context.Context, q Query) (*Snapshot, error) {
	source, err := s.prepare()
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Time: s.now(), Sockets: []Socket{}, Processes: []Process{}}
	changes, gated := s.changes(q)
	refresh := cmp.Or(s.RefreshEvery, DefaultRefreshEvery)
	if gated && s.gate.fresh(q, changes, snap.Time, refresh) {
		s.gate.woken = 0
		s.gateBack = false // handed out again, until given back
		return s.gate.carry(snap.Time), nil
	}
	if gated {
		s.gate.note(q, changes, snap.Time, refresh)
	}
	if s.gateBack && s.gate.last != nil {
		// This dump replaces what the gate kept, which the caller has
		// given back: the dump decodes into it.
		s.reuse(s.gate.last.Sockets)
		s.gate.last = nil
	}
	s.gateBack = false
	var n notes
	sel, err := s.selectProcesses(q, &n)
	if err != nil {
		return nil, err
	}
	s.phase("processes listed")
	states := q.states()
	info, infoScan := s.ageRequest(states, snap.Time)
	// Held CLOSE sockets are the TCP fds no dump lists: telling them needs
	// every table state dumped (and the full fd walk, heldClosed). Other
	// queries pay for neither.
	dumpStates, wantClose := states, states.Has(Close)
	if wantClose {
		dumpStates |= tableStates
	}
	countHeld := s.CountHeld && s.NoCache && !wantClose
	pre, err := s.fdSource(ctx, sel, wantClose, countHeld)
	if err != nil {
		return nil, err
	}
	// The kernel filters by local port where the dump need not list every
	// socket: a query with CLOSE needs them all (the held CLOSE sockets
	// are the TCP fds in no dump), and collect filters those.
	var sports []uint16
	if !wantClose {
		sports = q.ListenPorts
	}
	dumps := s.dumpAll(ctx, sel.groups, source, dumpStates, info, sports)
	s.phase("dumped")
	defer func() {
		for _, d := range dumps {
			if d.spill != nil {
				d.spill.release() // a scan that returned early leaves none mapped
			}
		}
	}()
	var tables *tableIndex
	if wantClose {
		tables = &s.tables
		tables.reset()
		if !s.NoCache {
			s.cws.gen++
			tables.cw = &s.cws
		}
	}
	// A scan with CLOSE that reads every fd (a one-shot scan, or one that
	// passed over the socket fds) keeps the sockets it was not asked for:
	// heldClosed needs no walk of its own for the processes read whole.
	// (Another repeated scan's attribution mostly verifies its cache and
	// walks little.)
	s.attr.CollectOthers = wantClose && (s.NoCache || pre != nil)
	s.attr.ResetOthers()
	var tableDone *fdTable
	var attributing func([]Socket) error
	waited := false
	if pre != nil {
		defer func() {
			if !waited { // collect failed before attributing: end the pass
				if table, err := pre.wait(); err == nil {
					table.release()
				}
				if s.NoCache {
					s.Close()
				}
			}
		}()
		attributing = func(kept []Socket) error {
			waited = true
			s.phase("joined")
			pre.find(kept)
			table, err := pre.wait()
			s.phase("fds passed")
			if s.NoCache {
				s.Close() // a one-shot scan's: nothing passes again
			}
			if err != nil && s.FDs == FDsIterator {
				return err
			}
			if err != nil && !s.NoCache {
				// Attribution walks /proc, and keeps what it finds, after all.
				s.attr.NoCache = false
			}
			if err == nil {
				s.attr.table = table
				tableDone = table
			}
			return nil
		}
	}
	defer func() {
		if tableDone != nil {
			s.attr.table = nil
			tableDone.release()
		}
	}()
	stats, err := s.collect(ctx, snap, dumps, q, infoScan, tables, attributing, &n)
	if err != nil {
		return nil, err
	}
	s.phase("joined and attributed")
	if wantClose {
		s.heldClosed(ctx, snap, sel, q, tables)
	}
	if countHeld {
		snap.HeldLeftOut = s.countHeldLeftOut(snap, q, sel, tableDone, &n)
	}
	s.recordAges(snap, infoScan)
	s.applyTransitions(snap, &n)
	s.dropClosed(snap, sel, source, &n)
	snap.Unseen = s.unseen(snap.Sockets, stats, sel.restricted, &n)
	s.restrict(snap, sel, q.KeepOthers)
	s.phase("held, ages, unseen")
	switch {
	case s.Unordered:
		s.sortKeys = nil
	case s.NoCache:
		sortSockets(snap.Sockets)
	default:
		sortSocketsWith(snap.Sockets, &s.sortKeys)
	}
	s.phase("sorted")
	s.sumStats(stats)
	s.lastStats.Passes += s.attr.heldPasses
	snap.Processes, snap.Sockets = s.processes(ctx, snap.Sockets, sel.groups, q, sel.restricted, snap.Time, &n)
	s.phase("processes read")
	snap.Notes, snap.Details = n.list, n.details
	snap.Missing = sel.missing
	s.dumps++
	snap.Dump = s.dumps
	if gated {
		s.gate.dumpedAt(snap, q, changes)
	}
	return snap, nil
}

// Recycle gives snap, a snapshot s.Scan returned, back to s: the caller is
// done with it, and the next Scan may decode its dump into the memory of
// snap's sockets instead of allocating a slice for it (60,000 sockets: 7.7
// MB a scan, and the dump's spill chunks beside it). snap.Sockets is set to
// nil; no other reference to those sockets may be used after (they will
// be overwritten). Recycle is optional: a snapshot not given back stays
// valid and unaltered by later scans (except one a gated Scanner served,
// see Changes). A snapshot whose sockets the gate keeps to serve again is
// left as it is, and a Scanner with NoCache reuses nothing.
func (s *Scanner) Recycle(snap *Snapshot) {
	if snap == nil || s.NoCache {
		return
	}
	if g := s.gate.last; g != nil && sameMemory(g.Sockets, snap.Sockets) {
		// The gate serves these again; the dump that replaces them
		// decodes into them. Before, that dump allocated anew while the
		// gate still held them: with events, at 60,000 sockets, every
		// refresh (10 s) held two snapshots' sockets.
		s.gateBack = true
		return
	}
	socks := snap.Sockets
	snap.Sockets = nil
	s.reuse(socks)
}

// reuse keeps socks' memory for the next dump, unless it has none or is
// more than the sockets left need.
func (s *Scanner) reuse(socks []Socket) {
	if cap(socks) == 0 || (s.lastDumped > 0 && cap(socks) > 4*s.lastDumped+1024) {
		return
	}
	s.spare = socks[:0]
}

// DropRecycled lets go of the memory Recycle gave back, and of the
// snapshot the gate keeps to serve, for a caller done scanning that needs
// the memory for something else (kdiag watch's final analysis): the next
// Scan, if any, dumps and allocates afresh. With events, the gate's kept
// sockets (7.7 MB at 60,000) were live through the final analysis, which
// made watch's peak.
func (s *Scanner) DropRecycled() {
	s.spare = nil
	s.gate.last, s.gateBack = nil, false
}

// sameMemory reports whether a and b are slices of one array (their
// capacities end at the same element).
func sameMemory(a, b []Socket) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:cap(a)][cap(a)-1] == &b[:cap(b)][cap(b)-1]
}

// fdSource readies attribution's source of socket fds: for a one-shot scan
// with the iterator, a pass started now, while the kernel dumps (its
// result is then the Attributor's table); for a repeated scan, the
// iterator itself, for the passes the Attributor makes when it must walk.
// nil and no error: /proc/<pid>/fd, as before the iterator. countHeld
// has a one-shot scan's pass read each socket's state (CountHeld), and so
// pass whatever the host's size, except for a few processes (--pid),
// whose fds it walks as before: countHeldLeftOut passes after the dump,
// not beside it (the two at once took more than a low open-file limit
// allows, and the dump failed).
//
// A repeated scan of a query with CLOSE reads every socket fd every scan
// anyway (heldClosed), so it too passes beside the dump and attributes from
// that pass alone, keeping no holders between scans: one pass a scan
// instead of a pass for the held sockets and readlinks to verify the cached
// holders, and no cache (80,000 socket fds: 5 MB).
func (s *Scanner) fdSource(ctx context.Context, sel selection, wantClose, countHeld bool) (*prefetch, error) {
	s.attr.fds = nil
	if s.NoCache || (wantClose && s.mayIterate(true)) {
		pre, err := s.startPrefetch(ctx, sel.groups, sel.cand, !sel.restricted, wantClose || countHeld)
		if pre != nil && !s.NoCache {
			s.attr.NoCache, s.attr.cache = true, nil
		}
		return pre, err
	}
	if (s.FDs == "" || s.FDs == FDsAuto) && sel.restricted && len(sel.cand) <= restrictedFrom {
		return nil, nil // a few processes: walking theirs costs less
	}
	it, err := s.openIterator(wantClose)
	if err != nil {
		return nil, err
	}
	s.attr.fds = it
	return nil, nil
}

// prepare checks the platform and the source, and readies the Attributor
// for ProcRoot; it returns the source to read.
func (s *Scanner) prepare() (string, error) {
	if runtime.GOOS != "linux" && s.ProcRoot == "/proc" {
		return "", fmt.Errorf("reading sockets needs Linux (/proc and NETLINK_SOCK_DIAG), and this is %s: run kdiag scan and watch on the Linux host", runtime.GOOS)
	}
	if s.attr == nil || s.attr.ProcRoot != s.ProcRoot {
		s.attr = NewAttributor(s.ProcRoot)
	}
	s.attr.NoCache = s.NoCache
	source := cmp.Or(s.Source, SourceAuto)
	if !slices.Contains(SourceNames, source) {
		return "", fmt.Errorf("unknown socket source %q (want one of %s)", source, strings.Join(SourceNames, ", "))
	}
	return source, nil
}

// phase reports the end of a stage to Phase.
func (s *Scanner) phase(name string) {
	if s.Phase != nil {
		s.Phase(name)
	}
}

// now is the Scanner's clock.
func (s *Scanner) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// selection is the processes a scan reads: the candidates the query
// allows (restricted when --pid or --process chose them) grouped by network
// namespace.
type selection struct {
	cand       []int
	restricted bool
	groups     []nsGroup
	// missing are the pids of --pid that name no process.
	missing []int
}

// selectProcesses lists the processes, forgets the cached holders of those
// gone, and picks and groups the candidates.
func (s *Scanner) selectProcesses(q Query, n *notes) (selection, error) {
	all, err := listPIDs(s.ProcRoot)
	if err != nil {
		return selection{}, fmt.Errorf("list processes: %w", err)
	}
	alive := make(map[int]bool, len(all))
	for _, p := range all {
		alive[p] = true
	}
	s.attr.Prune(func(pid int) bool { return alive[pid] })
	s.chosen.prune(func(pid int) bool { return alive[pid] })
	var sel selection
	sel.cand, sel.restricted, sel.missing = s.candidates(q, all, alive, n)
	sel.groups = s.group(sel.cand, sel.restricted, n)
	return sel, nil
}

// ageRequest returns what to ask tcp_info for: a single scan, every state;
// a repeated one, CLOSE_WAIT every InfoEvery and nothing in between
// (infoScan false: the ages are carried forward).
func (s *Scanner) ageRequest(states StateSet, now time.Time) (info StateSet, infoScan bool) {
	if s.NoCache {
		if s.NoAges {
			return 0, true
		}
		return states, true
	}
	infoScan = s.ages.due(now, cmp.Or(s.InfoEvery, DefaultInfoEvery))
	return s.infoRequest(states, infoScan), infoScan
}

// collect puts the namespaces' sockets into snap.Sockets, keeps those q
// matches, carries ages forward between tcp_info scans and attributes each
// namespace's sockets to its processes. Netlink dumps are still in their
// spill chunks: each is joined into the slice, sized for all of them, then
// deduplicated and filtered there, so no socket is held twice (two
// namespaces of 10,000 CLOSE_WAIT each held every socket twice, in its
// namespace's slice and in the joined one). /proc/net/tcp's are copied in
// only when there are several. It fails only when the host's dump failed.
//
// With tables, it also notes every dumped socket there before the filter:
// what heldClosed needs to know which fds are in a kernel table. attributing,
// when set, is called with the sockets kept, before they are attributed.
func (s *Scanner) collect(ctx context.Context, snap *Snapshot, dumps []nsDump, q Query, infoScan bool, tables *tableIndex, attributing func([]Socket) error, n *notes) ([]AttributeStats, error) {
	total, full := 0, 0 // sockets dumped (a bound on those kept); dumps with any
	spilled := false
	for _, d := range dumps {
		if k := len(d.socks) + d.spill.len(); k > 0 {
			total += k
			full++
		}
		spilled = spilled || d.spill != nil
	}
	if !s.NoCache {
		s.lastDumped = total
	}
	join := full > 1 || spilled
	// inPlace is the dump whose sockets are in snap.Sockets already: the
	// host's, decoded into a recycled snapshot's memory (see Recycle), its
	// spill (when it outgrew that) joined after them, with room for the
	// other namespaces'.
	inPlace := -1
	if len(dumps) > 0 && dumps[0].err == nil && dumps[0].spill != nil && cap(dumps[0].spill.s) > 0 {
		d := &dumps[0]
		snap.Sockets = d.spill.collectRoom(total - d.spill.len())
		inPlace, join = 0, true
	} else if join {
		snap.Sockets = make([]Socket, 0, total)
	}
	// The dedup's buffer of inodes: with tables, their list of every
	// dumped inode (one list, not a second beside it); else a repeated
	// scan's own, emptied for each namespace.
	inodes := func() *[]uint64 {
		switch {
		case tables != nil:
			return &tables.inodes
		case !s.NoCache:
			s.dedupInodes = s.dedupInodes[:0]
			return &s.dedupInodes
		}
		return nil
	}
	// Joined and filtered first, attributed after: a one-shot scan's pass
	// over the socket fds may still be running, and is told what to find
	// (attributing), so that it can stop once it has.
	type nsRange struct {
		g          nsGroup
		start, end int
	}
	var ranges []nsRange
	sources := map[string]bool{}
	for i, d := range dumps {
		g := d.group
		n.merge(&d.notes)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if d.err != nil {
			if g.host {
				return nil, d.err
			}
			n.add("network namespace %d (pid %d): %v", g.ino, g.pids[0], d.err)
			continue
		}
		sources[d.src] = true
		socks := d.socks
		start := len(snap.Sockets)
		deduped := true
		switch {
		case i == inPlace:
			start = 0
			socks = dedupSocketsWith(snap.Sockets, inodes())
		case d.spill != nil:
			snap.Sockets = d.spill.appendTo(snap.Sockets)
			socks = dedupSocketsWith(snap.Sockets[start:], inodes())
		case join:
			snap.Sockets = append(snap.Sockets, d.socks...)
			socks = snap.Sockets[start:]
			deduped = false
		default:
			deduped = false
		}
		if tables != nil {
			tables.add(socks, deduped)
		}
		kept := socks[:0]
		// With remote filters, the sockets of the other states that
		// match them select their holders' held CLOSE sockets of unknown
		// remote (see Query); heldClosed finds those holders.
		matchOthers := tables != nil && q.remoteFiltered()
		for i := range socks {
			if q.matchSocket(&socks[i]) {
				socks[i].NetNS = g.ino
				kept = append(kept, socks[i])
			} else if matchOthers && socks[i].Inode != 0 && socks[i].State != Listen && q.matchAddrs(socks[i].Local, socks[i].Remote) {
				tables.match = append(tables.match, socks[i].Inode)
			}
		}
		if !s.NoCache && !infoScan {
			s.ages.carry(kept, snap.Time, ageStates)
		}
		switch {
		case join:
			snap.Sockets = snap.Sockets[:start+len(kept)] // the next namespace's go right after
		case len(kept) > 0:
			snap.Sockets = kept // the only namespace with sockets: no copy
			start = 0
		default:
			start = len(snap.Sockets)
		}
		ranges = append(ranges, nsRange{g, start, start + len(kept)})
	}
	if attributing != nil {
		if err := attributing(snap.Sockets); err != nil {
			return nil, err
		}
	}
	stats := make([]AttributeStats, 0, len(ranges))
	for _, r := range ranges {
		stats = append(stats, s.attr.AttributeSockets(ctx, r.g.pids, snap.Sockets[r.start:r.end]))
	}
	snap.Source = SourceNetlink
	if sources[SourceProc] && !sources[SourceNetlink] {
		snap.Source = SourceProc
	}
	return stats, nil
}

// recordAges keeps, in a repeated scan, the CLOSE_WAIT ages of a tcp_info
// scan for the scans in between, and drops the ages of other states (asked
// with CLOSE_WAIT's by infoRequest, but not reported by a repeated scan).
func (s *Scanner) recordAges(snap *Snapshot, infoScan bool) {
	if s.NoCache {
		return
	}
	s.others = 0
	for i := range snap.Sockets {
		x := &snap.Sockets[i]
		if !ageStates.Has(x.State) {
			s.others++
			x.Age, x.HasAge = 0, false
		}
	}
	if infoScan {
		s.ages.record(snap.Sockets, snap.Time, ageStates)
	}
}

// maxRecheck bounds the unattributed sockets dropClosed looks up: more is
// not churn but a blind spot (fds kdiag may not read), which unseen says.
const maxRecheck = 64

// dropClosed takes out of snap the unattributed sockets that were closed
// while the scan ran: on a host whose connections churn, a socket the dump
// listed may be closed before attribution reads its holder's fds, and left
// in it would read as a socket kdiag could not see (Snapshot.Unseen: kdiag
// watch and doctor then exit 3). Each is looked up again by its addresses
// (one netlink request), in the namespace it was dumped from: the
// scanner's own, or, as root, another one a process of the scan's groups
// is in (containers, a test's private namespace). One gone, or an orphan
// since (no inode), is dropped, with a note.
func (s *Scanner) dropClosed(snap *Snapshot, sel selection, source string, n *notes) {
	if source == SourceProc || s.ProcRoot != "/proc" {
		return
	}
	where := s.recheckPaths(sel.groups)
	byNS := map[uint64][]*Socket{}
	total := 0
	for i := range snap.Sockets {
		x := &snap.Sockets[i]
		if _, ok := where[x.NetNS]; !ok || x.PID != 0 || x.Inode == 0 || x.State == Close {
			continue
		}
		if total == maxRecheck {
			return
		}
		total++
		byNS[x.NetNS] = append(byNS[x.NetNS], x)
	}
	gone := map[*Socket]bool{}
	for ns, cands := range byNS {
		alive, err := lookupSockets(where[ns], cands)
		if err != nil {
			continue // a namespace gone or refused: unseen says what it must
		}
		for i, ok := range alive {
			if !ok {
				gone[cands[i]] = true
			}
		}
	}
	if len(gone) == 0 {
		return
	}
	kept := snap.Sockets[:0]
	for i := range snap.Sockets {
		if !gone[&snap.Sockets[i]] {
			kept = append(kept, snap.Sockets[i])
		}
	}
	snap.Sockets = kept
	n.detail("%s closed while the scan ran: left out", cmdPlural(len(gone), "socket", "sockets"))
}

// recheckPaths maps the network namespaces of groups that dropClosed can
// look sockets up in to their paths: "" for the scanner's own (a socket's
// NetNS may be 0 there), NetNSPath of a process in it for another, which
// only root may enter.
func (s *Scanner) recheckPaths(groups []nsGroup) map[uint64]string {
	where := map[uint64]string{}
	for _, g := range groups {
		switch {
		case g.host:
			where[g.ino], where[0] = "", ""
		case s.euid == 0 && len(g.pids) > 0:
			where[g.ino] = NetNSPath(s.ProcRoot, g.pids[0])
		}
	}
	return where
}

// restrict keeps, with --pid or --process, only the selected processes'
// sockets, and with others the unattributed ones toward an address a
// selected process has a socket to, in its namespace (Query.KeepOthers).
func (s *Scanner) restrict(snap *Snapshot, sel selection, others bool) {
	if !sel.restricted {
		return
	}
	keep := make(map[int]bool, len(sel.cand))
	for _, p := range sel.cand {
		keep[p] = true
	}
	type dest struct {
		ns     uint64
		remote netip.AddrPort
	}
	var toward map[dest]bool
	if others {
		toward = map[dest]bool{}
		for _, x := range snap.Sockets {
			if keep[x.PID] && x.State != Listen && x.Remote.IsValid() {
				toward[dest{x.NetNS, x.Remote}] = true
			}
		}
	}
	snap.Sockets = slices.DeleteFunc(snap.Sockets, func(x Socket) bool {
		if x.PID == 0 {
			return !toward[dest{x.NetNS, x.Remote}]
		}
		return !keep[x.PID]
	})
}

// sumStats keeps the attribution stats of the scan in lastStats (tests and
// benchmarks read them).
func (s *Scanner) sumStats(stats []AttributeStats) {
	s.lastStats = AttributeStats{}
	for _, st := range stats {
		s.lastStats.Wanted += st.Wanted
		s.lastStats.Found += st.Found
		s.lastStats.Cached += st.Cached
		s.lastStats.Walked += st.Walked
		s.lastStats.Links += st.Links
		s.lastStats.Passes += st.Passes
		s.lastStats.Exited = append(s.lastStats.Exited, st.Exited...)
		s.lastStats.Denied = append(s.lastStats.Denied, st.Denied...)
		s.lastStats.Failed = append(s.lastStats.Failed, st.Failed...)
	}
}

// splitAbove is the number of sockets of other states above which a
// repeated scan's tcp_info dump asks for CLOSE_WAIT (with tcp_info) and the
// other states (without) in separate requests. Each request walks the
// kernel's whole established hash (262,144 buckets here) once per family,
// which costs about as much as tcp_info for ~7,000 sockets
// (BenchmarkDumpNetlink/cw+est/*, 2026-12-02: 6,000 sockets, of which 4,000
// ESTABLISHED: one request with tcp_info for all 17 ms, split 21 ms, none
// 13.5 ms).
const splitAbove = 10000

// infoRequest returns the states a repeated scan asks tcp_info for: none
// between tcp_info scans; on one, CLOSE_WAIT alone when the last scan saw
// many sockets of the other states, else every state in one request (the
// other states' ages are then dropped, so that a repeated scan reports them
// never rather than every InfoEvery).
func (s *Scanner) infoRequest(states StateSet, infoScan bool) StateSet {
	switch {
	case !infoScan || states&ageStates == 0:
		return 0
	case s.others > splitAbove:
		return states & ageStates
	}
	return states
}

// candidates returns the pids whose fds may be read: all of them, or those
// --pid and --process select (restricted true); and the pids of --pid that
// name no process (Snapshot.Missing).
func (s *Scanner) candidates(q Query, all []int, alive map[int]bool, n *notes) (cand []int, restricted bool, missing []int) {
	cand = all
	if len(q.PIDs) > 0 {
		restricted = true
		cand = nil
		for _, p := range q.PIDs {
			if alive[p] {
				cand = append(cand, p)
			} else {
				missing = append(missing, p)
			}
		}
		slices.Sort(cand)
		cand = slices.Compact(cand)
		slices.Sort(missing)
		missing = slices.Compact(missing)
	}
	if q.Process != nil {
		restricted = true
		var keep []int
		for _, p := range cand {
			comm, cmdline, err := readProcNames(s.ProcRoot, p)
			if err != nil {
				continue // exited, or a kernel thread without cmdline
			}
			if q.Process.MatchString(comm) || q.Process.MatchString(cmdline) {
				keep = append(keep, p)
			}
		}
		if len(keep) == 0 {
			n.add("no process matches --process %q", q.Process.String())
		}
		cand = keep
	}
	return cand, restricted, missing
}

// group sorts pids by network namespace, the host's (the scanner's own)
// first. Without --pid or --process the host namespace is dumped even with
// no readable process in it, so unattributed sockets are still seen.
func (s *Scanner) group(pids []int, restricted bool, n *notes) []nsGroup {
	self, selfErr := NetNSOf(s.ProcRoot, 0)
	byNS, gnotes, exited := groupByNetNS(s.ProcRoot, pids)
	if exited != "" {
		n.detail("%s", exited)
	}
	for _, x := range gnotes {
		if s.euid == 0 && strings.Contains(x, "permission denied") {
			// GroupByNetNS advises running as root; kdiag is root
			// already, and what refuses it (a ptrace restriction, another
			// user namespace) is not kdiag's to fix.
			x = fmt.Sprintf("the network namespace of %s could not be read even as root (permission denied: ptrace restrictions or another user namespace); %s looked for in kdiag's own",
				pidList(byNS[0], s.comm), pronoun(len(byNS[0]), "its sockets were", "their sockets were"))
		}
		n.add("%s", x)
	}
	// Key 0 holds processes whose namespace could not be read (another
	// user's, when not root): most processes live in the host's, and
	// attribution there finds out.
	if unknown, ok := byNS[0]; ok {
		delete(byNS, 0)
		byNS[self] = append(byNS[self], unknown...)
		slices.Sort(byNS[self])
	}
	if selfErr != nil && len(byNS) > 0 && !restricted {
		// A fixture tree without self: the host namespace is the only one.
		merged := []int{}
		for _, ps := range byNS {
			merged = append(merged, ps...)
		}
		slices.Sort(merged)
		byNS = map[uint64][]int{self: merged}
	}
	if _, ok := byNS[self]; !ok && !restricted {
		byNS[self] = nil
	}
	out := make([]nsGroup, 0, len(byNS))
	for ns, ps := range byNS {
		out = append(out, nsGroup{ino: ns, host: ns == self, pids: ps})
	}
	slices.SortFunc(out, func(a, b nsGroup) int {
		if a.host != b.host {
			if a.host {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.ino, b.ino)
	})
	return out
}

// nsDump is what dump returned for one namespace.
type nsDump struct {
	group nsGroup
	socks []Socket
	// spill, when the dump left its sockets unjoined (dumpOptions.spill),
	// holds them instead of socks.
	spill *socketCollector
	src   string
	err   error
	notes notes
}

// dumpAll dumps every namespace of groups, in groups' order. The dumps are
// independent kernel walks, each mostly waiting on its own recvmsg, so they
// run at once (up to GOMAXPROCS): on a host with containers, or a bench run
// in a private namespace, the host's dump no longer waits for the others.
// A canceled ctx skips the dumps not yet started. With sports, a netlink
// dump lists only the sockets whose local port is one of them.
func (s *Scanner) dumpAll(ctx context.Context, groups []nsGroup, source string, states, info StateSet, sports []uint16) []nsDump {
	out := make([]nsDump, len(groups))
	spare := s.spare
	s.spare = nil
	one := func(i int) {
		d := &out[i]
		d.group = groups[i]
		if err := ctx.Err(); err != nil {
			d.err = err
			return
		}
		var into []Socket
		if i == 0 && groups[i].host {
			into = spare
		}
		d.socks, d.spill, d.src, d.err = s.dump(groups[i], into, source, states, info, sports, &d.notes)
	}
	if len(groups) == 1 {
		one(0)
		return out
	}
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i := range groups {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			one(i)
		}()
	}
	wg.Wait()
	return out
}

// dump reads the sockets of one namespace from the chosen source. It is
// called for several namespaces at once (dumpAll): it reads the Scanner's
// settings and writes only n. A netlink dump returns its sockets unjoined,
// in spill (joined in collect), decoded into into's memory as far as it
// goes (a recycled snapshot's, empty: see Recycle); /proc/net/tcp's, in
// socks.
func (s *Scanner) dump(g nsGroup, into []Socket, source string, states, info StateSet, sports []uint16, n *notes) (socks []Socket, spill *socketCollector, src string, err error) {
	useNetlink := source == SourceNetlink || (source == SourceAuto && s.ProcRoot == "/proc")
	if useNetlink {
		pid := 0
		if !g.host {
			pid = g.pids[0]
		}
		o := s.dumpOptions(pid, states, info)
		o.sports = sports
		// Every dump spills into chunks outside the heap, joined into one
		// slice of the exact size (collect). A repeated scan once kept a
		// decode buffer of the last dump's size and copied the result out
		// of it: at 60,000 sockets 7.7 MB held between scans, besides the
		// snapshot.
		o.spill = &socketCollector{s: into[:0]}
		switch {
		case g.host:
			socks, err = dumpNetlinkHost(states, o)
		case s.euid == 0:
			socks, err = dumpNetlinkInNetNS(NetNSPath(s.ProcRoot, pid), states, o)
		default:
			err = errNotRoot
		}
		if err == nil {
			return socks, o.spill, SourceNetlink, nil
		}
		if source == SourceNetlink && !errors.Is(err, errNotRoot) {
			return nil, nil, "", fmt.Errorf("netlink dump: %w", err)
		}
		if !errors.Is(err, errNotRoot) {
			n.add("netlink unavailable (%v): read /proc/net/tcp instead (no socket ages)", err)
		}
	}
	pid := 0
	if !g.host {
		pid = g.pids[0]
	}
	socks, err = ReadProcNetTCP(s.ProcRoot, pid, states)
	if err != nil {
		if errors.Is(err, ErrParse) && len(socks) > 0 {
			n.add("%v", err)
			return socks, nil, SourceProc, nil
		}
		return nil, nil, "", err
	}
	return socks, nil, SourceProc, nil
}

// dumpOptions returns how to dump the namespace of pid (0: the scanner's):
// tcp_info for info, and no AF_INET6 request when its sockstat6 says it has
// no IPv6 TCP socket (hasIPv6TCP). The AF_INET6 request walks the kernel's
// whole established hash, skipping the IPv4 sockets one by one: on a host
// with IPv4 only it is as costly as the IPv4 dump without tcp_info, for
// nothing.
func (s *Scanner) dumpOptions(pid int, states, info StateSet) dumpOptions {
	return dumpOptions{info: info, noIPv6: !hasIPv6TCP(s.ProcRoot, pid, states)}
}

// errNotRoot: entering another namespace (setns) needs CAP_SYS_ADMIN, so a
// non-root scan reads that namespace's /proc/<pid>/net/tcp instead.
var errNotRoot = errors.New("not root")

// processes reads the metadata of every process holding a reported socket,
// counts its sockets by state and says whether it is a Kafka client.
//
// A process that exits before its details are read no longer holds its
// sockets (its fds closed with it): they are left unattributed, or dropped
// when the query selects processes, and a note names it.
func (s *Scanner) processes(ctx context.Context, socks []Socket, groups []nsGroup, q Query, restricted bool, now time.Time, n *notes) ([]Process, []Socket) {
	// Counts per pid, in one pass: the sockets themselves are not copied.
	byPID := map[int]*procTally{}
	for i := range socks {
		x := &socks[i]
		if x.PID <= 0 {
			continue
		}
		t := byPID[x.PID]
		if t == nil {
			t = &procTally{}
			byPID[x.PID] = t
		}
		if x.State < maxState {
			t.states[x.State]++
		}
		if isBrokerSocket(*x, q.Brokers) {
			t.brokers++
		}
	}
	nsOf := map[int]uint64{}
	for _, g := range groups {
		for _, p := range g.pids {
			nsOf[p] = g.ino
		}
	}
	pids := make([]int, 0, len(byPID))
	for pid := range byPID {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	out := make([]Process, len(pids))
	failed := make([]bool, len(pids))
	// Each process is a handful of small /proc reads (gopsutil, cgroup,
	// environ, maps), independent of the others: read them on GOMAXPROCS
	// workers, as attribution does.
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(pids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				pid, t := pids[i], byPID[pids[i]]
				p, args, err := readProcess(ctx, s.ProcRoot, pid)
				failed[i] = err != nil
				if p.NetNS == 0 {
					p.NetNS = nsOf[pid]
				}
				for st, c := range t.states {
					if c > 0 {
						p.States[State(st).String()] = c
					}
				}
				ev := kafkaEvidence{procRoot: s.ProcRoot, pid: pid, name: p.Name, args: args,
					brokerSockets: t.brokers, haveBrokers: len(q.Brokers) > 0}
				p.Kafka = cmp.Or(s.kafkaOwn(ev, p.StartTime, now), brokerSocketsReason(ev))
				out[i] = p
			}
		}()
	}
	for i := range pids {
		work <- i
	}
	close(work)
	wg.Wait()
	s.pruneKafka(byPID)
	var exited []int
	gone := map[int]bool{}
	for i, f := range failed {
		if f {
			exited = append(exited, pids[i])
			gone[pids[i]] = true
		}
	}
	if len(exited) == 0 {
		return out, socks
	}
	out = slices.DeleteFunc(out, func(p Process) bool { return gone[p.PID] })
	left := 0
	for i := range socks {
		if gone[socks[i].PID] {
			socks[i].PID, socks[i].FD = 0, -1
			left++
		}
	}
	what := "left unattributed"
	if restricted {
		socks = slices.DeleteFunc(socks, func(x Socket) bool { return x.PID == 0 })
		what = "left out"
	}
	n.add("%s exited before %s details were read; %s %s", pidList(exited, nil), pronoun(len(exited), "its", "their"),
		cmdPlural(left, "socket is", "sockets are"), what)
	return out, socks
}

// procTally counts a process's sockets of a scan by state, and those to
// brokers.
type procTally struct {
	states  [maxState]int
	brokers int
}

// kafkaSeen is what a process's own files said of its Kafka client
// (ownKafkaReason) at a repeated scan: the process is known by its pid and
// start time, and the command line it had (an exec keeps both).
type kafkaSeen struct {
	start   time.Time
	cmdline string
	reason  string
	at      time.Time
}

// kafkaRecheck is how long a repeated scan trusts that a process's own
// files say nothing of a Kafka client: a JVM opens its jars as it loads
// classes, so the kafka-clients jar may be opened after its first scan.
// What they said once stays said for the process's life.
const kafkaRecheck = 30 * time.Second

// kafkaOwn returns ownKafkaReason(ev) for the process started at start,
// read afresh by a one-shot scan and, in a repeated one, when it has not
// been read for this process (or its command line changed, or it said
// nothing kafkaRecheck ago or more, or the clock went back). Reading it
// each scan cost a readlink of every fd of a JVM whose class path does
// not name kafka-clients (a Spring Boot fat jar), 20,000 a second for one
// leaking 20,000 sockets.
func (s *Scanner) kafkaOwn(ev kafkaEvidence, start, now time.Time) string {
	if s.NoCache {
		return ownKafkaReason(ev)
	}
	cmdline := strings.Join(ev.args, "\x00")
	s.kafkaMu.Lock()
	k, ok := s.kafka[ev.pid]
	s.kafkaMu.Unlock()
	if ok && k.start.Equal(start) && k.cmdline == cmdline &&
		(k.reason != "" || (now.Sub(k.at) < kafkaRecheck && !now.Before(k.at))) {
		return k.reason
	}
	k = kafkaSeen{start: start, cmdline: cmdline, reason: ownKafkaReason(ev), at: now}
	s.kafkaMu.Lock()
	if s.kafka == nil {
		s.kafka = map[int]kafkaSeen{}
	}
	s.kafka[ev.pid] = k
	s.kafkaMu.Unlock()
	return k.reason
}

// pruneKafka forgets the processes that hold none of the scan's sockets.
func (s *Scanner) pruneKafka(held map[int]*procTally) {
	for pid := range s.kafka {
		if held[pid] == nil {
			delete(s.kafka, pid)
		}
	}
}

// compareSockets orders sockets by state, then local and remote address.
// Each key is compared only when the ones before are equal (cmp.Or would
// evaluate all five, and the address comparisons are most of a 60,000-socket
// sort's time).
func compareSockets(a, b Socket) int {
	if c := cmp.Compare(a.State, b.State); c != 0 {
		return c
	}
	if c := a.Local.Compare(b.Local); c != 0 {
		return c
	}
	if c := a.Remote.Compare(b.Remote); c != 0 {
		return c
	}
	if c := cmp.Compare(a.NetNS, b.NetNS); c != 0 {
		return c
	}
	return cmp.Compare(a.Inode, b.Inode)
}

func cmdPlural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
