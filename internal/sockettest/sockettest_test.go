package sockettest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// procFields are the columns of s's line in <procRoot>/net/tcp{,6}: st,
// rx_queue (hex) and inode, found by 4-tuple; ok is false when there is no
// such line.
type procFields struct {
	st    string
	rxq   uint64
	inode uint64
}

func lookup(t *testing.T, netDir string, s *Socket) (procFields, bool) {
	t.Helper()
	file := netDir + "/tcp"
	if s.Network == "tcp6" {
		file += "6"
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	local, remote := []byte(procHex(s.Local)), []byte(procHex(s.Remote))
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 10 || !bytes.Equal(f[1], local) || !bytes.Equal(f[2], remote) {
			continue
		}
		_, rx, _ := bytes.Cut(f[4], []byte(":"))
		rxq, err := strconv.ParseUint(string(rx), 16, 32)
		if err != nil {
			t.Fatalf("%s: %q: %v", file, sc.Text(), err)
		}
		inode, err := strconv.ParseUint(string(f[9]), 10, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", file, sc.Text(), err)
		}
		return procFields{st: string(f[3]), rxq: rxq, inode: inode}, true
	}
	return procFields{}, false
}

var procStates = map[string]string{"ESTABLISHED": "01", "TIME_WAIT": "06", "CLOSE_WAIT": "08", "LISTEN": "0A"}

// check verifies against /proc that s is what it claims, and that its fd, in
// the process that holds it, is the socket with s's inode.
func check(t *testing.T, netDir string, s *Socket) {
	t.Helper()
	got, ok := lookup(t, netDir, s)
	if !ok {
		t.Errorf("%s: not in %s", s, netDir)
		return
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
		return
	}
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", s.PID, s.FD))
	if err != nil {
		t.Errorf("%s: %v", s, err)
	} else if want := fmt.Sprintf("socket:[%d]", s.Inode); link != want {
		t.Errorf("%s: fd links to %s, want %s", s, link, want)
	}
}

func networks(t *testing.T) []string {
	if _, err := newListener("tcp6"); err != nil {
		t.Logf("no IPv6 loopback (%v): testing tcp4 only", err)
		return []string{"tcp4"}
	}
	return []string{"tcp4", "tcp6"}
}

func TestHelpers(t *testing.T) {
	for _, network := range networks(t) {
		t.Run(network, func(t *testing.T) {
			ln := Listener(t, network)
			check(t, "/proc/net", ln)
			if ln.Remote.Port() != 0 || !ln.Remote.Addr().IsUnspecified() {
				t.Errorf("listener remote %s, want unspecified:0", ln.Remote)
			}

			est := Established(t, network, 3)
			if len(est) != 3 {
				t.Fatalf("Established: %d sockets, want 3", len(est))
			}
			for _, s := range est {
				check(t, "/proc/net", s)
				if s.Peer == nil || s.Peer.Local != s.Remote || s.Peer.Remote != s.Local {
					t.Errorf("%s: peer %v does not mirror it", s, s.Peer)
				} else {
					check(t, "/proc/net", s.Peer)
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
				cw := CloseWait(t, network, 2, tc.opts...)
				for _, s := range cw {
					if s.State != "CLOSE_WAIT" || s.RecvQ != tc.recvQ {
						t.Errorf("%s: RecvQ %d, want CLOSE_WAIT with %d", s, s.RecvQ, tc.recvQ)
					}
					check(t, "/proc/net", s)
				}
			}

			tw := TimeWait(t, network)
			if tw.FD != -1 || tw.Inode != 0 {
				t.Errorf("%s: want fd -1 and inode 0", tw)
			}
			check(t, "/proc/net", tw)
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
	if got, ok := lookup(t, "/proc/net", s); ok && got.st == "08" {
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
		check(t, "/proc/net", s)
	}
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
	for _, s := range c.CloseWait {
		// In the child's namespace, not in ours.
		check(t, fmt.Sprintf("/proc/%d/net", c.PID), s)
		if got, ok := lookup(t, "/proc/net", s); ok && got.inode == s.Inode {
			t.Errorf("%s: visible in the test's own namespace", s)
		}
	}
}
