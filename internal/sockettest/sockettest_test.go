//go:build linux

package sockettest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
)

// procHex writes an address and port as /proc/net/tcp{,6} does
// (net/ipv4/tcp_ipv4.c get_tcp4_sock, net/ipv6/tcp_ipv6.c get_tcp6_sock):
// each 32-bit word of the address as the host stores it, "%08X", then ":%04X"
// of the port. It is written here independently of netstat's parser, which
// tests check against these sockets.
func procHex(ap netip.AddrPort) string {
	var b strings.Builder
	addr := ap.Addr().AsSlice()
	for i := 0; i+4 <= len(addr); i += 4 {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(addr[i:]))
	}
	fmt.Fprintf(&b, ":%04X", ap.Port())
	return b.String()
}

// procFields are the columns of a line of /proc/net/tcp{,6}: st, rx_queue
// (hex) and inode.
type procFields struct {
	st    string
	rxq   uint64
	inode uint64
}

// procTable is what one read of <netDir>/tcp and tcp6 says of the sockets
// a test asks about, by "local remote" in the files' spelling. One read per
// check, looking at only the lines asked about, keeps the tests fast on a
// host whose table is large (other tests' benchmarks hold 60,000 sockets).
type procTable map[string]procFields

func readProcTable(t *testing.T, netDir string, socks ...*Socket) procTable {
	t.Helper()
	// local -> remote -> asked about: several sockets share a local
	// address (a listener and its accepted ends).
	multi := map[string]map[string]bool{}
	for _, s := range socks {
		l := procHex(s.Local)
		if multi[l] == nil {
			multi[l] = map[string]bool{}
		}
		multi[l][procHex(s.Remote)] = true
	}
	tab := procTable{}
	for _, file := range []string{netDir + "/tcp", netDir + "/tcp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			line := b
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				line, b = b[:i], b[i+1:]
			} else {
				b = nil
			}
			_, rest := nextField(line) // sl
			local, rest := nextField(rest)
			remote, rest := nextField(rest)
			if !multi[string(local)][string(remote)] {
				continue
			}
			f := bytes.Fields(rest) // st tx:rx tr:when retrnsmt uid timeout inode ...
			if len(f) < 7 {
				t.Fatalf("%s: short line %q", file, line)
			}
			_, rx, _ := bytes.Cut(f[1], []byte(":"))
			rxq, err := strconv.ParseUint(string(rx), 16, 32)
			if err != nil {
				t.Fatalf("%s: %q: %v", file, line, err)
			}
			inode, err := strconv.ParseUint(string(f[6]), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", file, line, err)
			}
			tab[string(local)+" "+string(remote)] = procFields{st: string(f[0]), rxq: rxq, inode: inode}
		}
	}
	return tab
}

// nextField returns the first space-separated field of b and what follows.
func nextField(b []byte) (field, rest []byte) {
	b = bytes.TrimLeft(b, " ")
	i := bytes.IndexByte(b, ' ')
	if i < 0 {
		return b, nil
	}
	return b[:i], b[i:]
}

func (tab procTable) lookup(s *Socket) (procFields, bool) {
	f, ok := tab[procHex(s.Local)+" "+procHex(s.Remote)]
	return f, ok
}

var procStates = map[string]string{"ESTABLISHED": "01", "TIME_WAIT": "06", "CLOSE_WAIT": "08", "LISTEN": "0A"}

// check verifies against a read of /proc that each socket is what it
// claims, and that its fd, in the process that holds it, is the socket with
// its inode.
func check(t *testing.T, netDir string, socks ...*Socket) {
	t.Helper()
	tab := readProcTable(t, netDir, socks...)
	for _, s := range socks {
		got, ok := tab.lookup(s)
		if !ok {
			t.Errorf("%s: not in %s", s, netDir)
			continue
		}
		if want := procStates[s.State]; got.st != want {
			t.Errorf("%s: st %s, want %s", s, got.st, want)
		}
		if got.inode != s.Inode {
			t.Errorf("%s: /proc inode %d", s, got.inode)
		}
		if got.rxq != uint64(s.RecvQ) {
			t.Errorf("%s: rx_queue %d, want %d", s, got.rxq, s.RecvQ)
		}
		if s.FD < 0 {
			continue
		}
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", s.PID, s.FD))
		if err != nil {
			t.Errorf("%s: %v", s, err)
		} else if want := fmt.Sprintf("socket:[%d]", s.Inode); link != want {
			t.Errorf("%s: fd links to %s, want %s", s, link, want)
		}
	}
}

func TestHelpers(t *testing.T) {
	for _, network := range Networks(t) {
		t.Run(network, func(t *testing.T) {
			var all []*Socket
			ln := Listener(t, network)
			all = append(all, ln)
			if ln.Remote.Port() != 0 || !ln.Remote.Addr().IsUnspecified() {
				t.Errorf("listener remote %s, want unspecified:0", ln.Remote)
			}

			est := Established(t, network, 3)
			if len(est) != 3 {
				t.Fatalf("Established: %d sockets, want 3", len(est))
			}
			for _, s := range est {
				all = append(all, s)
				if s.Peer == nil || s.Peer.Local != s.Remote || s.Peer.Remote != s.Local {
					t.Errorf("%s: peer %v does not mirror it", s, s.Peer)
				} else {
					all = append(all, s.Peer)
				}
			}

			for _, tc := range []struct {
				opts  []Option
				recvQ uint32
			}{
				{nil, 1},
				{[]Option{PeerData(1)}, 2},
				{[]Option{PeerData(5)}, 6},
				{[]Option{PeerData(5), ReadToEOF()}, 0},
				{[]Option{ReadToEOF()}, 0},
			} {
				for _, s := range CloseWait(t, network, 2, tc.opts...) {
					if s.State != "CLOSE_WAIT" || s.RecvQ != tc.recvQ {
						t.Errorf("%s: RecvQ %d, want CLOSE_WAIT with %d", s, s.RecvQ, tc.recvQ)
					}
					all = append(all, s)
				}
			}

			tw := TimeWait(t, network)
			if tw.FD != -1 || tw.Inode != 0 {
				t.Errorf("%s: want fd -1 and inode 0", tw)
			}
			all = append(all, tw)
			check(t, "/proc/net", all...)
		})
	}
}

func TestCloseWaitLeavesOnClose(t *testing.T) {
	s := CloseWait(t, "tcp4", 1)[0]
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing a CLOSE_WAIT socket sends the FIN: LAST_ACK, then gone once
	// the peer (whose socket is orphaned in FIN_WAIT2) acknowledges.
	if got, ok := readProcTable(t, "/proc/net", s).lookup(s); ok && got.st == "08" {
		t.Errorf("%s: still CLOSE_WAIT after Close", s)
	}
}

func TestChild(t *testing.T) {
	c := StartChild(t, Spec{Network: "tcp4", Listeners: 1, Established: 2, CloseWait: 3, PeerData: 2})
	if c.PID == os.Getpid() || c.PID <= 0 {
		t.Fatalf("child pid %d", c.PID)
	}
	if len(c.Listeners) != 1 || len(c.Established) != 2 || len(c.CloseWait) != 3 {
		t.Fatalf("child made %d/%d/%d sockets, want 1/2/3", len(c.Listeners), len(c.Established), len(c.CloseWait))
	}
	for _, s := range c.Sockets() {
		if s.PID != c.PID {
			t.Errorf("%s: pid %d, want %d", s, s.PID, c.PID)
		}
	}
	check(t, "/proc/net", c.Sockets()...)
	if err := c.Stop(); err != nil {
		t.Errorf("child exit: %v", err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", c.PID)); err == nil {
		t.Errorf("child %d still exists after Stop", c.PID)
	}
}

func TestChildNetNS(t *testing.T) {
	c := StartChild(t, Spec{Network: "tcp4", CloseWait: 2, PeerData: 1, NetNS: true})
	self, err := os.Stat("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	child, err := os.Stat(c.NetNSPath())
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(self, child) {
		t.Fatalf("child shares the test's network namespace")
	}
	// In the child's namespace, not in ours.
	check(t, fmt.Sprintf("/proc/%d/net", c.PID), c.CloseWait...)
	own := readProcTable(t, "/proc/net", c.CloseWait...)
	for _, s := range c.CloseWait {
		if got, ok := own.lookup(s); ok && got.inode == s.Inode {
			t.Errorf("%s: visible in the test's own namespace", s)
		}
	}
}
