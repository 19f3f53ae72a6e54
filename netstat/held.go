package netstat

import (
	"cmp"
	"context"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"time"

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
// so already.
func (a *Attributor) heldTCP(ctx context.Context, pids []int, known []uint64) []heldFD {
	var out []heldFD
	var rest []int
	for _, p := range pids {
		if !a.Complete[p] {
			rest = append(rest, p)
		}
	}
	if len(a.Others) > 0 {
		w := a.worker()
		for _, o := range a.Others {
			if inSorted(known, o.ino) || !a.Complete[o.pid] {
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
	if more, ok := a.heldPass(rest, known); ok {
		out, rest = append(out, more...), nil
	}
	for _, res := range a.pool(ctx, rest, func(w *attrWorker, pid int) attrResult {
		return w.held(a, pid, known)
	}) {
		for _, s := range res.seen {
			out = append(out, heldFD{pid: res.pid, fd: int(s.fd), ino: s.ino, family: Family(s.proto)})
		}
	}
	slices.SortFunc(out, func(x, y heldFD) int {
		if x.pid != y.pid {
			return x.pid - y.pid
		}
		return x.fd - y.fd
	})
	return out
}

// held reads every fd of pid: each socket whose inode known lacks and whose
// protocol is TCP goes into the result's seen, with its family as proto.
func (w *attrWorker) held(a *Attributor, pid int, known []uint64) attrResult {
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
// and in a repeated scan the addresses of the CLOSE_WAIT sockets. A
// Scanner keeps one and reuses its slices scan after scan (reset): made
// afresh, they were appended to from empty every scan, some five times
// their final size allocated on the way (1.25x growth past 256 elements:
// 11 MB a scan at 20,000 CLOSE_WAIT and 40,000 ESTABLISHED sockets).
type tableIndex struct {
	inodes []uint64
	cw     []endpointOf
}

// endpointOf is a CLOSE_WAIT socket's addresses, by inode.
type endpointOf struct {
	ino uint64
	endpoint
}

// endpoint is a socket's family and addresses.
type endpoint struct {
	family        Family
	local, remote netip.AddrPort
	seen          uint64 // the Scanner's dump that last saw it
}

// reset empties t for a scan, keeping its slices' memory unless the last
// scan used under a quarter of it (the sockets went away).
func (t *tableIndex) reset() {
	if cap(t.inodes) > 4*len(t.inodes)+1024 {
		t.inodes = nil
	}
	if cap(t.cw) > 4*len(t.cw)+1024 {
		t.cw = nil
	}
	t.inodes, t.cw = t.inodes[:0], t.cw[:0]
}

// add notes socks, before the query's filter.
func (t *tableIndex) add(socks []Socket, endpoints bool) {
	t.inodes = slices.Grow(t.inodes, len(socks))
	for i := range socks {
		x := &socks[i]
		if x.Inode == 0 {
			continue
		}
		t.inodes = append(t.inodes, x.Inode)
		if endpoints && x.State == CloseWait {
			t.cw = append(t.cw, endpointOf{x.Inode, endpoint{family: x.Family, local: x.Local, remote: x.Remote}})
		}
	}
}

// heldClosed adds to snap the TCP sockets the selected processes hold that
// no dump listed, in state CLOSE, with their pid, fd, inode and namespace;
// their addresses are those they had in CLOSE_WAIT when a repeated scan saw
// them then, else left empty (unknown). The query's filters apply: a held
// socket of unknown remote matches no --port, --remote or --brokers.
func (s *Scanner) heldClosed(ctx context.Context, snap *Snapshot, sel selection, q Query, t *tableIndex) {
	slices.Sort(t.inodes)
	t.inodes = slices.Compact(t.inodes)
	gen := s.dumps + 1
	if !s.NoCache {
		if s.endpoints == nil {
			s.endpoints = map[uint64]endpoint{}
		}
		for _, e := range t.cw {
			e.seen = gen
			s.endpoints[e.ino] = e.endpoint
		}
	}
	nsOf := map[int]uint64{}
	var pids []int
	for _, g := range sel.groups {
		for _, p := range g.pids {
			nsOf[p] = g.ino
			pids = append(pids, p)
		}
	}
	seen := map[uint64]bool{}
	for _, h := range s.heldFDs(ctx, snap, pids, t) {
		if seen[h.ino] {
			continue // shared across fork: one holder, as attribution gives
		}
		seen[h.ino] = true
		x := Socket{Family: h.family, State: Close, Inode: h.ino, PID: h.pid, FD: h.fd, NetNS: nsOf[h.pid]}
		if e, ok := s.endpoints[h.ino]; ok {
			x.Local, x.Remote = e.local, e.remote
			e.seen = gen
			s.endpoints[h.ino] = e
		}
		if q.matchSocket(&x) {
			snap.Sockets = append(snap.Sockets, x)
		}
	}
	for ino, e := range s.endpoints {
		if e.seen != gen {
			delete(s.endpoints, ino) // closed, or reset and closed
		}
	}
}

// heldCache is what a repeated scan keeps of the held CLOSE sockets between
// full fd walks.
type heldCache struct {
	fds []heldFD
	at  time.Time
	// cw are the last scan's CLOSE_WAIT sockets and their holders: one
	// that leaves every table while its fd still names it was reset, and
	// is held CLOSE now.
	cw map[uint64]heldFD
}

// heldFDs returns the held TCP sockets of pids. A one-shot scan, and a
// repeated one every InfoEvery, walks every fd (heldTCP). In between, a
// repeated scan keeps the last walk's sockets whose fd still names them,
// and adds the CLOSE_WAIT sockets of the last scan that no dump lists now
// and whose fd still names them: each costs one readlink, not a walk of
// every fd of every process each second.
func (s *Scanner) heldFDs(ctx context.Context, snap *Snapshot, pids []int, t *tableIndex) []heldFD {
	if s.NoCache {
		return s.attr.heldTCP(ctx, pids, t.inodes)
	}
	c := &s.held
	var out []heldFD
	if c.at.IsZero() || snap.Time.Sub(c.at) >= cmp.Or(s.InfoEvery, DefaultInfoEvery) || snap.Time.Before(c.at) {
		out = s.attr.heldTCP(ctx, pids, t.inodes)
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
		for _, h := range c.cw {
			if !inOut[h.ino] && keep(h) {
				out = append(out, h)
			}
		}
	}
	c.fds = out
	// The CLOSE_WAIT sockets the next scan may find reset.
	clear(c.cw)
	if c.cw == nil {
		c.cw = map[uint64]heldFD{}
	}
	for i := range snap.Sockets {
		if x := &snap.Sockets[i]; x.State == CloseWait && x.PID > 0 && x.Inode != 0 {
			c.cw[x.Inode] = heldFD{pid: x.PID, fd: x.FD, ino: x.Inode, family: x.Family}
		}
	}
	return out
}

// fdNames reports whether h's fd still names its socket.
func (s *Scanner) fdNames(h heldFD) bool {
	target, err := os.Readlink(s.ProcRoot + "/" + strconv.Itoa(h.pid) + "/fd/" + strconv.Itoa(h.fd))
	return err == nil && parseSocketLink([]byte(target)) == h.ino
}
