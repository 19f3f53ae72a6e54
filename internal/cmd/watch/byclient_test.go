package watch

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/internal/sockettest"
	"github.com/kdiag/kdiag/metrics"
	"github.com/kdiag/kdiag/netstat"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestClientTrackerRealSockets feeds the broker host's tracker real scans
// of a broker on 127.0.0.1 whose clients connect from 127.0.0.2 and
// 127.0.0.3, with connections opened and closed between the scans: the
// opened counts are the new client ports, exactly.
func TestClientTrackerRealSockets(t *testing.T) {
	b := sockettest.NewBroker(t)
	b.Connect("127.0.0.2", 2)
	c3 := b.Connect("127.0.0.3", 2)
	port := b.Listener.Local.Port()
	sc := netstat.NewScanner("/proc")
	q := netstat.Query{States: cmdutil.ClientViewStates, ListenPorts: []uint16{port}}
	tr := &analyzer.ClientTracker{Ports: q.ListenPorts, RateWindow: time.Hour}
	scanOnce := func() {
		t.Helper()
		s, err := sc.Scan(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		tr.Add(s)
	}
	type row struct {
		Established, FinWait2, Opened int
	}
	check := func(step string, want map[string]row) {
		t.Helper()
		got := map[string]row{}
		for _, c := range tr.Clients() {
			got[c.Client.String()] = row{c.Counts.Get(netstat.Established), c.Counts.Get(netstat.FinWait2), c.Opened}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: clients (-want +got):\n%s", step, d)
		}
	}
	scanOnce()
	check("first scan", map[string]row{"127.0.0.2": {2, 0, 0}, "127.0.0.3": {2, 0, 0}})
	// .2 creates three producers and never closes them; the broker closes
	// one of .3's (its idle close) and .3 reconnects.
	b.Connect("127.0.0.2", 3)
	b.ServerClose(c3[0])
	b.Connect("127.0.0.3", 1)
	scanOnce()
	check("second scan", map[string]row{"127.0.0.2": {5, 0, 3}, "127.0.0.3": {2, 1, 1}})
	// A new client host, and .3's broker-closed connection closed by it
	// too (TIME_WAIT on the broker's side, not a new connection).
	b.Connect("127.0.0.4", 1)
	scanOnce()
	check("third scan", map[string]row{"127.0.0.2": {5, 0, 3}, "127.0.0.3": {2, 1, 1}, "127.0.0.4": {1, 0, 1}})
}

// TestClientViewWatch runs the watch as a user does on a broker host,
// --listen-ports with a textfile, over real sockets whose connections are
// opened and closed between the scans: the plain lines, the metrics, and
// the clients at exit.
func TestClientViewWatch(t *testing.T) {
	b := sockettest.NewBroker(t)
	b.Connect("127.0.0.2", 2)
	c3 := b.Connect("127.0.0.3", 2)
	port := b.Listener.Local.Port()
	dir := t.TempDir()
	ios, _, out, errOut := cmdutil.Test()
	const scans = 3
	o := &WatchOptions{IO: ios, Scan: netstat.NewScanner("/proc").Scan,
		Filters:  cmdutil.Filters{States: "all", ListenPorts: []int{int(port)}},
		Interval: 50 * time.Millisecond, Count: scans, Window: time.Hour, StuckAge: time.Minute,
		Events: "off", Refresh: netstat.DefaultRefreshEvery, Textfile: dir}
	o.Scanned = func(n int, s *netstat.Snapshot) {
		switch n {
		case 1:
			b.Connect("127.0.0.2", 3)
		case 2:
			b.ServerClose(c3[0])
		}
	}
	if err := o.complete(); err != nil {
		t.Fatal(err)
	}
	if o.Query.States != cmdutil.ClientViewStates {
		t.Errorf("states %b, want the view's (every state but CLOSE)", o.Query.States)
	}
	if err := runWatch(o); err != nil {
		t.Fatalf("runWatch: %v\n%s", err, errOut)
	}
	if n := strings.Count(out.String(), " clients=2 "); n != scans {
		t.Errorf("%d plain lines of 2 clients, want %d:\n%s", n, scans, out)
	}
	if !strings.Contains(out.String(), "clients=2 connections=7 established=6 fin_wait2=1 ") {
		t.Errorf("the last plain line does not count the connections:\n%s", out)
	}
	summary := "127.0.0.2  5            0           0           0          0      "
	if !strings.Contains(out.String(), "Clients of port "+strconv.Itoa(int(port))+" at the last scan") || !strings.Contains(out.String(), summary) {
		t.Errorf("no summary of the clients at exit:\n%s", out)
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
	got := map[string]float64{}
	for _, name := range []string{"kdiag_broker_client_connections", "kdiag_broker_client_connections_opened_per_minute"} {
		for _, m := range mfs[name].GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetValue())
			}
			got[name+" "+strings.Join(ls, " ")] = m.GetGauge().GetValue()
		}
	}
	for k, want := range map[string]float64{
		"kdiag_broker_client_connections 127.0.0.2 ESTABLISHED":       5,
		"kdiag_broker_client_connections 127.0.0.3 ESTABLISHED":       1,
		"kdiag_broker_client_connections 127.0.0.3 FIN_WAIT2":         1,
		"kdiag_broker_client_connections_opened_per_minute 127.0.0.3": 0,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], want, got)
		}
	}
	// Three opened between the first two scans: a rate above zero, whatever
	// the time between the scans.
	if r := got["kdiag_broker_client_connections_opened_per_minute 127.0.0.2"]; r <= 0 {
		t.Errorf("127.0.0.2 opened 3 connections; its rate is %v", r)
	}
	if v := mfs["kdiag_broker_client_addresses"].GetMetric(); len(v) != 1 || v[0].GetGauge().GetValue() != 2 {
		t.Errorf("kdiag_broker_client_addresses %v, want 2", v)
	}
}

// TestClientViewLiveTable draws the live table of the broker host's view
// on a terminal, twice: the second moves back over the first.
func TestClientViewLiveTable(t *testing.T) {
	ios, _, out, _ := cmdutil.Test()
	ios.SetStdoutTTY(true)
	v := &liveView{io: ios, interval: time.Second}
	tr := &analyzer.ClientTracker{Ports: []uint16{9092}}
	s := &netstat.Snapshot{Time: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)}
	for i := range 3 {
		s.Sockets = append(s.Sockets, netstat.Socket{State: netstat.Established,
			Local: netip.MustParseAddrPort("10.0.0.1:9092"), Remote: netip.MustParseAddrPort(fmt.Sprintf("10.0.3.17:%d", 41000+i))})
	}
	tr.Add(s)
	v.drawClients(s, tr.Clients(), tr.Ports, time.Millisecond)
	first := out.String()
	for _, want := range []string{"clients of port 9092", "CLIENT     ESTABLISHED  FIN-WAIT-2  CLOSE-WAIT  TIME-WAIT  OTHER  NEW/MIN  TOP LISTENER",
		"10.0.3.17  3            0           0           0          0      -        10.0.0.1:9092 (3)"} {
		if !strings.Contains(first, want) {
			t.Errorf("live table lacks %q:\n%s", want, first)
		}
	}
	v.drawClients(s, tr.Clients(), tr.Ports, time.Millisecond)
	if second := strings.TrimPrefix(out.String(), first); !strings.HasPrefix(second, fmt.Sprintf("\x1b[%dA\x1b[J", v.lines)) {
		t.Errorf("redraw does not move up over the last table: %q", second)
	}
}
