package netstat

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
)

// ErrParse is wrapped by every error about malformed input from the kernel:
// a /proc/net/tcp line, a netlink message. Check it with errors.Is.
var ErrParse = errors.New("malformed input")

// maxReportedLines bounds how many malformed lines one error quotes; the rest
// are counted, so a garbage file gives a readable error, not megabytes.
const maxReportedLines = 5

// ReadProcNetTCP reads the TCP sockets in the states wanted from
// /proc/net/tcp and /proc/net/tcp6 of a network namespace: those of pid's
// namespace, <procRoot>/<pid>/net/tcp{,6}, or, for pid 0, those of the
// caller's, <procRoot>/net/tcp{,6}. It is the fallback source when netlink is
// unavailable (ErrNetlinkUnavailable). procRoot is "/proc" on a live system,
// a fixture tree in tests.
//
// Contract: the sockets of every well-formed line are returned even when
// some lines are malformed; the error then wraps ErrParse and quotes the
// lines, by file and number. A process that has exited gives an error for
// which errors.Is(err, fs.ErrNotExist) holds. A kernel without IPv6 has no
// tcp6 file; that is not an error.
//
// The sockets have no Age (HasAge false: /proc has no tcp_info), PID 0 and
// FD -1 (unattributed), and NetNS 0 (the caller knows the namespace). For a
// LISTEN socket RecvQ is the accept backlog and SendQ 0, whereas netlink
// gives the backlog's limit as SendQ. A socket the kernel's walk reports twice
// (see dedupSockets) is returned once.
func ReadProcNetTCP(procRoot string, pid int, states StateSet) ([]Socket, error) {
	dir := filepath.Join(procRoot, "net")
	if pid != 0 {
		dir = filepath.Join(procRoot, strconv.Itoa(pid), "net")
	}
	socks, err4 := readProcNetTCP(filepath.Join(dir, "tcp"), IPv4, states, nil)
	if err4 != nil && errors.Is(err4, fs.ErrNotExist) {
		return nil, err4
	}
	socks, err6 := readProcNetTCP(filepath.Join(dir, "tcp6"), IPv6, states, socks)
	if err6 != nil && errors.Is(err6, fs.ErrNotExist) {
		// No tcp6 means no IPv6 in this kernel, unless the process has just
		// exited: then say so, as for tcp.
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("netstat: %w", err)
		}
		err6 = nil
	}
	return dedupSockets(socks), errors.Join(err4, err6)
}

// readProcNetTCP opens one /proc/net/tcp{,6} file and appends its sockets to
// socks.
func readProcNetTCP(path string, fam Family, states StateSet, socks []Socket) ([]Socket, error) {
	f, err := os.Open(path)
	if err != nil {
		return socks, fmt.Errorf("netstat: %w", err)
	}
	defer f.Close()
	socks, err = appendProcNetTCP(socks, f, fam, states)
	if err != nil {
		return socks, fmt.Errorf("netstat: %s: %w", path, err)
	}
	return socks, nil
}

// parseProcNetTCP parses the text of /proc/net/tcp (fam IPv4) or
// /proc/net/tcp6 (fam IPv6), as net/ipv4/tcp_ipv4.c (tcp4_seq_show,
// get_tcp4_sock, get_timewait4_sock, get_openreq4) and net/ipv6/tcp_ipv6.c
// write it, and returns the sockets whose state is in states. Lines of other
// states are skipped after reading only their state, before their addresses
// are decoded. Malformed lines are skipped; the sockets of the good lines are
// returned with an error wrapping ErrParse that quotes the bad ones.
//
// The columns used: "sl local_address rem_address st tx_queue:rx_queue
// tr:tm->when retrnsmt uid timeout inode ..."; an address is the 32-bit words
// of the address, each as the host stores it, in %08X, then ":%04X" of the
// port.
func parseProcNetTCP(r io.Reader, fam Family, states StateSet) ([]Socket, error) {
	return appendProcNetTCP(nil, r, fam, states)
}

// scratchPool holds the buffers sockets are parsed into before one copy to a
// slice of exact size. Growing the result by append instead costs about five
// times its final size in allocation (Go grows large slices by 1.25x) and
// dominated the parse time of a 60,000-line table.
var scratchPool = sync.Pool{New: func() any { return new([]Socket) }}

func appendProcNetTCP(socks []Socket, r io.Reader, fam Family, states StateSet) ([]Socket, error) {
	scratch := scratchPool.Get().(*[]Socket)
	found, err := scanProcNetTCP((*scratch)[:0], r, fam, states)
	if len(found) > 0 {
		socks = append(slices.Grow(socks, len(found)), found...)
	}
	*scratch = found[:0]
	scratchPool.Put(scratch)
	return socks, err
}

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

func scanProcNetTCP(socks []Socket, r io.Reader, fam Family, states StateSet) ([]Socket, error) {
	addrLen := 8 // hex digits of the address
	switch fam {
	case IPv4:
	case IPv6:
		addrLen = 32
	default:
		return socks, fmt.Errorf("%w: family %d is neither IPv4 nor IPv6", ErrParse, fam)
	}
	// The kernel writes lines of fixed width (150 bytes for tcp, 178 for
	// tcp6); 64 KiB per read keeps the number of read(2)s of a large table
	// low. The readers are pooled: a scan reads a table per namespace.
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() { br.Reset(nil); readerPool.Put(br) }()
	var errs lineErrors
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// No line of the kernel's is this long: report it, and skip to
			// the next newline.
			errs.add(n, line, "line longer than 64 KiB")
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return socks, err
			}
			continue
		}
		if err != nil && err != io.EOF {
			return socks, err
		}
		if len(line) == 0 && err == io.EOF {
			if n == 1 {
				return socks, fmt.Errorf("%w: empty: no header line", ErrParse)
			}
			break
		}
		if n == 1 && isProcNetTCPHeader(line) {
			continue
		}
		if s, ok, reason := parseProcNetTCPLine(line, fam, addrLen, states); reason != "" {
			errs.add(n, line, reason)
		} else if ok {
			socks = append(socks, s)
		}
		if err == io.EOF {
			break
		}
	}
	return socks, errs.err()
}

// isProcNetTCPHeader reports whether line is the header "  sl  local_address ...".
func isProcNetTCPHeader(line []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(line, " "), []byte("sl "))
}

// parseProcNetTCPLine parses one data line. ok is false for a line skipped
// for its state; reason is non-empty for a malformed line.
func parseProcNetTCPLine(line []byte, fam Family, addrLen int, states StateSet) (s Socket, ok bool, reason string) {
	c := fieldCursor{b: line}
	sl := c.next()
	if len(sl) < 2 || sl[len(sl)-1] != ':' {
		return s, false, "no slot number (\"N:\") first"
	}
	local, remote, st := c.next(), c.next(), c.next()
	if len(st) == 0 {
		return s, false, "missing fields: no st column"
	}
	state, good := parseHex(st)
	if !good || len(st) != 2 {
		return s, false, fmt.Sprintf("st %q is not two hex digits", st)
	}
	if state == 0 || state >= uint64(maxState) {
		return s, false, fmt.Sprintf("st %q is not a TCP state", st)
	}
	if !states.Has(State(state)) {
		return s, false, ""
	}
	s = Socket{Family: fam, State: State(state), FD: -1}
	if s.Local, good = parseProcAddr(local, addrLen); !good {
		return s, false, fmt.Sprintf("local_address %q is not %d hex digits:4 hex digits", local, addrLen)
	}
	if s.Remote, good = parseProcAddr(remote, addrLen); !good {
		return s, false, fmt.Sprintf("rem_address %q is not %d hex digits:4 hex digits", remote, addrLen)
	}
	queues := c.next()
	tx, rx, found := bytes.Cut(queues, []byte(":"))
	txq, good1 := parseHex(tx)
	rxq, good2 := parseHex(rx)
	if !found || !good1 || !good2 || txq > 0xffffffff || rxq > 0xffffffff {
		if len(queues) == 0 {
			return s, false, "missing fields: no tx_queue:rx_queue"
		}
		return s, false, fmt.Sprintf("tx_queue:rx_queue %q is not hex:hex", queues)
	}
	s.SendQ, s.RecvQ = uint32(txq), uint32(rxq)
	c.next() // tr:tm->when
	c.next() // retrnsmt
	uid := c.next()
	c.next() // timeout
	inode := c.next()
	if len(inode) == 0 {
		return s, false, "missing fields: no inode column"
	}
	u, good := parseDec(uid)
	if !good || u > 0xffffffff {
		return s, false, fmt.Sprintf("uid %q is not a number", uid)
	}
	s.UID = uint32(u)
	if s.Inode, good = parseDec(inode); !good {
		return s, false, fmt.Sprintf("inode %q is not a number", inode)
	}
	return s, true, ""
}

// parseProcAddr decodes "0100007F:1F90" (addrLen hex digits of address, 4 of
// port). Each 8-digit group is a 32-bit word as the kernel's %08X printed it
// from memory, so its bytes are the word's bytes in host order.
func parseProcAddr(b []byte, addrLen int) (netip.AddrPort, bool) {
	if len(b) != addrLen+5 || b[addrLen] != ':' {
		return netip.AddrPort{}, false
	}
	var a [16]byte
	for i := 0; i < addrLen/8; i++ {
		w, ok := parseHex(b[i*8 : i*8+8])
		if !ok {
			return netip.AddrPort{}, false
		}
		binary.NativeEndian.PutUint32(a[i*4:], uint32(w))
	}
	port, ok := parseHex(b[addrLen+1:])
	if !ok {
		return netip.AddrPort{}, false
	}
	if addrLen == 8 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[:4])), uint16(port)), true
	}
	return netip.AddrPortFrom(netip.AddrFrom16(a), uint16(port)), true
}

// fieldCursor splits a line on spaces without allocating, unlike
// bytes.Fields, which allocates a slice per line.
type fieldCursor struct {
	b []byte
	i int
}

// next returns the next space-separated field, nil at the end of the line.
func (c *fieldCursor) next() []byte {
	for c.i < len(c.b) && (c.b[c.i] == ' ' || c.b[c.i] == '\t') {
		c.i++
	}
	start := c.i
	for c.i < len(c.b) && c.b[c.i] != ' ' && c.b[c.i] != '\t' && c.b[c.i] != '\n' {
		c.i++
	}
	if start == c.i {
		return nil
	}
	return c.b[start:c.i]
}

// parseHex parses 1 to 16 hex digits, either case.
func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var v uint64
	for _, ch := range b {
		switch {
		case '0' <= ch && ch <= '9':
			ch -= '0'
		case 'A' <= ch && ch <= 'F':
			ch -= 'A' - 10
		case 'a' <= ch && ch <= 'f':
			ch -= 'a' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(ch)
	}
	return v, true
}

// parseDec parses an unsigned decimal of up to 19 digits (no overflow).
func parseDec(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		v = v*10 + uint64(ch-'0')
	}
	return v, true
}

// lineErrors gathers the malformed lines of one file into one error.
type lineErrors struct {
	quoted []string
	more   int
}

func (e *lineErrors) add(n int, line []byte, reason string) {
	if len(e.quoted) == maxReportedLines {
		e.more++
		return
	}
	line = bytes.TrimRight(line, "\n")
	if len(line) > 200 {
		line = append(line[:200:200], "..."...)
	}
	e.quoted = append(e.quoted, fmt.Sprintf("line %d: %s: %q", n, reason, line))
}

func (e *lineErrors) err() error {
	if len(e.quoted) == 0 {
		return nil
	}
	var b bytes.Buffer
	for i, q := range e.quoted {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(q)
	}
	if e.more > 0 {
		fmt.Fprintf(&b, "; and %d more", e.more)
	}
	return fmt.Errorf("%w: %s", ErrParse, b.String())
}

// dedupSockets drops, in place, the second and later reports of one socket.
// Neither /proc/net/tcp nor an inet_diag dump is a snapshot: both walk the
// kernel's hash tables in pieces (one read(2), one datagram) and resume by
// bucket and position, so a socket created or closed meanwhile in the same
// bucket shifts the walk and an entry is reported twice (or skipped: that
// cannot be undone here). A live socket is known by its inode (listeners
// sharing a port through SO_REUSEPORT have one each); a socket without a file
// (TIME_WAIT, orphans: inode 0) by its 4-tuple.
func dedupSockets(socks []Socket) []Socket {
	return dedupSocketsWith(socks, nil)
}

// dedupSocketsWith is dedupSockets with inodes, a buffer it appends the
// sockets' inodes to (nil: a new one), sorted among themselves after what
// it held: a repeated scan reuses one, and a scan with CLOSE keeps every
// namespace's there for heldClosed (tableIndex), which needs them all.
//
// The inodes are sorted rather than put in a set: a duplicate is rare, so
// the usual answer is "none" after one sort of 8 bytes a socket, where a
// map costs 25-30 bytes a socket (0.6 MB at 20,000 sockets: a tenth of a
// one-shot scan's heap). Only when the sort finds one does a second pass
// drop the later reports.
func dedupSocketsWith(socks []Socket, inodes *[]uint64) []Socket {
	if inodes == nil {
		inodes = new([]uint64)
	}
	// Sized once: appending from empty would allocate about twice the
	// final size on the way (at 20,000 sockets, 0.6 MB for a 0.16 MB slice).
	start := len(*inodes)
	ino := slices.Grow(*inodes, len(socks))
	orphans := false
	for i := range socks {
		if socks[i].Inode != 0 {
			ino = append(ino, socks[i].Inode)
		} else {
			orphans = true
		}
	}
	*inodes = ino
	if len(socks) < 2 {
		return socks
	}
	ino = ino[start:]
	slices.Sort(ino)
	var dups map[uint64]bool // inode -> reported already
	for i := 1; i < len(ino); i++ {
		if ino[i] == ino[i-1] {
			if dups == nil {
				dups = map[uint64]bool{}
			}
			dups[ino[i]] = false
		}
	}
	if dups == nil && !orphans {
		return socks
	}
	type key struct {
		fam           Family
		local, remote netip.AddrPort
	}
	var seen map[key]struct{}
	out := socks[:0]
	for _, s := range socks {
		if s.Inode != 0 {
			if reported, dup := dups[s.Inode]; dup {
				if reported {
					continue
				}
				dups[s.Inode] = true
			}
		} else {
			if seen == nil {
				seen = make(map[key]struct{})
			}
			k := key{s.Family, s.Local, s.Remote}
			if _, dup := seen[k]; dup {
				continue
			}
			seen[k] = struct{}{}
		}
		out = append(out, s)
	}
	return out
}
