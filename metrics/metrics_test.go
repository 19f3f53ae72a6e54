package metrics

// The snapshots here are synthetic (built in the test); the watch command's
// tests scrape metrics of real sockets.

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/netstat"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// series builds n snapshots, 1s apart: pid 42 ("java") gains one CLOSE_WAIT
// toward 10.0.0.1:9092 per second and holds 2 ESTABLISHED; one unattributed
// TIME_WAIT socket is there throughout.
func series(n int) []netstat.Snapshot {
	var out []netstat.Snapshot
	for i := range n {
		s := netstat.Snapshot{Time: t0.Add(time.Duration(i) * time.Second), Source: "netlink",
			Processes: []netstat.Process{{PID: 42, Name: "java", StartTime: t0.Add(-time.Hour)}}}
		for j := range i {
			s.Sockets = append(s.Sockets, netstat.Socket{State: netstat.CloseWait, PID: 42, Inode: uint64(100 + j),
				Local: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.9"), uint16(40000+j)), Remote: netip.MustParseAddrPort("10.0.0.1:9092"), RecvQ: 1})
		}
		for j := range 2 {
			s.Sockets = append(s.Sockets, netstat.Socket{State: netstat.Established, PID: 42, Inode: uint64(900 + j),
				Remote: netip.MustParseAddrPort("10.0.0.2:9092")})
		}
		s.Sockets = append(s.Sockets, netstat.Socket{State: netstat.TimeWait, Remote: netip.MustParseAddrPort("10.0.0.3:9092")})
		out = append(out, s)
	}
	return out
}

func fed(n int) *Collector {
	c := New()
	snaps := series(n)
	tr := analyzer.NewTracker(analyzer.Options{})
	for i := range snaps {
		tr.Add(&snaps[i])
		c.Update(&snaps[i], tr.Analysis(), 3*time.Millisecond)
	}
	c.ScanFailed(time.Millisecond)
	return c
}

func parse(t *testing.T, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return mfs
}

// gather reads back what c writes, with Prometheus's parser.
func gather(t *testing.T, c *Collector) map[string]*dto.MetricFamily {
	t.Helper()
	var b strings.Builder
	c.WritePrometheus(&b)
	return parse(t, strings.NewReader(b.String()))
}

// flat writes each sample as name{labels} value, sorted, for diffs.
func flat(mfs map[string]*dto.MetricFamily, names ...string) []string {
	var out []string
	for _, name := range names {
		mf := mfs[name]
		if mf == nil {
			out = append(out, name+" MISSING")
			continue
		}
		for _, m := range mf.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			var v float64
			switch {
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Counter != nil:
				v = m.Counter.GetValue()
			}
			out = append(out, fmt.Sprintf("%s{%s} %.6g", name, strings.Join(ls, ","), v))
		}
	}
	sort.Strings(out)
	return out
}

var wantKdiag = []string{
	"kdiag_close_wait_growing{pid=0,process=} 0",
	"kdiag_close_wait_growing{pid=42,process=java} 1",
	"kdiag_close_wait_growth_per_minute{pid=0,process=} 0",
	"kdiag_close_wait_growth_per_minute{pid=42,process=java} 60",
	"kdiag_close_wait_oldest_age_seconds{pid=42,process=java} 58",
	"kdiag_scan_duration_seconds{} 0.001",
	"kdiag_scan_errors_total{} 1",
	"kdiag_scans_total{} 61",
	"kdiag_tcp_sockets{pid=0,process=,remote=10.0.0.3:9092,state=TIME_WAIT} 1",
	"kdiag_tcp_sockets{pid=42,process=java,remote=10.0.0.1:9092,state=CLOSE_WAIT} 59",
	"kdiag_tcp_sockets{pid=42,process=java,remote=10.0.0.2:9092,state=ESTABLISHED} 2",
}

var kdiagNames = []string{"kdiag_close_wait_growing", "kdiag_close_wait_growth_per_minute", "kdiag_close_wait_oldest_age_seconds",
	"kdiag_scan_duration_seconds", "kdiag_scan_errors_total", "kdiag_scans_total", "kdiag_tcp_sockets"}

func TestScrapeOverLoopback(t *testing.T) {
	c := fed(60)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: Handler(c), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	mfs := parse(t, resp.Body)
	if diff := cmp.Diff(wantKdiag, flat(mfs, kdiagNames...)); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	if mfs["kdiag_last_scan_timestamp_seconds"].GetMetric()[0].GetGauge().GetValue() != float64(t0.Add(59*time.Second).Unix()) {
		t.Errorf("last scan timestamp = %v", mfs["kdiag_last_scan_timestamp_seconds"])
	}
	// kdiag's own runtime metrics come with the endpoint.
	if mfs["go_goroutines"] == nil || mfs["process_cpu_seconds_total"] == nil {
		t.Errorf("go_/process_ metrics missing")
	}
	if got := mfs["kdiag_tcp_sockets"].GetType(); got != dto.MetricType_GAUGE {
		t.Errorf("kdiag_tcp_sockets type = %v", got)
	}
}

func TestTextfile(t *testing.T) {
	dir := t.TempDir()
	if err := WriteTextfile(dir, fed(60)); err != nil {
		t.Fatal(err)
	}
	// Write again: the rename replaces the file and leaves no temp behind.
	if err := WriteTextfile(dir, fed(60)); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != TextfileName {
		t.Fatalf("dir holds %v, want only %s", entries, TextfileName)
	}
	f, err := os.Open(filepath.Join(dir, TextfileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mfs := parse(t, f)
	if diff := cmp.Diff(wantKdiag, flat(mfs, kdiagNames...)); diff != "" {
		t.Errorf("textfile (-want +got):\n%s", diff)
	}
	if mfs["go_goroutines"] != nil {
		t.Errorf("textfile carries go_ metrics: node_exporter would reject duplicates")
	}
}

func TestAggregateCapsRemotes(t *testing.T) {
	s := &netstat.Snapshot{Processes: []netstat.Process{{PID: 7, Name: "srv"}}}
	for i := range 30 {
		// Remote i gets i+1 sockets: the busiest keep their series.
		for range i + 1 {
			s.Sockets = append(s.Sockets, netstat.Socket{State: netstat.Established, PID: 7,
				Remote: netip.AddrPortFrom(netip.MustParseAddr("10.9.0.1"), uint16(1000+i))})
		}
	}
	got := aggregate(s, 3)
	var lines []string
	for _, g := range got {
		lines = append(lines, fmt.Sprintf("%s %d", g.remote, g.n))
	}
	want := []string{"10.9.0.1:1029 30", "10.9.0.1:1028 29", "10.9.0.1:1027 28", fmt.Sprintf("other %d", 465-30-29-28)}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("aggregate (-want +got):\n%s", diff)
	}
}

// TestServedScansCounted checks kdiag_scans_served_total: the scans whose
// snapshot served the last dump again (Unchanged), out of kdiag_scans_total.
func TestServedScansCounted(t *testing.T) {
	c := New()
	snaps := series(5)
	for i := range snaps {
		snaps[i].Unchanged = i%2 == 1 // scans 2 and 4
		c.Update(&snaps[i], nil, time.Millisecond)
	}
	got := map[string]float64{}
	for _, mf := range gather(t, c) {
		if m := mf.GetMetric(); len(m) == 1 && m[0].Counter != nil {
			got[mf.GetName()] = m[0].Counter.GetValue()
		}
	}
	if got["kdiag_scans_total"] != 5 || got["kdiag_scans_served_total"] != 2 {
		t.Errorf("scans %v, served %v; want 5 and 2", got["kdiag_scans_total"], got["kdiag_scans_served_total"])
	}
}

// TestServedSnapshotNotAggregatedAgain checks that a scrape after a scan
// that served the last dump again (Unchanged, same Dump) reports the
// sockets aggregated from that dump, and that a new dump is aggregated.
// The served snapshot here lacks a socket its dump has, which a real one
// never does: the series show which of the two was aggregated.
func TestServedSnapshotNotAggregatedAgain(t *testing.T) {
	snaps := series(4)
	dump, served, next := snaps[2], snaps[1], snaps[3]
	dump.Dump = 7
	served.Time, served.Unchanged, served.Dump = snaps[3].Time, true, 7
	next.Dump = 8
	c := New()
	cw := func() float64 {
		t.Helper()
		for _, mf := range gather(t, c) {
			if mf.GetName() != "kdiag_tcp_sockets" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "state" && l.GetValue() == "CLOSE_WAIT" {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
		return 0
	}
	c.Update(&dump, nil, time.Millisecond)
	if got := cw(); got != 2 {
		t.Fatalf("after the dump: %v CLOSE_WAIT, want 2", got)
	}
	c.Update(&served, nil, time.Millisecond)
	if got := cw(); got != 2 {
		t.Errorf("after serving dump 7 again: %v CLOSE_WAIT, want dump 7's 2", got)
	}
	c.Update(&next, nil, time.Millisecond)
	if got := cw(); got != 3 {
		t.Errorf("after dump 8: %v CLOSE_WAIT, want 3", got)
	}
}

// TestReleaseBeforeReuse: a snapshot the collector has released is
// aggregated already, so overwriting its sockets (the scanner decodes the
// next dump into them) changes nothing a scrape says; a snapshot released
// twice, or one the collector does not hold, is left alone.
func TestReleaseBeforeReuse(t *testing.T) {
	snaps := series(60)
	c := New()
	tr := analyzer.NewTracker(analyzer.Options{})
	for i := range snaps {
		tr.Add(&snaps[i])
		c.Update(&snaps[i], tr.Analysis(), time.Millisecond)
		c.Release(&snaps[i])
		c.Release(&snaps[i])
		for j := range snaps[i].Sockets { // reused by the next dump
			snaps[i].Sockets[j] = netstat.Socket{State: netstat.Listen}
		}
	}
	c.ScanFailed(time.Millisecond)
	c.Release(&snaps[0])
	if d := cmp.Diff(wantKdiag, flat(gather(t, c), kdiagNames...)); d != "" {
		t.Errorf("scrape after release and reuse (-want +got):\n%s", d)
	}
}

// TestLabelValuesEscaped checks that a process name with the text format's
// special characters and bytes that are not UTF-8 (a process sets its own
// comm and argv) is read back by Prometheus's parser as written, the
// invalid bytes as U+FFFD, and that the other series stay intact.
func TestLabelValuesEscaped(t *testing.T) {
	name := "we\"ird\\na\nme\xff"
	s := &netstat.Snapshot{Time: t0, Processes: []netstat.Process{{PID: 7, Name: name}}, Sockets: []netstat.Socket{
		{State: netstat.CloseWait, PID: 7, Remote: netip.MustParseAddrPort("10.0.0.1:9092")},
		{State: netstat.Established, PID: 0, Remote: netip.MustParseAddrPort("[fe80::1]:9093")},
	}}
	c := New()
	c.Update(s, nil, time.Millisecond)
	got := flat(gather(t, c), "kdiag_tcp_sockets")
	want := []string{
		"kdiag_tcp_sockets{pid=0,process=,remote=[fe80::1]:9093,state=ESTABLISHED} 1",
		"kdiag_tcp_sockets{pid=7,process=we\"ird\\na\nme\uFFFD,remote=10.0.0.1:9092,state=CLOSE_WAIT} 1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
}

func TestHandlerMethods(t *testing.T) {
	c := fed(3)
	for _, tc := range []struct {
		method string
		code   int
		body   bool
	}{{"GET", 200, true}, {"HEAD", 200, false}, {"POST", 405, false}} {
		rec := httptest.NewRecorder()
		Handler(c).ServeHTTP(rec, httptest.NewRequest(tc.method, "/metrics", nil))
		if rec.Code != tc.code {
			t.Errorf("%s: status %d, want %d", tc.method, rec.Code, tc.code)
		}
		if got := strings.Contains(rec.Body.String(), "kdiag_scans_total 4"); got != tc.body {
			t.Errorf("%s: body has kdiag_scans_total 4: %v, want %v\n%s", tc.method, got, tc.body, rec.Body.String())
		}
		if tc.code == 200 && rec.Header().Get("Content-Type") != ContentType {
			t.Errorf("%s: Content-Type %q", tc.method, rec.Header().Get("Content-Type"))
		}
	}
}

// TestEmptyFamiliesLeftOut checks that a family without samples (no scan
// yet: no sockets, no processes) writes no HELP or TYPE line either, as
// client_golang did, while the counters are there at 0.
func TestEmptyFamiliesLeftOut(t *testing.T) {
	var b strings.Builder
	New().WritePrometheus(&b)
	out := b.String()
	for _, f := range []string{"kdiag_tcp_sockets", "kdiag_close_wait_oldest_age_seconds", "kdiag_close_wait_growing", "kdiag_last_scan_timestamp_seconds"} {
		if strings.Contains(out, f) {
			t.Errorf("output names %s, which has no sample:\n%s", f, out)
		}
	}
	mf := parse(t, strings.NewReader(out))["kdiag_scans_total"]
	if len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetCounter().GetValue() != 0 {
		t.Errorf("kdiag_scans_total missing or not 0:\n%s", out)
	}
}

// TestUnseenSockets: the sockets a scan could not attribute are a series of
// their own, by state, and go when a later scan sees everything.
func TestUnseenSockets(t *testing.T) {
	c := New()
	snaps := series(2)
	snaps[0].Unseen = &netstat.Unseen{Sockets: map[string]int{"CLOSE_WAIT": 30, "ESTABLISHED": 2}, Reason: "permission denied"}
	c.Update(&snaps[0], nil, time.Millisecond)
	got := flat(gather(t, c), "kdiag_unseen_sockets")
	want := []string{"kdiag_unseen_sockets{state=CLOSE_WAIT} 30", "kdiag_unseen_sockets{state=ESTABLISHED} 2"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	c.Update(&snaps[1], nil, time.Millisecond)
	if mf := gather(t, c)["kdiag_unseen_sockets"]; mf != nil {
		t.Errorf("after a scan that saw everything: %v, want no series", mf)
	}
}

// TestPromtoolChecksEndpoint runs promtool check metrics, Prometheus's own
// linter, on what /metrics serves: every family, kdiag's own go_ and
// process_ ones included, has its HELP and TYPE and a conventional name.
func TestPromtoolChecksEndpoint(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Skip("promtool not installed (Debian package prometheus; .ci/run installs it)")
	}
	c := fed(60)
	snap := series(1)[0]
	snap.Unseen = &netstat.Unseen{Sockets: map[string]int{"CLOSE_WAIT": 3}, Reason: "permission denied"}
	c.Update(&snap, nil, time.Millisecond)
	rec := httptest.NewRecorder()
	Handler(c).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = bytes.NewReader(rec.Body.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "process_resident_memory_bytes", "kdiag_unseen_sockets"} {
		if !strings.Contains(rec.Body.String(), "# HELP "+name+" ") {
			t.Errorf("no HELP for %s", name)
		}
	}
}

// BenchmarkAggregate is a scrape's (or, since the scanner reuses the
// sockets, every --listen scan's) aggregation at case D's shape: 20,000
// CLOSE_WAIT toward 3 brokers, and 20,000 connections whose two ends are
// both on the host, the servers' 20,000 ESTABLISHED each to a remote of its
// own.
func BenchmarkAggregate(b *testing.B) {
	s := &netstat.Snapshot{}
	for p := range 6 {
		s.Processes = append(s.Processes, netstat.Process{PID: 100 + p, Name: "app"})
	}
	cli := netip.MustParseAddr("10.0.0.9")
	for i := range 20000 {
		s.Sockets = append(s.Sockets,
			netstat.Socket{State: netstat.CloseWait, PID: 100 + i%3, Remote: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), uint16(9092+i%3))},
			netstat.Socket{State: netstat.Established, PID: 103, Remote: netip.MustParseAddrPort("10.0.0.2:9092")},
			netstat.Socket{State: netstat.Established, PID: 104 + i%2, Remote: netip.AddrPortFrom(cli, uint16(1024+i))})
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := aggregate(s, DefaultMaxRemotes); len(got) == 0 {
			b.Fatal("no series")
		}
	}
}
