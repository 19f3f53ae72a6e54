//go:build linux

package sockettest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kdiag/kdiag/internal/testio"
)

// childEnv carries the Spec, as JSON, to the re-executed test binary.
const childEnv = "KDIAG_SOCKETTEST_CHILD"

// childMark starts the one stdout line on which the child describes its
// sockets, so that anything else the binary prints is not taken for it.
const childMark = "sockettest-child: "

// DefaultLifetime bounds how long a child lives when Spec.Lifetime is 0: it
// exits by itself then even if the parent never closes its stdin.
const DefaultLifetime = 60 * time.Second

// Spec says which sockets StartChild's child process holds.
type Spec struct {
	// Network is "tcp4" (127.0.0.1, the default) or "tcp6" ([::1]).
	Network string `json:"network"`
	// Listeners, Established and CloseWait are how many of each to make, as
	// the functions of the same names do. The child holds one fd per
	// listener and CLOSE_WAIT socket and two per ESTABLISHED one (both
	// ends), within its open-file limit (ulimit -n): spread large counts
	// over several children.
	Listeners   int `json:"listeners"`
	Established int `json:"established"`
	CloseWait   int `json:"close_wait"`
	// PeerData is the number of bytes each CloseWait peer writes before it
	// closes (Recv-Q PeerData+1, see Socket.RecvQ); ReadToEOF has the child
	// read them and the FIN (Recv-Q 0), as the options of those names do.
	PeerData  int  `json:"peer_data"`
	ReadToEOF bool `json:"read_to_eof"`
	// KeepAlive is the CloseWait clients' keepalive idle and interval (the
	// KeepAlive option); 0 keeps Go's default.
	KeepAlive time.Duration `json:"keep_alive"`
	// DeferKeepAlive has the CloseWait clients start with keepalive off, so
	// that they stay in CLOSE_WAIT (no timer runs there) until the test
	// calls Child.StartKeepAlive, which turns it on with KeepAlive. The test
	// then says when they may leave CLOSE_WAIT, and need not see them there
	// before a timer it does not control moves them on.
	DeferKeepAlive bool `json:"defer_keep_alive"`
	// FinTimeout, with NetNS, sets net.ipv4.tcp_fin_timeout in the child's
	// namespace (the setting is per namespace): how long the peers'
	// FIN_WAIT_2 sides live, after which a keepalive probe gets an RST.
	FinTimeout time.Duration `json:"fin_timeout"`
	// NetNS runs the child in a new network namespace of its own, under
	// `unshare -n` with its loopback brought up first; its sockets are then
	// invisible to the parent's /proc/net/tcp and netlink dumps. It needs
	// root, unshare (util-linux) and ip (iproute2): StartChild skips the test
	// when one is missing.
	NetNS bool `json:"netns"`
	// Lifetime bounds the child's life (DefaultLifetime when 0).
	Lifetime time.Duration `json:"lifetime"`
}

// Child is a process, started by StartChild, that holds the sockets of a
// Spec until Stop or the end of the test.
type Child struct {
	// PID is the child's pid, the pid that holds its sockets.
	PID int `json:"pid"`
	// Listeners, Established and CloseWait are the sockets made, as Spec
	// asked, with PID and FD the child's.
	Listeners   []*Socket `json:"listeners"`
	Established []*Socket `json:"established"`
	CloseWait   []*Socket `json:"close_wait"`

	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stopOnce sync.Once
	stopErr  error
	exited   chan struct{}
}

// NetNSPath returns /proc/<pid>/ns/net of the child: the namespace its
// sockets live in.
func (c *Child) NetNSPath() string { return fmt.Sprintf("/proc/%d/ns/net", c.PID) }

// Sockets returns every socket the child made (not their accepted peers).
func (c *Child) Sockets() []*Socket {
	out := make([]*Socket, 0, len(c.Listeners)+len(c.Established)+len(c.CloseWait))
	out = append(out, c.Listeners...)
	out = append(out, c.Established...)
	return append(out, c.CloseWait...)
}

// StartKeepAlive turns keepalive on, every Spec.KeepAlive, on the CloseWait
// clients of a child started with Spec.DeferKeepAlive. With FinTimeout they
// then leave CLOSE_WAIT for held CLOSE within FinTimeout plus a few probes;
// wait for that state with a bound.
func (c *Child) StartKeepAlive() error {
	_, err := io.WriteString(c.stdin, keepAliveCmd+"\n")
	return err
}

// StartKeepAliveOn is StartKeepAlive for the first n CloseWait clients
// only (in Child.CloseWait's order): the others stay in CLOSE_WAIT, so
// the child holds both, as a leaking client does a while.
func (c *Child) StartKeepAliveOn(n int) error {
	_, err := fmt.Fprintf(c.stdin, "%s %d\n", keepAliveCmd, n)
	return err
}

// CloseCloseWait has the child close its i-th CloseWait socket (in
// Child.CloseWait's order), as a client does that finally closes one: it
// leaves CLOSE_WAIT for LAST_ACK, an orphan, and then the tables. The
// child does it when it reads the line; wait for the state it causes.
func (c *Child) CloseCloseWait(i int) error {
	_, err := fmt.Fprintf(c.stdin, "%s %d\n", closeCmd, i)
	return err
}

// closeCmd is the line on the child's stdin that has it close one of its
// CloseWait sockets, by index.
const closeCmd = "close"

// keepAliveCmd is the line on the child's stdin that has it turn keepalive
// on, for every CloseWait client or, followed by a count, the first ones.
const keepAliveCmd = "keepalive"

// Stop closes the child's stdin, which makes it close its sockets and exit,
// and reaps it, killing it if it has not exited within 10 s. It is safe to
// call more than once; cleanup calls it.
func (c *Child) Stop() error {
	c.stopOnce.Do(func() {
		c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			c.cmd.Process.Kill()
			<-c.exited
		}
		c.stopErr = c.cmd.Wait()
	})
	return c.stopErr
}

// StartChild re-executes the test binary (os.Args[0]) as a child that makes
// the sockets spec asks for, in its own process and, with spec.NetNS, its own
// network namespace; prints one JSON line describing them (pid, fd, inode,
// addresses, state) which StartChild returns as a Child; and holds them until
// its stdin closes (Stop, or cleanup) or spec.Lifetime passes. Cleanup stops
// and reaps the child.
//
// The child's work is done by this package's init, so the test binary needs
// nothing more than to import sockettest.
func StartChild(t testing.TB, spec Spec) *Child {
	t.Helper()
	if spec.Network == "" {
		spec.Network = "tcp4"
	}
	if spec.Lifetime == 0 {
		spec.Lifetime = DefaultLifetime
	}
	if _, err := loopback(spec.Network); err != nil {
		t.Fatalf("sockettest.StartChild: %v", err)
	}
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatalf("sockettest.StartChild: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	// -test.run=^$: should the child somehow get past init, it runs no test.
	args := []string{self, "-test.run=^$"}
	if spec.NetNS {
		if os.Geteuid() != 0 {
			t.Skip("sockettest: a child in its own network namespace needs root (unshare -n)")
		}
		for _, tool := range []string{"unshare", "ip"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("sockettest: a child in its own network namespace needs %s: %v", tool, err)
			}
		}
		// unshare execs sh, which execs the test binary: the pid stays the
		// same throughout, and a new namespace's loopback starts down.
		args = append([]string{"unshare", "-n", "sh", "-c", `ip link set lo up && exec "$0" "$@"`}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	if _, set := os.LookupEnv("GORACE"); !set {
		// A race-enabled binary sleeps 1 s at exit by default; a child
		// has nothing to wait for.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	// Should the test binary die without cleanup, the child dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// exec copies stderr on its own goroutine while an error message may
	// read it.
	var stderr testio.SyncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("sockettest.StartChild: %v", err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("sockettest.StartChild: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("sockettest.StartChild: %v", err)
	}
	c := &Child{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	t.Cleanup(func() { c.Stop() })

	lines := make(chan string, 1)
	go func() {
		defer close(c.exited)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<30)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), childMark); ok {
				lines <- line
			}
		}
		// Drain to EOF, which comes when the child exits, so that Wait
		// (which closes the pipe) never races a read.
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-lines:
		if err := json.Unmarshal([]byte(line), c); err != nil {
			t.Fatalf("sockettest.StartChild: reading the child's sockets: %v", err)
		}
	case <-c.exited:
		c.Stop()
		t.Fatalf("sockettest.StartChild: the child exited (%v) without describing its sockets; stderr:\n%s", c.stopErr, stderr.String())
	case <-time.After(spec.Lifetime):
		t.Fatalf("sockettest.StartChild: no answer from the child in %v; stderr:\n%s", spec.Lifetime, stderr.String())
	}
	return c
}

// init serves StartChild's child before any code of the test binary runs:
// every binary that imports sockettest can be a child, with or without a
// TestMain, and the child never runs a package's TestMain or its tests.
func init() { MaybeRunChild() }

// MaybeRunChild turns the process into a StartChild child when it was started
// as one, and returns at once otherwise. The package's init already calls it,
// so calling it again (first thing in a TestMain, say) is harmless: as a
// child the process never gets there.
func MaybeRunChild() {
	js, ok := os.LookupEnv(childEnv)
	if !ok {
		return
	}
	if err := runChild(js, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "sockettest child: %v\n", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// runChild makes spec's sockets, writes their description to out, and holds
// them until in reaches EOF or the lifetime passes.
func runChild(js string, in io.Reader, out io.Writer) error {
	var spec Spec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		return fmt.Errorf("%s: %w", childEnv, err)
	}
	deadline := time.After(spec.Lifetime)
	var cs closers
	defer func() { cs.Close() }()
	c := Child{PID: os.Getpid()}
	for range spec.Listeners {
		s, err := newListener(spec.Network)
		if err != nil {
			return err
		}
		cs = append(cs, s)
		c.Listeners = append(c.Listeners, s)
	}
	if spec.Established > 0 {
		socks, closer, err := newEstablished(spec.Network, spec.Established)
		cs = append(cs, closer)
		if err != nil {
			return err
		}
		c.Established = socks
	}
	if spec.FinTimeout > 0 {
		if !spec.NetNS {
			return errors.New("FinTimeout needs NetNS: the sysctl would change the host's")
		}
		secs := max(int(spec.FinTimeout.Round(time.Second).Seconds()), 1)
		if err := os.WriteFile("/proc/sys/net/ipv4/tcp_fin_timeout", []byte(strconv.Itoa(secs)), 0o644); err != nil {
			return fmt.Errorf("setting tcp_fin_timeout in the child's namespace: %w", err)
		}
	}
	if spec.CloseWait > 0 {
		o := options{peerData: spec.PeerData, readToEOF: spec.ReadToEOF, keepAlive: spec.KeepAlive}
		if spec.DeferKeepAlive {
			o.keepAlive = -1
		}
		socks, closer, err := newCloseWait(spec.Network, spec.CloseWait, o)
		cs = append(cs, closer)
		if err != nil {
			return err
		}
		c.CloseWait = socks
	}
	js2, err := json.Marshal(&c)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(out, "%s%s\n", childMark, js2); err != nil {
		return err
	}
	eof := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			cmd, arg, _ := strings.Cut(sc.Text(), " ")
			if cmd == closeCmd {
				if i, err := strconv.Atoi(arg); err == nil && i >= 0 && i < len(c.CloseWait) {
					c.CloseWait[i].Close()
				}
				continue
			}
			if cmd != keepAliveCmd {
				continue
			}
			socks := c.CloseWait
			if n, err := strconv.Atoi(arg); err == nil && n < len(socks) {
				socks = socks[:max(n, 0)]
			}
			if err := startKeepAlive(socks, spec.KeepAlive); err != nil {
				eof <- err
				return
			}
		}
		eof <- sc.Err()
	}()
	select {
	case err := <-eof:
		return err
	case <-deadline:
		return errors.New("lifetime over before the parent closed stdin")
	}
}

// startKeepAlive turns keepalive on, every d (at least 1 s), on socks.
func startKeepAlive(socks []*Socket, d time.Duration) error {
	for _, s := range socks {
		c, ok := s.conn.(*net.TCPConn)
		if !ok {
			return fmt.Errorf("%s: not a TCP connection", s)
		}
		if err := c.SetKeepAliveConfig(keepAliveConfig(d)); err != nil {
			return fmt.Errorf("%s: keepalive: %w", s, err)
		}
	}
	return nil
}
