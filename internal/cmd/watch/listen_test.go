package watch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kdiag/kdiag/internal/sockettest"
	"github.com/kdiag/kdiag/internal/testbin"
	"github.com/kdiag/kdiag/internal/testio"
	"github.com/kdiag/kdiag/netstat"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var kdiagOnce struct {
	sync.Once
	path string
	err  error
}

// kdiagBinary builds kdiag once for the tests that run it as a user does.
func kdiagBinary(t *testing.T) string {
	t.Helper()
	kdiagOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kdiag-watch-test")
		if err != nil {
			kdiagOnce.err = err
			return
		}
		kdiagOnce.path, kdiagOnce.err = testbin.BuildKdiag(dir)
	})
	if kdiagOnce.err != nil {
		t.Skipf("cannot build kdiag: %v", kdiagOnce.err)
	}
	return kdiagOnce.path
}

// freePort returns a port of 127.0.0.1 that nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// acceptedBy counts the connections to port that pid has accepted: its
// ESTABLISHED sockets of that local port, attributed to its fds by kdiag's
// scanner (those still in the kernel's accept queue have no fd).
func acceptedBy(t *testing.T, pid, port int) int {
	t.Helper()
	snap, err := netstat.NewScanner("/proc").Scan(context.Background(),
		netstat.Query{States: netstat.States(netstat.Established), PIDs: []int{pid}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range snap.Sockets {
		if int(s.Local.Port()) == port && s.PID == pid {
			n++
		}
	}
	return n
}

// TestListenUnderFDLimit runs kdiag watch --listen under prlimit
// --nofile=256 beside a child's 5 CLOSE_WAIT sockets, and opens 600
// connections to its metrics port that each send a scrape and then read
// nothing. Before issue 30 watch took every one until it ran out of fds,
// and every scan failed ("open /proc: too many open files"). Now: its
// scans go on seeing the 5 sockets, it holds at most 64 of the connections
// (a quarter of 256) and closes the rest to make room, and a scrape after
// them is answered.
func TestListenUnderFDLimit(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("needs prlimit (util-linux)")
	}
	bin := kdiagBinary(t)
	child := sockettest.StartChild(t, sockettest.Spec{CloseWait: 5})
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(prlimit, "--nofile=256:256", "--", bin, "watch", "--pid", strconv.Itoa(child.PID),
		"--state", "close-wait,established", "--interval", "100ms", "--duration", "5m", "--events", "off", "--listen", addr)
	var stderr testio.SyncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// scans waits for n more plain lines (one a scan), each with the
	// child's 5 CLOSE_WAIT sockets.
	want := fmt.Sprintf("[%d] close_wait=5 ", child.PID)
	scans := func(what string, n int) {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for i := 0; i < n; i++ {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("%s: watch ended; stderr:\n%s", what, stderr.String())
				}
				if !strings.Contains(l, want) {
					t.Fatalf("%s: scan line %q lacks %q; stderr:\n%s", what, l, want, stderr.String())
				}
			case <-deadline:
				t.Fatalf("%s: %d of %d scans in 60 s; stderr:\n%s", what, i, n, stderr.String())
			}
		}
	}
	scans("before the connections", 2)

	const conns = 600
	var closed atomic.Int32
	var all []net.Conn
	t.Cleanup(func() {
		for _, c := range all {
			c.Close()
		}
	})
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		all = append(all, c)
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: kdiag\r\n\r\n"); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		go func() {
			// Read whatever comes (a page, for those served) until
			// watch closes the connection, or the test ends.
			c.SetReadDeadline(time.Now().Add(2 * time.Minute))
			_, err := io.Copy(io.Discard, c)
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				closed.Add(1)
			}
		}()
	}
	// Drain what queued while the connections were opened, then the
	// scans after them.
	for len(lines) > 0 {
		<-lines
	}
	scans("under 600 connections", 3)
	if n := acceptedBy(t, cmd.Process.Pid, port); n > 64 {
		t.Errorf("watch holds %d connections, above its cap of 64 (a quarter of 256)", n)
	}
	// Those it let go of to make room: all but the ones it holds.
	deadline := time.Now().Add(60 * time.Second)
	for closed.Load() < conns-64 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := closed.Load(); n < conns-64 {
		t.Errorf("watch closed %d of the %d connections in 60 s, want all but at most 64", n, conns)
	}

	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("a scrape after the 600: %v", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if e := mfs["kdiag_scan_errors_total"].GetMetric(); len(e) != 1 || e[0].GetCounter().GetValue() != 0 {
		t.Errorf("kdiag_scan_errors_total = %v, want 0", e)
	}
	scans("after the scrape", 1)
	if s := stderr.String(); strings.Contains(s, "scan failed") || !strings.Contains(s, "at most 64 connections at once") {
		t.Errorf("stderr: a scan failed, or the cap is not said:\n%s", s)
	}
}
