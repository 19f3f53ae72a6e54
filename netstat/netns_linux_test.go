//go:build linux

package netstat

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/internal/sockettest"
	"golang.org/x/sys/unix"
)

// A child in its own network namespace (unshare -n) holds CLOSE_WAIT sockets
// on its own loopback: invisible to the test's own dumps, seen by a dump
// inside its namespace and in its /proc/<pid>/net/tcp{,6}.
func TestNetNSChild(t *testing.T) {
	var children []*sockettest.Child
	for i, network := range sockettest.Networks(t) {
		children = append(children, sockettest.StartChild(t, sockettest.Spec{Network: network, Listeners: 1 - i, CloseWait: 3 - i, PeerData: 1 - i, NetNS: true}))
	}
	host, err := DumpNetlink(AllStates)
	if err != nil {
		t.Fatal(err)
	}
	hostProc, err := ReadProcNetTCP("/proc", 0, AllStates)
	if err != nil {
		t.Fatal(err)
	}
	hostInodes := map[uint64]bool{}
	for _, s := range append(host, hostProc...) {
		hostInodes[s.Inode] = true
	}
	self, err := NetNSOf("/proc", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		ns, err := NetNSOf("/proc", c.PID)
		if err != nil {
			t.Fatal(err)
		}
		if ns == self {
			t.Fatalf("child %d shares the test's namespace", c.PID)
		}
		inNS, err := DumpNetlinkInNetNS(c.NetNSPath(), AllStates)
		if err != nil {
			t.Fatal(err)
		}
		proc, err := ReadProcNetTCP("/proc", c.PID, AllStates)
		if err != nil {
			t.Fatal(err)
		}
		nm, pm := byTuple(t, "netns dump", inNS), byTuple(t, "child /proc", proc)
		for _, want := range c.Sockets() {
			if hostInodes[want.Inode] {
				t.Errorf("host dump sees the child's %s", want)
			}
			for _, src := range []struct {
				name string
				m    map[tuple]Socket
			}{{"DumpNetlinkInNetNS", nm}, {"ReadProcNetTCP(child)", pm}} {
				got, ok := src.m[testTuple(want)]
				if !ok || got.State.String() != want.State || got.Inode != want.Inode || got.RecvQ != want.RecvQ {
					t.Errorf("%s: child's %s reported as %+v (found %v)", src.name, want, got, ok)
				}
			}
			if got := nm[testTuple(want)]; got.NetNS != ns {
				t.Errorf("DumpNetlinkInNetNS: %s: NetNS %d, want %d", want, got.NetNS, ns)
			}
		}
		// The namespace holds nothing else: a fresh one has only the child's.
		if len(inNS) != len(proc) {
			t.Errorf("child's namespace: netlink %d sockets, /proc %d", len(inNS), len(proc))
		}

		// The state filter applies inside the namespace too.
		cw, err := DumpNetlinkInNetNS(c.NetNSPath(), States(CloseWait))
		if err != nil {
			t.Fatal(err)
		}
		if len(cw) != len(c.CloseWait) {
			t.Errorf("CLOSE_WAIT in the child's namespace: %d, want %d", len(cw), len(c.CloseWait))
		}
	}

	pids := []int{os.Getpid(), 999999999}
	want := map[uint64][]int{self: {os.Getpid()}}
	for _, c := range children {
		pids = append(pids, c.PID)
		ns, _ := NetNSOf("/proc", c.PID)
		want[ns] = []int{c.PID}
	}
	groups, notes := GroupByNetNS("/proc", pids)
	if d := cmp.Diff(want, groups); d != "" {
		t.Errorf("GroupByNetNS (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"1 process exited before its network namespace could be read"}, notes); d != "" {
		t.Errorf("GroupByNetNS notes (-want +got):\n%s", d)
	}
}

// The caller's own namespace, named by path, needs no setns.
func TestDumpNetlinkInOwnNetNS(t *testing.T) {
	ln := sockettest.Listener(t, "tcp4")
	socks, err := DumpNetlinkInNetNS(NetNSPath("/proc", os.Getpid()), States(Listen))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := byTuple(t, "own netns", socks)[testTuple(ln)]; !ok {
		t.Errorf("listener %s not in a dump of the test's own namespace", ln)
	}
}

func TestDumpNetlinkInNetNSErrors(t *testing.T) {
	_, err := DumpNetlinkInNetNS("/proc/999999999/ns/net", AllStates)
	if !errors.Is(err, ErrNetNSUnavailable) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("exited process: err = %v, want ErrNetNSUnavailable and fs.ErrNotExist", err)
	}
	// A file that is not a namespace: setns(2) says EINVAL.
	_, err = DumpNetlinkInNetNS("/dev/null", AllStates)
	if !errors.Is(err, ErrNetNSUnavailable) {
		t.Errorf("/dev/null: err = %v, want ErrNetNSUnavailable", err)
	}
}

func TestNetNSOfFixture(t *testing.T) {
	root := t.TempDir()
	for _, pid := range []string{"1", "2", "3", "self"} {
		if err := os.MkdirAll(filepath.Join(root, pid, "ns"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Fixture namespaces are files: their inode stands for the namespace's.
	// 2 shares 1's (a hard link, one inode); 3 has its own.
	for _, f := range []string{"1", "3"} {
		if err := os.WriteFile(filepath.Join(root, f, "ns", "net"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(root, "1", "ns", "net"), filepath.Join(root, "2", "ns", "net")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, "3", "ns", "net"), filepath.Join(root, "self", "ns", "net")); err != nil {
		t.Fatal(err)
	}
	ino := func(pid int) uint64 {
		n, err := NetNSOf(root, pid)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if ino(1) != ino(2) || ino(1) == ino(3) || ino(0) != ino(3) {
		t.Errorf("inodes 1:%d 2:%d 3:%d self:%d; want 1 = 2 != 3 = self", ino(1), ino(2), ino(3), ino(0))
	}
	if _, err := NetNSOf(root, 4); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "pid 4") {
		t.Errorf("missing pid: err = %v, want fs.ErrNotExist naming the pid", err)
	}
	groups, notes := GroupByNetNS(root, []int{3, 1, 4, 2, 5})
	if d := cmp.Diff(map[uint64][]int{ino(1): {1, 2}, ino(3): {3}}, groups); d != "" {
		t.Errorf("groups (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"2 processes exited before their network namespace could be read"}, notes); d != "" {
		t.Errorf("notes (-want +got):\n%s", d)
	}
}

// asNobodyEnv marks the re-executed test binary of TestUnprivileged; its
// value is the pid of a process in another network namespace.
const asNobodyEnv = "KDIAG_NETSTAT_TEST_AS_NOBODY"

// What kdiag sees without root, checked for real: the test binary runs again
// as uid 65534 with fd 3 open on the network namespace of a child (opened by
// root, as a container runtime's handle would be).
func TestUnprivileged(t *testing.T) {
	if v := os.Getenv(asNobodyEnv); v != "" {
		pid, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		unprivilegedChecks(t, pid)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the test binary as uid 65534 beside a namespace of root's")
	}
	c := sockettest.StartChild(t, sockettest.Spec{Network: "tcp4", CloseWait: 2, NetNS: true})
	ns, err := os.Open(c.NetNSPath())
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	// The go tool's build directory is root's alone: copy the binary where
	// uid 65534 can run it.
	dir, err := os.MkdirTemp("", "kdiag-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "netstat.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestUnprivileged$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), asNobodyEnv+"="+strconv.Itoa(c.PID))
	cmd.ExtraFiles = []*os.File{ns} // fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("as uid 65534:\n%s", out)
	if err != nil {
		t.Fatalf("the checks as uid 65534 failed: %v", err)
	}
}

func unprivilegedChecks(t *testing.T, childPID int) {
	if os.Geteuid() == 0 {
		t.Fatal("meant to run as uid 65534")
	}
	// sock_diag needs no privilege, and reports the socket's owner.
	ln := sockettest.Listener(t, "tcp4")
	for _, src := range []struct {
		name string
		dump func() ([]Socket, error)
	}{{"netlink", netlinkAll}, {"/proc", procAll}} {
		socks := dumpAll(t, src.name, src.dump, []*sockettest.Socket{ln})
		got, ok := byTuple(t, src.name, socks)[testTuple(ln)]
		if !ok || got.UID != 65534 || got.Inode != ln.Inode {
			t.Errorf("%s: own listener %s reported as %+v (found %v), want uid 65534", src.name, ln, got, ok)
		}
	}

	// Another user's namespace handle cannot be read: a note, key 0.
	groups, notes := GroupByNetNS("/proc", []int{1, os.Getpid()})
	if len(groups[0]) != 1 || groups[0][0] != 1 || len(notes) != 1 || !strings.Contains(notes[0], "run as root") {
		t.Errorf("GroupByNetNS as non-root: groups %v notes %q; want pid 1 under 0 and one note", groups, notes)
	}
	_, err := DumpNetlinkInNetNS("/proc/1/ns/net", AllStates)
	if !errors.Is(err, ErrNetNSUnavailable) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("pid 1's namespace: err = %v, want ErrNetNSUnavailable and fs.ErrPermission", err)
	}
	// An open handle (fd 3) opens again, but setns(2) needs CAP_SYS_ADMIN.
	_, err = DumpNetlinkInNetNS("/proc/self/fd/3", AllStates)
	if !errors.Is(err, ErrNetNSUnavailable) || !errors.Is(err, unix.EPERM) {
		t.Errorf("setns as non-root: err = %v, want ErrNetNSUnavailable and EPERM", err)
	}
	t.Logf("as uid %d: %v", os.Geteuid(), err)
	// The fallback still sees that namespace's sockets: /proc/<pid>/net is
	// readable by anyone.
	socks, err := ReadProcNetTCP("/proc", childPID, States(CloseWait))
	if err != nil || len(socks) != 2 {
		t.Errorf("ReadProcNetTCP of the child's namespace as non-root: %d CLOSE_WAIT, err %v; want 2", len(socks), err)
	}
}
