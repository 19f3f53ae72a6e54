package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/internal/sockettest"
	"github.com/kdiag/kdiag/internal/testbin"
	"github.com/kdiag/kdiag/internal/testio"
	"github.com/kdiag/kdiag/metrics"
	"github.com/kdiag/kdiag/netstat"
	"github.com/kdiag/kdiag/netstat/events"
	"github.com/kdiag/kdiag/record"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// leaker is the helper process of testdata/leaker: its CLOSE_WAIT sockets
// grow, hold and drain on command.
type leaker struct {
	pid       int
	closeAddr string
	held      *testio.Held
	mu        sync.Mutex
}

var buildOnce struct {
	sync.Once
	path string
	err  error
}

func buildLeaker(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		goBin, err := testbin.GoBinary()
		if err != nil {
			buildOnce.err = err
			return
		}
		dir, err := os.MkdirTemp("", "kdiag-leaker")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.path = filepath.Join(dir, "leaker")
		out, err := exec.Command(goBin, "build", "-o", buildOnce.path, "./testdata/leaker").CombinedOutput()
		if err != nil {
			buildOnce.err = fmt.Errorf("go build leaker: %v\n%s", err, out)
		}
	})
	if buildOnce.err != nil {
		t.Skipf("cannot build the leaker helper: %v", buildOnce.err)
	}
	return buildOnce.path
}

func startLeaker(t *testing.T) *leaker {
	t.Helper()
	l := &leaker{held: testio.StartHeld(t, exec.Command(buildLeaker(t), "-lifetime", "90s"))}
	// "ready pid=N close=127.0.0.1:P keep=127.0.0.1:Q"
	ready := l.held.Line(t, time.Minute)
	for _, f := range strings.Fields(ready) {
		if v, ok := strings.CutPrefix(f, "pid="); ok {
			l.pid, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(f, "close="); ok {
			l.closeAddr = v
		}
	}
	if l.pid == 0 || l.closeAddr == "" {
		t.Fatalf("leaker said %q", ready)
	}
	return l
}

// do sends one command and waits for its "ok" line.
func (l *leaker) do(t *testing.T, cmd string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := fmt.Fprintln(l.held.Stdin, cmd); err != nil {
		t.Fatalf("leaker %s: %v", cmd, err)
	}
	if answer := l.held.Line(t, time.Minute); !strings.HasPrefix(answer, "ok ") {
		t.Fatalf("leaker %s: answered %q", cmd, answer)
	}
}

func countCW(s *netstat.Snapshot, pid int) int {
	n := 0
	for _, sk := range s.Sockets {
		if sk.PID == pid && sk.State == netstat.CloseWait {
			n++
		}
	}
	return n
}

// TestPhasesWithRealScanner drives a real process whose CLOSE_WAIT count
// grows (5 per step), holds, then drains (5 closed per step), samples it
// with the real Scanner, and checks the analyzer's verdict for each phase
// and for "now" at the end of the whole series.
func TestPhasesWithRealScanner(t *testing.T) {
	phases(t, func(*leaker) *WatchOptions { return &WatchOptions{Events: "off"} })
}

// TestPhasesWithEvents runs the same phases with the Scanner that
// `kdiag watch --events on` builds: scans gated by the kernel's TCP
// state-change counter must see every CLOSE_WAIT opened and closed, at the
// next scan, as the dumps do.
func TestPhasesWithEvents(t *testing.T) {
	served := phases(t, func(*leaker) *WatchOptions { return &WatchOptions{Events: "on", Refresh: time.Minute} })
	// Not asserted: other tests' sockets, run alongside, change states
	// at any time and make a scan dump.
	t.Logf("%d scans served the last dump", served)
}

// TestPhasesWithEventsOnPort watches only the sockets to the leaker's
// listener (--port), so that the counter counts only their changes: the
// scans of the hold phase, and only those, serve the last dump, but for
// its first: the grow phase moved the count at every one of its scans, so
// the gate kept no dump to serve (netstat's wokenDrop) until a scan found
// the count still.
func TestPhasesWithEventsOnPort(t *testing.T) {
	served := phases(t, func(l *leaker) *WatchOptions {
		ap := netip.MustParseAddrPort(l.closeAddr)
		return &WatchOptions{Events: "on", Refresh: time.Minute, Query: netstat.Query{RemotePorts: []uint16{ap.Port()}}}
	})
	if served != phaseSteps-1 {
		t.Errorf("%d scans served the last dump, want the hold phase's %d but its first", served, phaseSteps-1)
	}
}

// phaseSteps is how many scans each phase of phases takes.
const phaseSteps = 8

// phases runs the grow, hold and drain phases with the Scanner the options
// mk returns build (their Query adds to the leaker's pid and states), and
// returns how many scans served their last dump (Snapshot.Unchanged).
func phases(t *testing.T, mk func(*leaker) *WatchOptions) (served int) {
	l := startLeaker(t)
	wo := mk(l)
	q := wo.Query
	q.States, q.PIDs = netstat.States(netstat.CloseWait, netstat.Established), []int{l.pid}
	wo.Query = q
	sc, closeEvents, err := wo.scanner("/proc")
	if errors.Is(err, events.ErrUnavailable) {
		t.Skipf("no events here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer closeEvents()
	if (sc.Changes != nil) != (wo.Events == "on") {
		t.Fatalf("--events %s gave a Scanner with Changes %v", wo.Events, sc.Changes != nil)
	}
	var all []netstat.Snapshot
	sample := func(want int) netstat.Snapshot {
		// Pacing, not a timing assertion: the verdicts need a window of
		// at least MinDuration, whatever the machine's speed.
		time.Sleep(80 * time.Millisecond)
		s, err := sc.Scan(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if got := countCW(s, l.pid); got != want {
			t.Fatalf("scan saw %d CLOSE_WAIT of pid %d, want %d", got, l.pid, want)
		}
		if s.Unchanged {
			served++
		}
		all = append(all, *s)
		return *s
	}
	const step, steps = 5, phaseSteps
	var grow, hold, drain []netstat.Snapshot
	for i := 1; i <= steps; i++ {
		l.do(t, fmt.Sprintf("open %d", step))
		grow = append(grow, sample(i*step))
	}
	for range steps {
		hold = append(hold, sample(steps*step))
	}
	for i := steps - 1; i >= 0; i-- {
		l.do(t, fmt.Sprintf("close %d", step))
		drain = append(drain, sample(i*step))
	}

	opts := analyzer.Options{MinDuration: 500 * time.Millisecond}
	for _, ph := range []struct {
		name  string
		snaps []netstat.Snapshot
		want  analyzer.Verdict
	}{{"grow", grow, analyzer.Growing}, {"hold", hold, analyzer.Steady}, {"drain", drain, analyzer.Draining}} {
		a := analyzer.Analyze(ph.snaps, opts)
		p := findProc(t, a, l.pid)
		if p.CloseWait.Verdict != ph.want {
			t.Errorf("%s: verdict %v, want %v (trend %+v)", ph.name, p.CloseWait.Verdict, ph.want, p.CloseWait)
		}
	}
	// The whole series: "now" (the drain phase's length) is draining, and
	// the held sockets were closed, oldest first.
	o := opts
	o.Recent = drain[len(drain)-1].Time.Sub(drain[0].Time)
	a := analyzer.Analyze(all, o)
	p := findProc(t, a, l.pid)
	if p.CloseWaitRecent.Verdict != analyzer.Draining || p.Closed != steps*step || p.CloseWait.Max != steps*step {
		t.Errorf("whole series: recent %v, closed %d, max %d", p.CloseWaitRecent.Verdict, p.Closed, p.CloseWait.Max)
	}
	// During the hold the finding is a leak whose FIN is unread (Recv-Q 1).
	a = analyzer.Analyze(append(append([]netstat.Snapshot{}, grow...), hold...), opts)
	if len(a.Findings) == 0 || a.Findings[0].Kind != analyzer.KindLeak ||
		!strings.Contains(strings.Join(a.Findings[0].Details, "\n"), fmt.Sprintf("%d of %d: Recv-Q 1", steps*step, steps*step)) {
		t.Errorf("grow+hold findings = %+v", a.Findings)
	}
	return served
}

func findProc(t *testing.T, a *analyzer.Analysis, pid int) analyzer.ProcessSeries {
	t.Helper()
	for _, p := range a.Processes {
		if p.Key.PID == pid {
			return p
		}
	}
	t.Fatalf("pid %d not in the analysis", pid)
	return analyzer.ProcessSeries{}
}

// TestWatchEndToEnd runs the watch loop with the real Scanner on the leaker,
// opening 3 CLOSE_WAIT after each scan, with every output on: plain lines,
// the recording, the metrics endpoint (scraped over 127.0.0.1 and parsed with
// the Prometheus text parser), the textfile and the HTML report.
func TestWatchEndToEnd(t *testing.T) {
	l := startLeaker(t)
	dir := t.TempDir()
	ios, _, out, errOut := cmdutil.Test()
	const scans = 8
	var scraped string
	var addr string
	opts := &WatchOptions{
		IO:       ios,
		Scan:     netstat.NewScanner("/proc").Scan,
		Filters:  cmdutil.Filters{States: "close-wait,established", PIDs: []int{l.pid}},
		Interval: 50 * time.Millisecond, Count: scans, Window: time.Hour, StuckAge: time.Minute,
		Events: "off", Refresh: netstat.DefaultRefreshEvery,
		Record: filepath.Join(dir, "rec.jsonl"), Listen: "127.0.0.1:0", Textfile: dir,
		Report:    filepath.Join(dir, "report.html"),
		Listening: func(a string) { addr = a },
	}
	opts.Scanned = func(n int, s *netstat.Snapshot) {
		if got, want := countCW(s, l.pid), 3*(n-1); got != want {
			t.Errorf("scan %d: %d CLOSE_WAIT, want %d", n, got, want)
		}
		if n == scans-1 {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Errorf("scrape: %v", err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			scraped = string(b)
		}
		l.do(t, "open 3")
	}
	if err := opts.complete(); err != nil {
		t.Fatal(err)
	}
	if err := runWatch(opts); err != nil {
		t.Fatalf("runWatch: %v\n%s", err, errOut)
	}

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if n := strings.Count(out.String(), " sockets="); n != scans {
		t.Errorf("%d plain lines, want %d:\n%s", n, scans, out)
	}
	if !strings.Contains(lines[scans-1], fmt.Sprintf("leaker[%d] close_wait=%d", l.pid, 3*(scans-1))) {
		t.Errorf("last plain line = %q", lines[scans-1])
	}
	if !strings.Contains(out.String(), fmt.Sprintf("%d samples over", scans)) {
		t.Errorf("no findings header in:\n%s", out)
	}

	// The metrics scraped after scan 7 (18 CLOSE_WAIT to the closing listener).
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(scraped))
	if err != nil {
		t.Fatalf("parse scrape: %v\n%s", err, scraped)
	}
	checkSockets(t, "scrape", mfs, l, 3*(scans-2))

	// The textfile holds the last scan (21).
	f, err := os.Open(filepath.Join(dir, metrics.TextfileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mfs, err = p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("parse textfile: %v", err)
	}
	checkSockets(t, "textfile", mfs, l, 3*(scans-1))

	snaps, notes, err := record.ReadFile(opts.Record)
	if err != nil || len(snaps) != scans || len(notes) != 0 {
		t.Errorf("recording: %d snapshots, notes %v, err %v", len(snaps), notes, err)
	}
	html, err := os.ReadFile(opts.Report)
	if err != nil || !bytes.Contains(html, []byte("<polyline class=\"cw\"")) {
		t.Errorf("report: %v, chart present %v", err, bytes.Contains(html, []byte("<polyline")))
	}
}

func checkSockets(t *testing.T, what string, mfs map[string]*dto.MetricFamily, l *leaker, want int) {
	t.Helper()
	mf := mfs["kdiag_tcp_sockets"]
	if mf == nil {
		t.Fatalf("%s: no kdiag_tcp_sockets", what)
	}
	for _, m := range mf.Metric {
		lab := map[string]string{}
		for _, lp := range m.Label {
			lab[lp.GetName()] = lp.GetValue()
		}
		if lab["pid"] == strconv.Itoa(l.pid) && lab["state"] == "CLOSE_WAIT" && lab["remote"] == l.closeAddr {
			if got := int(m.GetGauge().GetValue()); got != want {
				t.Errorf("%s: kdiag_tcp_sockets{pid=%d,state=CLOSE_WAIT,remote=%s} = %d, want %d", what, l.pid, l.closeAddr, got, want)
			}
			if lab["process"] != "leaker" {
				t.Errorf("%s: process label %q", what, lab["process"])
			}
			return
		}
	}
	t.Errorf("%s: no CLOSE_WAIT series for pid %d toward %s", what, l.pid, l.closeAddr)
}

func TestFlags(t *testing.T) {
	f := &cmdutil.Factory{ProcRoot: "/proc"}
	f.IO, _, _, _ = cmdutil.Test()
	var got *WatchOptions
	cmd := NewCmdWatch(f, func(o *WatchOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--state", "close-wait", "--interval", "2s", "--duration", "1m", "--listen", "127.0.0.1:9813", "--quiet", "--events", "off", "--refresh", "30s"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Interval != 2*time.Second || got.Duration != time.Minute || !got.Quiet || got.Listen != "127.0.0.1:9813" ||
		got.Query.States != netstat.States(netstat.CloseWait) || got.Scan == nil ||
		got.Events != "off" || got.Refresh != 30*time.Second {
		t.Errorf("options = %+v", got)
	}
	for _, bad := range [][]string{{"--interval", "1ms"}, {"--listen", "9813"}, {"--state", "nope"}, {"--textfile", "/nonexistent"}, {"--events", "maybe"}, {"--refresh", "0s"}, {"--events", "on"}, {"--events", "on", "--state", "close-wait,time-wait"}} {
		cmd := NewCmdWatch(f, func(*WatchOptions) error { return nil })
		cmd.SetArgs(bad)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		if err := cmd.Execute(); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
			t.Errorf("%v: err %v, want a usage error", bad, err)
		}
	}
}

func TestLiveTableOnTTY(t *testing.T) {
	ios, _, out, _ := cmdutil.Test()
	ios.SetStdoutTTY(true)
	v := &liveView{io: ios, interval: time.Second}
	s := &netstat.Snapshot{Time: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Processes: []netstat.Process{{PID: 5, Name: "app"}},
		Sockets: []netstat.Socket{{State: netstat.CloseWait, PID: 5, Inode: 1}}}
	tr := analyzer.NewTracker(analyzer.Options{})
	tr.Add(s)
	v.draw(s, tr.Analysis(), time.Millisecond)
	first := out.String()
	v.draw(s, tr.Analysis(), time.Millisecond)
	second := strings.TrimPrefix(out.String(), first)
	if strings.Contains(first, "\x1b[") || !strings.HasPrefix(second, fmt.Sprintf("\x1b[%dA\x1b[J", v.lines)) {
		t.Errorf("redraw does not move up over the last table: %q", second)
	}
}

// TestKill9LeavesWholeLines runs the real kdiag binary with --record at a
// fast interval, kills it with SIGKILL while it writes, and replays the
// file: every line but possibly the last is a whole snapshot, and the
// reader reports a cut last line as a note instead of failing.
func TestKill9LeavesWholeLines(t *testing.T) {
	goBin, err := testbin.GoBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "kdiag")
	if out, err := exec.Command(goBin, "build", "-o", bin, "../../../cmd/kdiag").CombinedOutput(); err != nil {
		t.Skipf("cannot build kdiag: %v\n%s", err, out)
	}
	l := startLeaker(t)
	l.do(t, "open 50")
	l.do(t, "est 50")
	rec := filepath.Join(dir, "rec.jsonl")
	cmd := exec.Command(bin, "watch", "--pid", strconv.Itoa(l.pid), "--interval", "10ms", "--duration", "60s", "--quiet", "--record", rec)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(rec); bytes.Count(b, []byte("\n")) >= 10 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	snaps, notes, err := record.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) < 10 {
		t.Errorf("%d snapshots recorded before the kill, want at least 10", len(snaps))
	}
	for _, n := range notes {
		if !strings.Contains(n.Text, "cut short") {
			t.Errorf("a line other than a cut last one: %v", n)
		}
	}
}

// TestOpenEventsModes checks the cases of --events that need no kernel:
// off never opens a counter, and auto does not over a /proc fixture tree,
// whose sockets no tracepoint sees, nor for a query of all states, which
// includes TIME_WAIT.
func TestOpenEventsModes(t *testing.T) {
	cw := netstat.Query{States: netstat.States(netstat.CloseWait)}
	for _, tc := range []struct {
		mode, root string
		q          netstat.Query
	}{{"off", "/proc", cw}, {"auto", "testdata/proc", cw}, {"off", "testdata/proc", cw}, {"auto", "/proc", netstat.Query{}}} {
		c, err := openEvents(tc.mode, tc.root, tc.q, 0)
		if c != nil || err != nil {
			t.Errorf("openEvents(%q, %q) = %v, %v; want no counter and no error", tc.mode, tc.root, c, err)
		}
	}
	// on over a fixture tree still tries: the user asked for it.
	if c, err := openEvents("on", "testdata/proc", netstat.Query{States: cw.States, RemotePorts: []uint16{9092}}, 0); c != nil {
		c.Close()
	} else if !errors.Is(err, events.ErrUnavailable) {
		t.Errorf("openEvents(on) failed with %v, want an error wrapping ErrUnavailable", err)
	}
}

// TestPlainLineSaysServed checks that a scan that served the last dump
// again says so instead of a duration.
func TestPlainLineSaysServed(t *testing.T) {
	s := &netstat.Snapshot{Time: time.Now(), Sockets: []netstat.Socket{{State: netstat.CloseWait}}}
	if l := plainLine(s, &analyzer.Analysis{}, 12*time.Millisecond); !strings.Contains(l, " close_wait=1 ") || !strings.HasSuffix(l, " scan=12ms") {
		t.Errorf("dump: %q", l)
	}
	s.Unchanged = true
	if l := plainLine(s, &analyzer.Analysis{}, 20*time.Microsecond); !strings.HasSuffix(l, " scan=served") {
		t.Errorf("served: %q", l)
	}
}

// threeScans is a quiet watch of three scans a second apart, each a
// snapshot that fill completes (n: the scan, from 1).
func threeScans(ios *cmdutil.IOStreams, fill func(s *netstat.Snapshot, n int)) *WatchOptions {
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	n := 0
	return &WatchOptions{IO: ios, Interval: 10 * time.Millisecond, Count: 3, Quiet: true,
		Scan: func(context.Context, netstat.Query) (*netstat.Snapshot, error) {
			n++
			s := &netstat.Snapshot{Time: start.Add(time.Duration(n) * time.Second), Source: "netlink"}
			fill(s, n)
			return s, nil
		}}
}

// TestUnseenIsUnknown: a watch whose scans could not attribute CLOSE_WAIT
// sockets says so before its findings and exits 3 (UNKNOWN), and its notes
// go to stderr, not among the findings on stdout.
func TestUnseenIsUnknown(t *testing.T) {
	ios, _, out, errOut := cmdutil.Test()
	o := threeScans(ios, func(s *netstat.Snapshot, _ int) {
		s.Sockets = []netstat.Socket{{State: netstat.CloseWait, Inode: 9, FD: -1}}
		s.Notes = []string{"1 socket unattributed: the fds of pid 1 (init) could not be read (permission denied)"}
		s.Unseen = &netstat.Unseen{Sockets: map[string]int{"CLOSE_WAIT": 1}, Reason: "the fds of pid 1 (init) could not be read (permission denied)"}
	})
	err := runWatch(o)
	if code := cmdutil.ExitCode(err); code != cmdutil.ExitUnknown {
		t.Errorf("exit %d, want %d", code, cmdutil.ExitUnknown)
	}
	want := "UNKNOWN: in 3 of 3 samples up to 1 CLOSE_WAIT socket could not be attributed (the fds of pid 1 (init) could not be read (permission denied))"
	if !strings.Contains(out.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, out)
	}
	if strings.Contains(out.String(), "note:") {
		t.Errorf("notes on stdout:\n%s", out)
	}
	if !strings.Contains(errOut.String(), "kdiag watch: note: 1 socket unattributed") {
		t.Errorf("stderr lacks the note:\n%s", errOut)
	}
}

// TestUnseenThatDidNotLast: a scan that could not attribute CLOSE_WAIT
// sockets (closed while it ran, on a churning host) before a last scan
// that attributed every one is a note, not UNKNOWN: the watch exits 0
// and says the last sample saw them all.
func TestUnseenThatDidNotLast(t *testing.T) {
	ios, _, out, _ := cmdutil.Test()
	o := threeScans(ios, func(s *netstat.Snapshot, n int) {
		s.Sockets = []netstat.Socket{{State: netstat.CloseWait, Inode: 9, PID: 40, FD: 7}}
		s.Processes = []netstat.Process{{PID: 40, Name: "app", StartTime: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}}
		if n == 1 {
			s.Sockets = append(s.Sockets, netstat.Socket{State: netstat.CloseWait, Inode: 10, FD: -1})
			s.Unseen = &netstat.Unseen{Sockets: map[string]int{"CLOSE_WAIT": 1}, Reason: "held by no process kdiag can read, or opened or closed while the scan ran"}
		}
	})
	if err := runWatch(o); err != nil {
		t.Errorf("exit %d (%v), want 0", cmdutil.ExitCode(err), err)
	}
	want := "in 1 of 3 samples up to 1 CLOSE_WAIT socket could not be attributed (held by no process kdiag can read, or opened or closed while the scan ran); the last sample attributed every one"
	if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "UNKNOWN") {
		t.Errorf("stdout lacks %q or says UNKNOWN:\n%s", want, out)
	}
}

// TestOutputsAreNotExposed: a report and a recording hold command lines, so
// they are created 0600 (through the umask); a listener beyond loopback is
// warned of; and the temporary file a killed watch left in --textfile's
// directory is removed at start.
func TestOutputsAreNotExposed(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	// What a kdiag killed between create and rename left: a pid that is gone.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip(err)
	}
	leftover := filepath.Join(dir, fmt.Sprintf(".kdiag.prom.%d.1.tmp", dead.Process.Pid))
	if err := os.WriteFile(leftover, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ios, _, _, errOut := cmdutil.Test()
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	n := 0
	o := &WatchOptions{IO: ios, Interval: 10 * time.Millisecond, Count: 2, Quiet: true,
		Record: filepath.Join(dir, "rec.jsonl"), Report: filepath.Join(dir, "r.md"), Textfile: dir,
		// All interfaces, bound for the two scans of this test only.
		Listen: "0.0.0.0:0",
		Scan: func(context.Context, netstat.Query) (*netstat.Snapshot, error) {
			n++
			return &netstat.Snapshot{Time: start.Add(time.Duration(n) * time.Second), Source: "netlink"}, nil
		}}
	if err := runWatch(o); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{o.Record, o.Report} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %o, want 600", filepath.Base(p), st.Mode().Perm())
		}
	}
	if st, err := os.Stat(filepath.Join(dir, metrics.TextfileName)); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("textfile: %v, want mode 644 (node_exporter reads it)", err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the killed watch's temporary file is still there (%v)", err)
	}
	if !strings.Contains(errOut.String(), "warning: --listen 0.0.0.0:0 serves pids, process names and remote endpoints, without authentication") {
		t.Errorf("no warning for a listener beyond loopback:\n%s", errOut)
	}
}

// TestHeldClosedMetrics watches a child while keepalive resets its 5
// CLOSE_WAIT sockets out of the kernel's tables: the metrics count them as
// kdiag_tcp_sockets{state="CLOSE"} toward the broker they had (watch saw
// them in CLOSE_WAIT first), and the findings say they are held.
func TestHeldClosedMetrics(t *testing.T) {
	c := sockettest.StartChild(t, sockettest.Spec{CloseWait: 5, KeepAlive: time.Second, DeferKeepAlive: true, FinTimeout: 2 * time.Second, NetNS: true})
	dir := t.TempDir()
	ios, _, out, _ := cmdutil.Test()
	sc := netstat.NewScanner("/proc")
	o := &WatchOptions{IO: ios, Interval: 100 * time.Millisecond, Quiet: true, Textfile: dir,
		Filters: cmdutil.Filters{States: "close-wait,close", PIDs: []int{c.PID}}, Events: "off", Refresh: netstat.DefaultRefreshEvery}
	if err := o.complete(); err != nil {
		t.Fatal(err)
	}
	// Scan until the 5 are held CLOSE (bounded), then stop.
	deadline := time.Now().Add(60 * time.Second)
	o.Scan = sc.Scan
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Context = ctx
	firstCW := 0
	o.Scanned = func(n int, s *netstat.Snapshot) {
		held := 0
		for _, x := range s.Sockets {
			switch {
			case x.State == netstat.Close:
				held++
			case n == 1 && x.State == netstat.CloseWait:
				firstCW++
			}
		}
		if n == 1 {
			// Seen in CLOSE_WAIT: now let keepalive take them out of the
			// kernel's tables.
			if err := c.StartKeepAlive(); err != nil {
				t.Error(err)
				cancel()
			}
		}
		if held == 5 || time.Now().After(deadline) {
			cancel()
		}
	}
	if err := runWatch(o); err != nil {
		t.Fatal(err)
	}
	if firstCW != 5 {
		t.Fatalf("the first scan saw %d of the 5 in CLOSE_WAIT, where keepalive off keeps them", firstCW)
	}
	f, err := os.Open(filepath.Join(dir, metrics.TextfileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(f)
	if err != nil {
		t.Fatal(err)
	}
	remote := c.CloseWait[0].Remote.String()
	got := map[string]float64{}
	for _, m := range mfs["kdiag_tcp_sockets"].GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["pid"] == strconv.Itoa(c.PID) {
			got[l["state"]+" "+l["remote"]] += m.GetGauge().GetValue()
		}
	}
	if want := map[string]float64{"CLOSE " + remote: 5}; !cmp.Equal(want, got) {
		t.Errorf("kdiag_tcp_sockets of the child: %v, want %v", got, want)
	}
	if !strings.Contains(out.String(), "5 TCP sockets held open by") {
		t.Errorf("findings lack the held sockets:\n%s", out)
	}
}

// TestEventsGiveExactAges watches with --events while CLOSE_WAIT sockets
// are made whose keepalive (every second) resets tcp_info's last-ACK time:
// tcp_info then only bounds their age, but the kernel's record of the FIN
// gives it exactly, and never younger than it is.
func TestEventsGiveExactAges(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	o := &WatchOptions{IO: ios, Interval: 100 * time.Millisecond, Quiet: true, Events: "on", Refresh: time.Second,
		Filters: cmdutil.Filters{States: "close-wait", PIDs: []int{os.Getpid()}}}
	if err := o.complete(); err != nil {
		t.Fatal(err)
	}
	sc, closeEvents, err := o.scanner("/proc")
	if errors.Is(err, events.ErrUnavailable) {
		t.Skipf("events: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer closeEvents()
	o.Scan = sc.Scan
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Context = ctx
	var (
		before, after time.Time
		port          uint16
		checked       int
	)
	deadline := time.Now().Add(60 * time.Second)
	o.Scanned = func(n int, s *netstat.Snapshot) {
		if n == 1 {
			before = time.Now()
			cw := sockettest.CloseWait(t, "tcp4", 3, sockettest.KeepAlive(time.Second))
			after = time.Now()
			port = cw[0].Remote.Port()
			return
		}
		const tick = 20 * time.Millisecond
		for _, x := range s.Sockets {
			if x.Remote.Port() != port {
				continue
			}
			lo, hi := s.Time.Sub(after), s.Time.Sub(before)
			if !x.AgeExact() || x.Age < lo-tick || x.Age > hi+tick {
				t.Errorf("scan %d, %s: age %v (exact %v), want exactly between %v and %v", n, x.Local, x.Age, x.AgeExact(), lo, hi)
			}
			if s.Time.Sub(after) > 3*time.Second {
				checked++ // past several answered probes: tcp_info alone would only bound it
			}
		}
		if checked >= 3 || time.Now().After(deadline) {
			cancel()
		}
	}
	if err := runWatch(o); err != nil {
		t.Fatal(err)
	}
	if checked < 3 {
		t.Errorf("checked %d sockets past 3 s of probes, want 3", checked)
	}
}

// TestWatchMissingPID: a --pid that names no process at the first scan is
// UNKNOWN (exit 3), said once, with no findings; one whose process exits
// during the watch is said once, and the watch goes on to its end.
func TestWatchMissingPID(t *testing.T) {
	run := func(t *testing.T, args []string, scanned func(int)) (string, string, error) {
		t.Helper()
		f := &cmdutil.Factory{ProcRoot: "/proc", Now: time.Now}
		ios, _, out, errOut := cmdutil.Test()
		f.IO = ios
		cmd := NewCmdWatch(f, func(o *WatchOptions) error {
			o.Scanned = func(n int, _ *netstat.Snapshot) { scanned(n) }
			return runWatch(o)
		})
		cmd.SetArgs(append(args, "--events", "off", "--interval", "20ms", "--state", "close-wait"))
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.Execute()
		return out.String(), errOut.String(), err
	}
	t.Run("not there", func(t *testing.T) {
		out, errOut, err := run(t, []string{"--pid", strconv.Itoa(1 << 30), "--count", "3"}, func(int) {})
		if code := cmdutil.ExitCode(err); code != cmdutil.ExitUnknown {
			t.Errorf("exit %d (%v), want %d", code, err, cmdutil.ExitUnknown)
		}
		said := out + errOut
		if err != nil {
			said += err.Error()
		}
		if n := strings.Count(said, "--pid 1073741824 names no process (no /proc/1073741824)"); n != 1 || strings.Contains(out, "finding") {
			t.Errorf("said %d times (want once), or with findings:\nstdout %s\nstderr %s\nerror %v", n, out, errOut, err)
		}
	})
	t.Run("exits during the watch", func(t *testing.T) {
		c := sockettest.StartChild(t, sockettest.Spec{CloseWait: 1})
		const scans = 6
		out, errOut, err := run(t, []string{"--pid", strconv.Itoa(c.PID), "--count", strconv.Itoa(scans)}, func(n int) {
			if n == 2 {
				c.Stop() // reaped: its pid names no process from now on
			}
		})
		if err != nil {
			t.Errorf("exit %d (%v), want 0", cmdutil.ExitCode(err), err)
		}
		want := fmt.Sprintf("kdiag watch: --pid %d: the process exited during the watch, which goes on\n", c.PID)
		if n := strings.Count(errOut, "exited during the watch"); n != 1 || !strings.Contains(errOut, want) {
			t.Errorf("stderr says it %d times, want once as %q:\n%s", n, want, errOut)
		}
		if n := strings.Count(out, "close_wait="); n < scans {
			t.Errorf("%d scan lines, want %d (the watch goes on):\n%s", n, scans, out)
		}
	})
}

// TestDetailsOnlyVerbose: what a busy host makes of every scan (sockets
// closed while it ran) is not said by default, and with -v each is said
// once per run however many scans make it; a note is said once, at the end.
func TestDetailsOnlyVerbose(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		ios, _, _, errOut := cmdutil.Test()
		o := threeScans(ios, func(s *netstat.Snapshot, n int) {
			s.Notes = []string{"the network namespace of pid 1 (init) could not be read even as root"}
			s.Details = []string{"2 sockets closed while the scan ran: left out"}
			if n == 3 {
				s.Details = append(s.Details, "1 socket closed while the scan ran: left out")
			}
		})
		o.Verbose = verbose
		if err := runWatch(o); err != nil {
			t.Fatal(err)
		}
		got := errOut.String()
		want := 0
		if verbose {
			want = 1
		}
		for _, d := range []string{"kdiag watch: note: 2 sockets closed while the scan ran: left out\n", "kdiag watch: note: 1 socket closed while the scan ran: left out\n"} {
			if n := strings.Count(got, d); n != want {
				t.Errorf("-v %v: %q said %d times, want %d:\n%s", verbose, d, n, want, got)
			}
		}
		if n := strings.Count(got, "namespace of pid 1"); n != 1 {
			t.Errorf("-v %v: the note said %d times, want once:\n%s", verbose, n, got)
		}
	}
}
