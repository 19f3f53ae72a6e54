package netstat

import (
	"bytes"
	"cmp"
	"context"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kdiag/kdiag/netstat/sockfd"
	"golang.org/x/sys/unix"
)

// A TCP socket whose connection the kernel reset or never made is in
// TCP_CLOSE and unhashed: it is in no inet_diag dump and no /proc/net/tcp
// line, yet the process that holds its fd holds it as much as before. This
// is what keepalive makes of a CLOSE_WAIT socket: the peer's FIN_WAIT_2
// side expires after its net.ipv4.tcp_fin_timeout (60 s), the next
// keepalive probe gets an RST, and the client's socket goes to TCP_CLOSE
// (tcp_reset, tcp_done: inet_unhash). ss and netstat show nothing; lsof says
// "can't identify protocol". kdiag finds such sockets by walking the fds of
// the processes it reads and keeping the socket fds whose inode no dump of
// their namespace listed and whose protocol, sockfs's system.sockprotoname
// extended attribute ("TCP", "TCPv6", "UNIX-STREAM", "UDP", ...: net/socket.c,
// sockfs_xattr_get), is TCP. They are reported in state CLOSE.

// tableStates are the states a dump lists so that heldClosed knows which
// TCP socket fds are in a kernel table: every state whose sockets have a
// file (TIME_WAIT and NEW_SYN_RECV sockets have none).
const tableStates = AllStates &^ (1<<TimeWait | 1<<NewSynRecv)

// heldFD is a TCP socket fd a process holds that no dump listed.
type heldFD struct {
	pid, fd int
	ino     uint64
	family  Family
}

// heldTCP returns the TCP sockets of pids whose inode known does not hold
// (known is sorted): from what the attribution walk collected for the pids
// it read whole (CollectOthers), and from a walk of every fd of the others.
// A process that exits or refuses its fds is skipped: attribution has said
// so already. It also returns the pids that hold a socket of match (sorted,
// a subset of known; nil when match is empty), read on the same walk.
func (a *Attributor) heldTCP(ctx context.Context, pids []int, known, match []uint64) ([]heldFD, map[int]bool) {
	var out []heldFD
	var rest []int
	var holders map[int]bool
	if len(match) > 0 {
		holders = map[int]bool{}
	}
	for _, p := range pids {
		if !a.Complete[p] {
			rest = append(rest, p)
		}
	}
	if len(a.Others) > 0 {
		w := a.worker()
		for _, o := range a.Others {
			if !a.Complete[o.pid] {
				continue
			}
			if inSorted(known, o.ino) {
				if holders != nil && inSorted(match, o.ino) {
					holders[o.pid] = true
				}
				continue
			}
			if o.family != 0 {
				out = append(out, o) // a pass said it is TCP
				continue
			}
			if fam := w.tcpFamily(a.ProcRoot+"/"+strconv.Itoa(o.pid)+"/fd", o.fd); fam != 0 {
				o.family = fam
				out = append(out, o)
			}
		}
		a.putWorker(w)
	}
	if more, ok := a.heldPass(rest, known, match, holders); ok {
		out, rest = append(out, more...), nil
	}
	for _, res := range a.pool(ctx, rest, func(w *attrWorker, pid int) attrResult {
		return w.held(a, pid, known, match)
	}) {
		for _, s := range res.seen {
			out = append(out, heldFD{pid: res.pid, fd: int(s.fd), ino: s.ino, family: Family(s.proto)})
		}
		if res.holdsMatch {
			holders[res.pid] = true
		}
	}
	slices.SortFunc(out, func(x, y heldFD) int {
		if x.pid != y.pid {
			return x.pid - y.pid
		}
		return x.fd - y.fd
	})
	return out, holders
}

// held reads every fd of pid: each socket whose inode known lacks and whose
// protocol is TCP goes into the result's seen, with its family as proto;
// holdsMatch says whether pid holds a socket of match.
func (w *attrWorker) held(a *Attributor, pid int, known, match []uint64) attrResult {
	res := attrResult{pid: pid}
	dir := a.ProcRoot + "/" + strconv.Itoa(pid) + "/fd"
	dfd, err := a.open(dir)
	if err != nil {
		classify(&res, err)
		return res
	}
	defer unix.Close(dfd)
	for {
		n, err := getdents(dfd, w.dents)
		if err != nil || n == 0 {
			return res
		}
		for off := 0; off < n; {
			var nameOff int
			nameOff, off = dirent(w.dents, off)
			fd, ok := parseFDName(w.dents[nameOff:off])
			if !ok {
				continue
			}
			ino, err := w.readSocketLink(dfd, &w.dents[nameOff])
			if err != nil || ino == 0 {
				continue
			}
			if inSorted(known, ino) {
				res.holdsMatch = res.holdsMatch || (len(match) > 0 && inSorted(match, ino))
				continue
			}
			if fam := w.tcpFamily(dir, fd); fam != 0 {
				res.seen = append(res.seen, attrSeen{ino: ino, fd: int32(fd), proto: uint8(fam)})
			}
		}
	}
}

// tcpFamily returns IPv4 or IPv6 when the socket fd of dir (a
// /proc/<pid>/fd directory) is a TCP socket, 0 for any other protocol or
// when it cannot be told (the fd closed meanwhile). getxattr follows the
// fd's link to the socket's inode, whose sockfs xattr handler answers with
// the protocol's name (struct proto's name: "TCP", "TCPv6"); it takes
// nothing from the process.
func (w *attrWorker) tcpFamily(dir string, fd int) Family {
	// Only for socket fds no dump listed (UNIX, UDP, netlink and the
	// held TCP ones), so the path's allocation is not on the hot path.
	n, err := unix.Getxattr(dir+"/"+strconv.Itoa(fd), "system.sockprotoname", w.link)
	if err != nil {
		return 0 // closed meanwhile, or (ERANGE) a name longer than TCP's
	}
	switch string(trimNUL(w.link[:n])) {
	case "TCP":
		return IPv4
	case "TCPv6":
		return IPv6
	}
	return 0
}

// inSorted reports whether ino is in the sorted inodes.
func inSorted(inodes []uint64, ino uint64) bool {
	_, found := slices.BinarySearch(inodes, ino)
	return found
}

// trimNUL drops the NUL the kernel writes after the name.
func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// tableIndex is what a scan's dumps listed, for heldClosed: every inode,
// and in a repeated scan the CLOSE_WAIT sockets, noted in cw. A Scanner
// keeps one and reuses its slice scan after scan (reset): made afresh, it
// was appended to from empty every scan, some five times its final size
// allocated on the way (1.25x growth past 256 elements: with the CLOSE_WAIT
// endpoints then listed beside it, 11 MB a scan at 20,000 CLOSE_WAIT and
// 40,000 ESTABLISHED sockets).
type tableIndex struct {
	inodes []uint64
	cw     *cwIndex
	// match are the inodes of the dumped sockets the query's remote
	// filters match but its states do not (collect): their holders are
	// selected processes (see Query), whose held CLOSE sockets of unknown
	// remote the scan keeps.
	match []uint64
}

// reset empties t for a scan, keeping its slice's memory unless the last
// scan used under a quarter of it (the sockets went away).
func (t *tableIndex) reset() {
	if cap(t.inodes) > 4*len(t.inodes)+1024 {
		t.inodes = nil
	}
	t.inodes, t.cw, t.match = t.inodes[:0], nil, t.match[:0]
}

// add notes socks, before the query's filter; noted says their inodes are
// in t.inodes already (the dedup appended them there).
func (t *tableIndex) add(socks []Socket, noted bool) {
	if !noted {
		t.inodes = slices.Grow(t.inodes, len(socks))
	}
	if t.cw != nil {
		n := 0
		for i := range socks {
			if socks[i].State == CloseWait && socks[i].Inode != 0 {
				n++
			}
		}
		// Most are there from the last scan: room for as many as either
		// scan saw (churn that outgrows it grows the table as append does).
		t.cw.t.reserve(max(t.cw.t.len(), n))
	}
	for i := range socks {
		x := &socks[i]
		if x.Inode == 0 {
			continue
		}
		if !noted {
			t.inodes = append(t.inodes, x.Inode)
		}
		if t.cw != nil && x.State == CloseWait {
			t.cw.saw(x)
		}
	}
}

// cwIndex is what a repeated scan of a query with CLOSE keeps of the
// CLOSE_WAIT sockets, by inode: their addresses, so that a socket the
// kernel later resets (it keeps its inode) is still known, held CLOSE, to
// point at its broker; and the holders the last scan found, the sockets
// the next may find reset. One table for both: there were two maps
// (addresses 88 bytes a socket, holders 40) and a list of the scan's
// CLOSE_WAIT endpoints beside them, three records of every CLOSE_WAIT
// socket; then one map, 118 bytes a socket; now 64 and the table's 8 or
// so (inodeTable).
type cwIndex struct {
	t inodeTable[cwEntry]
	// gen numbers the scans of the query; holders is the one whose
	// holders the entries with that holderGen are.
	gen, holders uint32
}

// cwEntry is a CLOSE_WAIT socket's family, addresses (packed as in
// packedSocket: 16 bytes and a port each) and holder.
type cwEntry struct {
	local, remote [16]byte
	lport, rport  uint16
	family, flags uint8
	// seen is the scan that last saw the socket, in CLOSE_WAIT or held
	// CLOSE; holderGen the one that found its holder pid and fd.
	seen, holderGen uint32
	pid, fd         int32
}

// saw notes x, a CLOSE_WAIT socket of the scan's dumps.
func (c *cwIndex) saw(x *Socket) {
	e, _ := c.t.put(x.Inode)
	e.family, e.lport, e.rport, e.seen = uint8(x.Family), x.Local.Port(), x.Remote.Port(), c.gen
	e.flags = packAddr(&e.local, x.Local.Addr(), packedLocal4, packedLocal6) |
		packAddr(&e.remote, x.Remote.Addr(), packedRemote4, packedRemote6)
}

// addrs returns e's local and remote addresses.
func (e *cwEntry) addrs() (local, remote netip.AddrPort) {
	return netip.AddrPortFrom(unpackAddr(&e.local, e.flags, packedLocal4, packedLocal6), e.lport),
		netip.AddrPortFrom(unpackAddr(&e.remote, e.flags, packedRemote4, packedRemote6), e.rport)
}

// heldClosed adds to snap the TCP sockets the selected processes hold that
// no dump listed, in state CLOSE, with their pid, fd, inode and namespace;
// their addresses are those they had in CLOSE_WAIT when a repeated scan saw
// them then, else left empty (unknown). The query's filters apply: one of
// known remote is matched by it; one of unknown remote, which no --port,
// --remote or --brokers can match, is kept when the filters select its
// process (see Query), marked KeptByProcess.
func (s *Scanner) heldClosed(ctx context.Context, snap *Snapshot, sel selection, q Query, t *tableIndex) {
	slices.Sort(t.inodes)
	t.inodes = slices.Compact(t.inodes)
	slices.Sort(t.match)
	t.match = slices.Compact(t.match)
	nsOf := map[int]uint64{}
	var pids []int
	for _, g := range sel.groups {
		for _, p := range g.pids {
			nsOf[p] = g.ino
			pids = append(pids, p)
		}
	}
	fds, holders := s.heldFDs(ctx, snap, pids, t)
	selected := s.selectedProcesses(snap, q, holders)
	seen := map[uint64]bool{}
	for _, h := range fds {
		if seen[h.ino] {
			continue // shared across fork: one holder, as attribution gives
		}
		seen[h.ino] = true
		x := Socket{Family: h.family, State: Close, Inode: h.ino, PID: h.pid, FD: h.fd, NetNS: nsOf[h.pid]}
		if t.cw != nil {
			if e, ok := t.cw.t.get(h.ino); ok {
				x.Local, x.Remote = e.addrs()
				e.seen = t.cw.gen
			}
		}
		switch {
		case q.matchSocket(&x):
			snap.Sockets = append(snap.Sockets, x)
		case !x.Remote.IsValid() && selected(h.pid):
			x.KeptByProcess = true
			snap.Sockets = append(snap.Sockets, x)
		}
	}
	if cw := t.cw; cw != nil {
		// Gone: closed, or reset and closed.
		cw.t.sweep(func(_ uint64, e *cwEntry) bool { return e.seen == cw.gen })
	}
}

// selectedProcesses returns whether the query's remote filters select a
// process (see Query) for its held CLOSE sockets of unknown remote: it
// holds one of the sockets kept so far (each matched the filters), or one
// of the other states that matched them (holders, from heldTCP's walk), or
// a repeated scan found it so before; or, with --brokers, its own files
// say it is a Kafka client. A repeated scan remembers the pids found so
// (as long as they live and the filters stay the same).
func (s *Scanner) selectedProcesses(snap *Snapshot, q Query, holders map[int]bool) func(pid int) bool {
	if !q.remoteFiltered() {
		s.chosen = nil
		return func(int) bool { return true }
	}
	chosen := map[int]bool{}
	for p := range holders {
		chosen[p] = true
	}
	for i := range snap.Sockets {
		if p := snap.Sockets[i].PID; p > 0 {
			chosen[p] = true
		}
	}
	if !s.NoCache {
		key := q.remoteKey()
		if s.chosen == nil || s.chosen.key != key {
			s.chosen = &chosenPIDs{key: key, pids: map[int]bool{}, kafka: map[int]bool{}}
		}
		for p := range s.chosen.pids {
			chosen[p] = true
		}
		maps.Copy(s.chosen.pids, chosen)
	}
	return func(pid int) bool {
		if chosen[pid] {
			return true
		}
		if len(q.Brokers) == 0 {
			return false
		}
		if s.chosen != nil {
			if k, ok := s.chosen.kafka[pid]; ok {
				return k
			}
		}
		k := s.kafkaByOwnFiles(pid)
		if s.chosen != nil {
			s.chosen.kafka[pid] = k
		}
		chosen[pid] = k
		return k
	}
}

// chosenPIDs is what a repeated scan remembers of the processes its remote
// filters selected (selectedProcesses), for the filters named key: those
// that held a socket the filters matched, and what each process's own
// files said of a Kafka client.
type chosenPIDs struct {
	key   string
	pids  map[int]bool
	kafka map[int]bool
}

// prune forgets the processes that are gone.
func (c *chosenPIDs) prune(alive func(pid int) bool) {
	if c == nil {
		return
	}
	maps.DeleteFunc(c.pids, func(p int, _ bool) bool { return !alive(p) })
	maps.DeleteFunc(c.kafka, func(p int, _ bool) bool { return !alive(p) })
}

// kafkaByOwnFiles reports whether pid's own files say it is a Kafka client
// (ownKafkaReason: its class path, an open kafka-clients jar, librdkafka).
func (s *Scanner) kafkaByOwnFiles(pid int) bool {
	dir := s.ProcRoot + "/" + strconv.Itoa(pid)
	comm, err := os.ReadFile(dir + "/comm")
	if err != nil {
		return false
	}
	cl, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(string(bytes.TrimRight(cl, "\x00")), "\x00")
	return ownKafkaReason(kafkaEvidence{procRoot: s.ProcRoot, pid: pid, name: strings.TrimSpace(string(comm)), args: args}) != ""
}

// countHeldLeftOut counts, for a one-shot scan whose query leaves CLOSE
// out (Scanner.CountHeld), the held CLOSE sockets the query would keep with
// CLOSE in it: from table, the scan's pass over every socket fd, or when
// it made none (a few processes, whose fds it walked) from a pass now,
// after the dump. With remote filters only the processes holding a socket
// the scan kept, or with --brokers a Kafka client by its own files, are
// counted: the other states were not dumped (see Query). A note says how
// many, whose, and how to see them; -1 and a note when there is no socket
// fd iterator to count them with.
func (s *Scanner) countHeldLeftOut(snap *Snapshot, q Query, sel selection, table *fdTable, n *notes) int {
	type held struct {
		pid int
		ino uint64
	}
	var found []held
	switch {
	case table != nil:
		table.each(func(r fdRec) bool {
			if r.pid&fdHeld != 0 {
				found = append(found, held{int(r.pid & fdPIDMask), r.ino})
			}
			return true
		})
	case s.mayIterate(true):
		keep := make(map[int32]bool, len(sel.cand))
		for _, p := range sel.cand {
			keep[int32(p)] = true
		}
		it, err := s.openIterator(true)
		if err == nil && it != nil {
			err = it.Each(func(f sockfd.FD) bool {
				if f.HeldClose() && (!sel.restricted || keep[f.PID]) {
					found = append(found, held{int(f.PID), f.Inode})
				}
				return true
			})
			s.Close() // a one-shot scan's: nothing passes again
		}
		if err == nil && it != nil {
			break
		}
		fallthrough
	default:
		n.add("held CLOSE sockets (CLOSE_WAIT sockets a keepalive reset took out of the kernel's tables, still held) were not counted: that needs the socket fd iterator (root, Linux 5.11 or later with BTF); --state close-wait,close finds them")
		return -1
	}
	selected := s.selectedProcesses(snap, q, nil)
	seen := map[uint64]bool{}
	var pids []int
	for _, h := range found {
		if !seen[h.ino] && selected(h.pid) {
			seen[h.ino] = true // shared across fork: counted once
			pids = append(pids, h.pid)
		}
	}
	if len(seen) > 0 {
		n.add("%s left out, of %s: CLOSE_WAIT sockets a keepalive reset took out of the kernel's tables, still held (the same leak); --state close-wait,close shows them",
			cmdPlural(len(seen), "held CLOSE socket", "held CLOSE sockets"), pidList(pids, s.comm))
	}
	return len(seen)
}

// heldCache is what a repeated scan keeps of the held CLOSE sockets between
// full fd walks. (The last scan's CLOSE_WAIT sockets and their holders, of
// which one that leaves every table while its fd still names it was reset,
// and is held CLOSE now, are in the Scanner's cwIndex.)
type heldCache struct {
	fds []heldFD
	at  time.Time
}

// heldFDs returns the held TCP sockets of pids. A one-shot scan, and a
// repeated one every InfoEvery, walks every fd (heldTCP). In between, a
// repeated scan keeps the last walk's sockets whose fd still names them,
// and adds the CLOSE_WAIT sockets of the last scan that no dump lists now
// and whose fd still names them: each costs one readlink, not a walk of
// every fd of every process each second.
//
// It also returns the pids that hold a socket of t.match, from the walk
// (nil without one: the Scanner remembers the last walk's, see
// selectedProcesses).
func (s *Scanner) heldFDs(ctx context.Context, snap *Snapshot, pids []int, t *tableIndex) ([]heldFD, map[int]bool) {
	if s.NoCache {
		return s.attr.heldTCP(ctx, pids, t.inodes, t.match)
	}
	c := &s.held
	var out []heldFD
	var holders map[int]bool
	if c.at.IsZero() || snap.Time.Sub(c.at) >= cmp.Or(s.InfoEvery, DefaultInfoEvery) || snap.Time.Before(c.at) {
		out, holders = s.attr.heldTCP(ctx, pids, t.inodes, t.match)
		c.at = snap.Time
	} else {
		alive := make(map[int]bool, len(pids))
		for _, p := range pids {
			alive[p] = true
		}
		keep := func(h heldFD) bool {
			_, listed := slices.BinarySearch(t.inodes, h.ino)
			return alive[h.pid] && !listed && s.fdNames(h)
		}
		inOut := map[uint64]bool{}
		for _, h := range c.fds {
			if keep(h) {
				out = append(out, h)
				inOut[h.ino] = true
			}
		}
		if cw := t.cw; cw != nil {
			for ino, e := range cw.t.all() {
				if e.holderGen != cw.holders || e.holderGen == 0 {
					continue // not a CLOSE_WAIT socket of the last scan's, or no holder
				}
				if h := (heldFD{pid: int(e.pid), fd: int(e.fd), ino: ino, family: Family(e.family)}); !inOut[ino] && keep(h) {
					out = append(out, h)
				}
			}
		}
	}
	c.fds = out
	// The CLOSE_WAIT sockets the next scan may find reset.
	if cw := t.cw; cw != nil {
		for i := range snap.Sockets {
			if x := &snap.Sockets[i]; x.State == CloseWait && x.PID > 0 && x.Inode != 0 {
				e, ok := cw.t.get(x.Inode)
				if !ok {
					cw.saw(x)
					e, _ = cw.t.get(x.Inode)
				}
				e.pid, e.fd, e.holderGen = int32(x.PID), int32(x.FD), cw.gen
			}
		}
		cw.holders = cw.gen
	}
	return out, holders
}

// fdNames reports whether h's fd still names its socket.
func (s *Scanner) fdNames(h heldFD) bool {
	target, err := os.Readlink(s.ProcRoot + "/" + strconv.Itoa(h.pid) + "/fd/" + strconv.Itoa(h.fd))
	return err == nil && parseSocketLink([]byte(target)) == h.ino
}
