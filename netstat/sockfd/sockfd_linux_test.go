package sockfd

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kdiag/kdiag/internal/testio"
)

// open returns an Iterator, or skips where the kernel or the user cannot
// have one: not root, no kernel BTF, a kernel before 5.11. Anywhere else a
// failure is a failure.
func open(t testing.TB, proto bool) *Iterator {
	it, err := Open(proto)
	if err != nil {
		var uts syscall.Utsname
		_ = syscall.Uname(&uts)
		_, btfErr := os.Stat(vmlinuxBTF)
		if os.Geteuid() != 0 || btfErr != nil || !atLeast511(uts.Release[:]) {
			t.Skipf("%v (needs root and a kernel with BTF, 5.11 or later)", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { it.Close() })
	return it
}

func inodeOf(t *testing.T, f *os.File) uint64 {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestEachSeesOwnSockets: the iterator lists this process's TCP (IPv4 and
// IPv6), UDP and UNIX sockets with the inode fstat gives and the fd they
// are at, and says which are TCP.
func TestEachSeesOwnSockets(t *testing.T) {
	it := open(t, true)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type want struct {
		tcp, v6 bool
		fam     uint16
		// state, for TCP sockets: 1 ESTABLISHED, 7 CLOSE (HeldClose).
		state uint8
	}
	wants := map[uint64]want{}
	fds := map[uint64]int{}
	add := func(f *os.File, w want) {
		ino := inodeOf(t, f)
		wants[ino] = w
		fds[ino] = int(f.Fd())
		t.Cleanup(func() { f.Close() })
	}
	cf, _ := c.(*net.TCPConn).File()
	add(cf, want{tcp: true, fam: 2, state: 1})
	// A TCP socket never connected: TCP_CLOSE, in no table, as a reset
	// one is.
	raw, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	add(os.NewFile(uintptr(raw), "raw"), want{tcp: true, fam: 2, state: TCPClose})
	// A dialed IPv6 connection (Go may make a listener MPTCP, protocol
	// 262, which is not TCP: inet_diag's TCP dump does not list it).
	if ln6, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		defer ln6.Close()
		c6, err := net.Dial("tcp6", ln6.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c6.Close()
		f, _ := c6.(*net.TCPConn).File()
		add(f, want{tcp: true, v6: true, fam: 10, state: 1})
	}
	u, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	uf, _ := u.(*net.UDPConn).File()
	add(uf, want{fam: 2})
	sp, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	add(os.NewFile(uintptr(sp[0]), "unix0"), want{fam: 1})
	add(os.NewFile(uintptr(sp[1]), "unix1"), want{fam: 1})

	got := map[uint64]FD{}
	if err := it.Each(func(f FD) bool {
		if int(f.PID) == os.Getpid() {
			got[f.Inode] = f
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	for ino, w := range wants {
		f, ok := got[ino]
		if !ok {
			t.Errorf("inode %d (fd %d) not listed", ino, fds[ino])
			continue
		}
		if int(f.FD) != fds[ino] || f.IsTCP() != w.tcp || f.IPv6() != w.v6 || f.Family != w.fam {
			t.Errorf("inode %d: got %+v (tcp %v), want fd %d family %d tcp %v", ino, f, f.IsTCP(), fds[ino], w.fam, w.tcp)
		}
		if w.tcp && (f.State != w.state || f.HeldClose() != (w.state == TCPClose)) {
			t.Errorf("inode %d: state %d (held CLOSE %v), want %d", ino, f.State, f.HeldClose(), w.state)
		}
		if !w.tcp && f.HeldClose() {
			t.Errorf("inode %d: %+v, not TCP, taken for held CLOSE", ino, f)
		}
	}
	// A pipe is not a socket.
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	pipeIno := inodeOf(t, r)
	it.Each(func(f FD) bool {
		if int(f.PID) == os.Getpid() && f.Inode == pipeIno {
			t.Errorf("a pipe listed as a socket: %+v", f)
		}
		return true
	})
}

// TestEachStops: fn returning false ends the pass.
func TestEachStops(t *testing.T) {
	it := open(t, false)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	n := 0
	start := time.Now()
	if err := it.Each(func(FD) bool { n++; return false }); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("fn called %d times after it returned false, want 1", n)
	}
	_ = start
}

// atLeast511 reports whether a uname release ("6.18.44-...") is 5.11 or
// later.
func atLeast511(rel []int8) bool {
	var b []byte
	for _, c := range rel {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	var major, minor int
	if _, err := fmt.Sscanf(string(b), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 5 || (major == 5 && minor >= 11)
}

// TestPIDNamespace: in a PID namespace of its own (unshare --pid), the
// iterator numbers processes as that namespace does (the child is pid 1
// there) and lists only the processes that namespace holds.
func TestPIDNamespace(t *testing.T) {
	if os.Getenv("KDIAG_SOCKFD_PIDNS") == "1" {
		pidNamespaceChild(t)
		return
	}
	open(t, false).Close() // skips where the iterator cannot be had
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", os.Args[0], "-test.run", "^TestPIDNamespace$", "-test.v")
	cmd.Env = append(os.Environ(), "KDIAG_SOCKFD_PIDNS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child in a new PID namespace: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "child checked") {
		t.Fatalf("the child did not run its checks:\n%s", out)
	}
}

func pidNamespaceChild(t *testing.T) {
	it := open(t, false)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, _ := ln.(*net.TCPListener).File()
	defer f.Close()
	ino := inodeOf(t, f)
	found := false
	pids := map[int32]bool{}
	if err := it.Each(func(x FD) bool {
		pids[x.PID] = true
		if x.Inode == ino {
			if int(x.PID) != os.Getpid() {
				t.Errorf("own socket listed as pid %d fd %d, want pid %d", x.PID, x.FD, os.Getpid())
			}
			found = found || int(x.FD) == int(f.Fd())
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Errorf("own socket (inode %d) not listed at fd %d", ino, f.Fd())
	}
	for pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			t.Errorf("pid %d listed, not in this namespace's /proc: %v", pid, err)
		}
	}
	t.Logf("child checked: pid %d, %d processes with sockets", os.Getpid(), len(pids))
}

// TestLoadUnderSignals: a load whose thread keeps receiving signals, as a
// process that starts children gets SIGCHLD, still succeeds. The verifier
// gives up with EAGAIN when a signal is pending; CI's race run once saw
// that as "resource temporarily unavailable".
func TestLoadUnderSignals(t *testing.T) {
	open(t, true).Close() // skips where there is no iterator to load
	l, err := kernelLayout()
	if err != nil {
		t.Fatal(err)
	}
	insns := program(l, true)
	tids := make(chan int)
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- syscall.Gettid()
		var err error
		for range 200 {
			var fd int
			if fd, err = loadProgram(insns, l.iterFunc); err != nil {
				break
			}
			syscall.Close(fd)
		}
		done <- err
	}()
	tid, pid := <-tids, os.Getpid()
	sent := 0
	for {
		select {
		case err := <-done:
			t.Logf("%d signals sent", sent)
			if err != nil {
				t.Fatalf("a load under signals: %v", err)
			}
			return
		default:
		}
		if err := syscall.Tgkill(pid, tid, syscall.SIGCHLD); err != nil {
			t.Fatal(err)
		}
		sent++
	}
}

// TestEachPastQuietFDs: a pass goes on past a million fds in a row that
// are not sockets. The kernel ends such a read with EAGAIN and nothing
// read (MAX_ITER_OBJECTS); a pass that took that for an error saw no
// socket of any later process. A child fills its fd table with dups of
// /dev/null and starts enough cat processes, which inherit them all, for
// two million quiet fds in a row, then a holder that listens behind
// them, which the pass must list.
func TestEachPastQuietFDs(t *testing.T) {
	switch os.Getenv("KDIAG_SOCKFD_QUIET") {
	case "dup":
		quietFDsDup()
		return
	case "hold":
		quietFDsHold()
		return
	}
	it := open(t, false)
	cmd := exec.Command(os.Args[0], "-test.run=^TestEachPastQuietFDs$")
	cmd.Env = append(os.Environ(), "KDIAG_SOCKFD_QUIET=dup")
	// Every process of the chain exits at its stdin's end.
	l := testio.StartHeld(t, cmd).Line(t, 2*time.Minute)
	if reason, ok := strings.CutPrefix(l, "skip: "); ok {
		t.Skip(reason)
	}
	var ino uint64
	if _, err := fmt.Sscanf(l, "inode %d", &ino); err != nil {
		t.Fatalf("the children said %q, want \"inode N\"", l)
	}
	seen, fds := false, 0
	if err := it.Each(func(x FD) bool {
		seen = seen || x.Inode == ino
		fds++
		return true
	}); err != nil {
		t.Fatalf("a pass past a million quiet fds: %v", err)
	}
	if !seen {
		t.Errorf("the listener behind a million quiet fds (inode %d) was not listed among %d socket fds", ino, fds)
	}
}

// quietFDs is how many fds in a row that are not sockets
// TestEachPastQuietFDs makes: twice MAX_ITER_OBJECTS, so that wherever
// the read before them ends, a later one crosses a million.
const quietFDs = 2_000_000

// quietFDsDup raises its soft fd limit to the hard one and fills the table
// with dups of /dev/null, which exec does not close (dup leaves
// close-on-exec off); the cat processes and the holder it starts inherit
// them all.
func quietFDsDup() {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Printf("skip: %v\n", err)
		return
	}
	// Where the hard limit is huge (systemd's 2^30), a million and a bit
	// in one table will do.
	lim.Cur = min(lim.Max, quietFDs/2+100_000)
	perProc := int(lim.Cur) - 600 // room for the holder's runtime and listener
	cat, err := exec.LookPath("cat")
	if perProc < 8000 || err != nil || syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		fmt.Printf("skip: needs cat and a hard fd limit of 8600 or more (%d here)\n", lim.Max)
		return
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		fmt.Printf("skip: %v\n", err)
		return
	}
	for {
		fd, err := syscall.Dup(int(null.Fd()))
		if err != nil {
			fmt.Printf("dup: %v\n", err)
			os.Exit(1)
		}
		if fd >= perProc {
			break
		}
	}
	var cats []*exec.Cmd
	for n := perProc; n < quietFDs; n += perProc {
		c := exec.Command(cat)
		c.Stdin = os.Stdin
		if err := c.Start(); err != nil {
			fmt.Printf("cat: %v\n", err)
			os.Exit(1)
		}
		cats = append(cats, c)
	}
	holder := exec.Command(os.Args[0], "-test.run=^TestEachPastQuietFDs$")
	holder.Env = append(os.Environ(), "KDIAG_SOCKFD_QUIET=hold")
	holder.Stdin, holder.Stdout, holder.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = holder.Run()
	for _, c := range cats {
		c.Wait()
	}
	if err != nil {
		fmt.Printf("holder: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// quietFDsHold opens a listener above the inherited dups, says its inode,
// and holds it until stdin ends.
func quietFDsHold() {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		fmt.Printf("listen: %v\n", err)
		os.Exit(1)
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		fmt.Printf("listener file: %v\n", err)
		os.Exit(1)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		fmt.Printf("fstat: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("inode %d\n", st.Ino)
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
