package deploy_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kdiag/kdiag/internal/testbin"
	"github.com/kdiag/kdiag/internal/testio"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// idleConns is how many connections TestDaemonSetUnderIdleConnections
// opens: the count that took watch to 141.7 MB before issue 30.
const idleConns = 6000

// TestDaemonSetUnderIdleConnections runs kdiag watch with the DaemonSet's
// arguments and environment (GOMEMLIMIT), its --listen moved to 127.0.0.1
// and, unless KDIAG_DS_INTERVAL names another, its --interval to 1s so that
// its scans show within seconds. It opens 6,000 connections to the metrics
// port that each send one scrape and then stay open, reading nothing: what
// took watch to 141.7 MB before issue 30, above the 128Mi limit. It checks
// that watch's peak resident memory (VmHWM) stays below limits.memory and
// that it keeps scanning: kdiag_scans_total grows by 2 after the
// connections, without a scan error.
//
// With -v it logs the resident memory before and under the connections and
// the load, the figures of BENCHMARKS.md; KDIAG_BIN runs another kdiag
// binary (the one before the fix, for the "before" figures):
//
//	KDIAG_DS_INTERVAL=15s go test ./deploy/ -run TestDaemonSetUnderIdleConnections -v
func TestDaemonSetUnderIdleConnections(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < idleConns+1000 {
		t.Skipf("needs an open-file limit of %d for the test's end of the connections (ulimit -n is %d)", idleConns+1000, lim.Cur)
	}
	c := daemonSet(t).Spec.Template.Spec.Containers[0]
	limit := parseSize(t, "limits.memory", c.Resources.Limits.Memory, map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30})
	interval := "1s"
	if v := os.Getenv("KDIAG_DS_INTERVAL"); v != "" {
		interval = v
	}
	wait, err := time.ParseDuration(interval)
	if err != nil {
		t.Fatalf("KDIAG_DS_INTERVAL: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var args []string
	for _, a := range c.Args {
		switch {
		case strings.HasPrefix(a, "--listen="):
			a = "--listen=" + addr
		case strings.HasPrefix(a, "--interval="):
			a = "--interval=" + interval
		}
		args = append(args, a)
	}
	bin := os.Getenv("KDIAG_BIN")
	if bin == "" {
		if bin, err = testbin.BuildKdiag(t.TempDir()); err != nil {
			t.Skip(err)
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	for _, e := range c.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	var stderr testio.SyncBuffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}()
	t.Logf("kdiag %s (%s); %s", strings.Join(args, " "), bin, load())

	// scrape returns kdiag_scans_total and kdiag_scan_errors_total, over
	// a connection of its own, closed after, and keeps the sockets the
	// last scan saw (the sum of kdiag_tcp_sockets: the host's, the
	// connections' both ends included).
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var sockets float64
	scrape := func() (scans, errs float64, err error) {
		resp, err := client.Get("http://" + addr + "/metrics")
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return 0, 0, err
		}
		for _, m := range mfs["kdiag_scans_total"].GetMetric() {
			scans = m.GetCounter().GetValue()
		}
		for _, m := range mfs["kdiag_scan_errors_total"].GetMetric() {
			errs = m.GetCounter().GetValue()
		}
		sockets = 0
		for _, m := range mfs["kdiag_tcp_sockets"].GetMetric() {
			sockets += m.GetGauge().GetValue()
		}
		return scans, errs, nil
	}
	// waitScans waits for kdiag_scans_total to reach n, at most 5
	// intervals and a minute.
	waitScans := func(n float64) (float64, error) {
		deadline := time.Now().Add(5*wait + time.Minute)
		for {
			scans, errs, err := scrape()
			if err == nil && errs > 0 {
				return scans, fmt.Errorf("%v scans failed; stderr:\n%s", errs, stderr.String())
			}
			if err == nil && scans >= n {
				return scans, nil
			}
			if time.Now().After(deadline) {
				return scans, fmt.Errorf("%v scans (%v), want %v; stderr:\n%s", scans, err, n, stderr.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	base, err := waitScans(2)
	if err != nil {
		t.Fatalf("before the connections: %v", err)
	}
	before, beforeSockets := memory(t, cmd.Process.Pid), sockets

	conns := make([]net.Conn, 0, idleConns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	for i := range idleConns {
		// A long timeout: past the kernel's accept queue (somaxconn) a
		// connection waits for watch to take one from it, at the pace of
		// a loaded machine.
		c, err := net.DialTimeout("tcp", addr, 2*time.Minute)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: kdiag\r\n\r\n"); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	opened := time.Since(start)
	after, scanErr := waitScans(base + 2)
	under := memory(t, cmd.Process.Pid)
	scanned := fmt.Sprintf("after %v more scans, of %v sockets", after-base, sockets)
	if scanErr != nil {
		scanned = "no scrape answered"
	}
	t.Logf("resident memory: %s before (scans of %v sockets); with %d idle scrape connections (opened in %s), %s: %s; %s",
		before, beforeSockets, idleConns, opened.Round(time.Millisecond), scanned, under, load())
	if scanErr != nil {
		t.Errorf("under the connections: %v", scanErr)
	}
	if peak := under.peak; peak >= limit {
		t.Errorf("watch peaked at %.1f MB resident, above the DaemonSet's limits.memory %s", float64(peak)/1e6, c.Resources.Limits.Memory)
	}
}

// mem is a process's resident memory now and at its peak, in bytes.
type mem struct{ rss, peak int64 }

func (m mem) String() string {
	return fmt.Sprintf("%.1f MB (peak %.1f MB)", float64(m.rss)/1e6, float64(m.peak)/1e6)
}

// memory reads VmRSS and VmHWM of pid.
func memory(t *testing.T, pid int) mem {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var m mem
	for _, line := range strings.Split(string(b), "\n") {
		for _, f := range []struct {
			key string
			v   *int64
		}{{"VmRSS:", &m.rss}, {"VmHWM:", &m.peak}} {
			if v, ok := strings.CutPrefix(line, f.key); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				*f.v = kb << 10
			}
		}
	}
	return m
}

// load is the machine's load, as the benchmarks print it beside a figure.
func load() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "load unknown"
	}
	return fmt.Sprintf("%d cores, load %s", runtime.NumCPU(), strings.Join(f[:3], " "))
}
