package broker

// A broker in a child process under a resource limit (prlimit), for the
// tests that drive it to the limit: an open-file limit it runs out of, an
// address-space limit that a broker buffering without bound dies under
// ("fatal error: runtime: out of memory"). The child is this test binary,
// run again with the broker's Config in its environment.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/internal/testio"
)

// childEnv carries the child broker's Config, as JSON.
const childEnv = "KDIAG_BROKER_TEST_CHILD"

func TestMain(m *testing.M) {
	if cfg, ok := os.LookupEnv(childEnv); ok {
		os.Exit(runChild(cfg))
	}
	os.Exit(m.Run())
}

// runChild runs a broker for a parent test: it prints "addr HOST:PORT" once
// it listens, logs to stderr, and stops when its stdin closes.
func runChild(js string) int {
	var cfg Config
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "child broker: %s: %v\n", childEnv, err)
		return 2
	}
	if cfg.Ports == nil {
		cfg.Ports = []int{0}
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	c, err := Start(context.Background(), cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "child broker: %v\n", err)
		return 1
	}
	fmt.Printf("addr %s\n", c.Addrs()[0])
	_, _ = io.Copy(io.Discard, os.Stdin)
	c.Close()
	return 0
}

// childBroker is a broker running in a child process.
type childBroker struct {
	addr   string
	pid    int
	stderr *testio.SyncBuffer
	stdin  io.WriteCloser
	exited chan struct{} // closed when the child has exited
	err    error         // its exit, once exited is closed
}

// requirePrlimit returns prlimit's path, or skips the test.
func requirePrlimit(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit not installed (util-linux): the broker's limit tests run it under a resource limit")
	}
	return p
}

// startChild starts a broker with cfg in a child process under prlimit's
// limit (e.g. "--nofile=256"; "--data" in bytes: prlimit reads "512MiB" as
// something else), and stops it at the test's end.
func startChild(t testing.TB, limit string, cfg Config) *childBroker {
	t.Helper()
	prlimit := requirePrlimit(t)
	if raceEnabled && strings.HasPrefix(limit, "--data") {
		t.Skip("the race detector's shadow memory does not fit under prlimit --data: this test runs without -race")
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prlimit, limit, "--", os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	cb := &childBroker{stderr: &testio.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = cb.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if cb.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cb.pid = cmd.Process.Pid
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "addr "); ok {
				addr <- a
			}
		}
		cb.err = cmd.Wait()
		close(cb.exited)
	}()
	t.Cleanup(func() {
		cb.stdin.Close()
		select {
		case <-cb.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-cb.exited
		}
	})
	select {
	case cb.addr = <-addr:
	case <-cb.exited:
		t.Fatalf("child broker exited before listening: %v\n%s", cb.err, cb.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("child broker did not listen within 60s\n%s", cb.stderr)
	}
	return cb
}

// alive fails the test if the child has exited, with what it said.
func (cb *childBroker) alive(t testing.TB, when string) {
	t.Helper()
	select {
	case <-cb.exited:
		t.Fatalf("%s: the broker exited (%v); its last words:\n%s", when, cb.err, lastWords(cb.stderr.String()))
	default:
	}
}

// failed fails the test with err, or with the child's last words if the
// error is its death: a client sees the broker's death (EOF, a reset)
// before its exit is reaped, so it waits up to 10s for that.
func (cb *childBroker) failed(t testing.TB, when string, err error) {
	t.Helper()
	select {
	case <-cb.exited:
		cb.alive(t, when)
	case <-time.After(10 * time.Second):
	}
	t.Fatalf("%s: %v", when, err)
}

// peakRSS returns the child's peak resident set (VmHWM of
// /proc/PID/status), in bytes.
func (cb *childBroker) peakRSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cb.pid))
	if err != nil {
		return 0, err
	}
	return parseVmHWM(string(b))
}

// parseVmHWM reads the VmHWM line of a /proc/PID/status text ("VmHWM:
// 1234 kB").
func parseVmHWM(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("VmHWM line %q", line)
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			return n << 10, err
		}
	}
	return 0, errors.New("no VmHWM line")
}

// lastWords returns what a child broker said last: from its crash (a Go
// runtime fatal error or a panic) on, or else the end of its log.
func lastWords(s string) string {
	for _, m := range []string{"fatal error:", "panic:"} {
		if i := strings.Index(s, m); i >= 0 {
			return s[i:min(len(s), i+2000)]
		}
	}
	return tail(s, 3000)
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
