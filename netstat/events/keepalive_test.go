//go:build linux

package events

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kdiag/kdiag/internal/testio"
)

// The keepalive child: the test binary re-executed under `unshare -n`,
// which holds CLOSE_WAIT sockets with keepalive until the kernel resets
// them, as issue 13 reproduces it.
const (
	childEnv  = "KDIAG_EVENTS_KEEPALIVE_CHILD" // the number of sockets
	childMark = "events-child: "
	// finTimeout is the child namespace's net.ipv4.tcp_fin_timeout: the
	// server ends' FIN_WAIT_2 lasts this long, then the clients' next
	// keepalive probe is answered by an RST.
	finTimeout = 2 * time.Second
)

// childLine is one line the child writes: its sockets once each is in
// CLOSE_WAIT, then Reset once the kernel shows each in CLOSE.
type childLine struct {
	Sockets []childSocket `json:"sockets,omitempty"`
	Reset   bool          `json:"reset,omitempty"`
	Err     string        `json:"err,omitempty"`
}

type childSocket struct {
	Local, Remote netip.AddrPort
	Cookie        uint64
}

func init() {
	if n, ok := os.LookupEnv(childEnv); ok {
		if err := keepaliveChild(n, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stdout, "%s%s\n", childMark, mustJSON(childLine{Err: err.Error()}))
			os.Exit(3)
		}
		os.Exit(0)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// keepaliveChild runs in its own network namespace, loopback up: it sets
// tcp_fin_timeout there, connects n clients with keepalive every second
// (TCP_KEEPIDLE=1, TCP_KEEPINTVL=1) to a server that closes what it
// accepts, reports them once in CLOSE_WAIT, waits until the kernel has
// reset each (state CLOSE, the fd still held), says so, and holds the fds
// until in closes. Every wait is bounded.
func keepaliveChild(arg string, in io.Reader, out io.Writer) error {
	var n int
	if _, err := fmt.Sscan(arg, &n); err != nil {
		return fmt.Errorf("%s=%q: %w", childEnv, arg, err)
	}
	secs := fmt.Sprint(int(finTimeout / time.Second))
	if err := os.WriteFile("/proc/sys/net/ipv4/tcp_fin_timeout", []byte(secs), 0); err != nil {
		return err
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go serveClosing(ln, nil)
	d := net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: time.Second, Interval: time.Second, Count: 9}}
	conns, err := dialCloseWaitErr(&d, addrPort(ln.Addr()), n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if err != nil {
		return err
	}
	var line childLine
	for _, c := range conns {
		s := childSocket{Local: addrPort(c.LocalAddr()), Remote: addrPort(c.RemoteAddr())}
		rc, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var cerr error
		if err := rc.Control(func(fd uintptr) {
			s.Cookie, cerr = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
		}); err != nil || cerr != nil {
			return errors.Join(err, cerr)
		}
		line.Sockets = append(line.Sockets, s)
	}
	fmt.Fprintf(out, "%s%s\n", childMark, mustJSON(line))
	for _, c := range conns {
		// About finTimeout after the server's close, then up to a
		// probe interval: 30 s is only a bound for a broken kernel.
		if err := waitState(c, tcpClose, 30*time.Second); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%s%s\n", childMark, mustJSON(childLine{Reset: true}))
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, in); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
	}
	return nil
}

// TestTransitionsKeepaliveReset reproduces issue 13's held CLOSE sockets
// for real: in a network namespace of its own with tcp_fin_timeout=2, a
// child holds CLOSE_WAIT sockets with keepalive every second, until the
// peer's FIN_WAIT_2 expires and the next probe gets an RST. The Counter,
// opened before, must report each socket's ESTABLISHED -> CLOSE_WAIT
// (before the child said they were in CLOSE_WAIT) and its CLOSE_WAIT ->
// CLOSE with the same Sock and the cookie the child read, at least the
// peer's FIN_WAIT_2 later and before the child saw the reset. The
// tracepoint is host-wide, so it sees the child's namespace.
func TestTransitionsKeepaliveReset(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, for unshare -n")
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	c := openTransitions(t)
	k := &collector{t: t, c: c}
	const n = 3
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "-n", "sh", "-c", `ip link set lo up && exec "$0" "$@"`, self, "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", childEnv, n), "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr testio.SyncBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("child: %v; stderr:\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	lines := make(chan childLine)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), childMark); ok {
				var l childLine
				if err := json.Unmarshal([]byte(s), &l); err != nil {
					l.Err = err.Error()
				}
				lines <- l
			}
		}
		io.Copy(io.Discard, stdout)
		close(lines)
	}()
	next := func(what string) childLine {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the child exited before %s; stderr:\n%s", what, stderr.String())
			}
			if l.Err != "" {
				t.Fatalf("child: %s; stderr:\n%s", l.Err, stderr.String())
			}
			return l
		case <-time.After(45 * time.Second):
			t.Fatalf("no %s from the child in 45 s; stderr:\n%s", what, stderr.String())
		}
		panic("unreachable")
	}
	socks := next("sockets").Sockets
	ready := time.Now()
	if len(socks) != n {
		t.Fatalf("the child reported %d sockets, want %d", len(socks), n)
	}
	next("reset")
	reset := time.Now()

	sameTuple := func(s childSocket) func(Transition) bool {
		return func(tr Transition) bool { return tr.Local == s.Local && tr.Remote == s.Remote }
	}
	var cw []Transition
	k.until(5*time.Second, "both transitions of every socket of the child", func(got []Transition) bool {
		cw = cw[:0]
		for _, s := range socks {
			x := of(got, tcpEstablished, tcpCloseWait, sameTuple(s))
			if len(x) != 1 || len(of(got, tcpCloseWait, tcpClose, func(tr Transition) bool { return tr.Sock == x[0].Sock })) == 0 {
				return false
			}
			cw = append(cw, x[0])
		}
		return true
	})
	for i, s := range socks {
		if at := cw[i].At; at.Before(start) || at.After(ready) {
			t.Errorf("%v: CLOSE_WAIT at %v, not between the child's start %v and its report %v", s.Local, at, start, ready)
		}
		cl := of(k.got, tcpCloseWait, tcpClose, func(tr Transition) bool { return tr.Sock == cw[i].Sock })
		if len(cl) != 1 {
			t.Errorf("%v: %d CLOSE_WAIT -> CLOSE, want 1:\n%s", s.Local, len(cl), list(cl))
			continue
		}
		want := Transition{Family: AFInet, Local: netip.AddrPortFrom(s.Local.Addr(), 0), Remote: s.Remote,
			Old: tcpCloseWait, New: tcpClose, At: cl[0].At, Sock: cw[i].Sock, Cookie: s.Cookie}
		if cl[0] != want {
			t.Errorf("%v: got %+v\nwant %+v", s.Local, cl[0], want)
		}
		t.Logf("%v: CLOSE_WAIT at %v, reset %v later (the child saw it %v after the FIN)", s.Local, cw[i].At.Format("15:04:05.000000"), cl[0].At.Sub(cw[i].At), reset.Sub(cw[i].At))
		// The RST cannot come before the peer's FIN_WAIT_2 has expired,
		// finTimeout after the FIN (kernel timers never fire early): a
		// margin of half of it leaves no room for doubt.
		if held := cl[0].At.Sub(cw[i].At); held < finTimeout/2 || cl[0].At.After(reset) {
			t.Errorf("%v: reset %v after the FIN, at %v; want at least %v, and before the child saw it (%v)", s.Local, held, cl[0].At, finTimeout/2, reset)
		}
	}
}
