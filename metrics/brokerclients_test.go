package metrics

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/netstat"
)

// brokerSample is a broker host's scan at t0+at: for each client address,
// the client ports of its ESTABLISHED connections to 10.0.0.1:9092, and
// fw2 of its connections in FIN_WAIT2.
func brokerSample(at time.Duration, conns map[string][]int, fw2 map[string]int) *netstat.Snapshot {
	s := &netstat.Snapshot{Time: t0.Add(at), Source: "netlink"}
	local := netip.MustParseAddrPort("10.0.0.1:9092")
	for client, ports := range conns {
		for _, p := range ports {
			s.Sockets = append(s.Sockets, netstat.Socket{State: netstat.Established, Local: local, Remote: netipPort(client, p)})
		}
	}
	for client, n := range fw2 {
		for i := range n {
			s.Sockets = append(s.Sockets, netstat.Socket{State: netstat.FinWait2, Local: local, Remote: netipPort(client, 60000+i)})
		}
	}
	return s
}

// TestBrokerClientFamilies: two scans of a broker host, a client that
// opened two connections between them, one that holds connections the
// broker closed.
func TestBrokerClientFamilies(t *testing.T) {
	tr := &analyzer.ClientTracker{Ports: []uint16{9092}}
	c := New()
	tr.Add(brokerSample(0, map[string][]int{"10.0.3.17": {41000}, "10.0.3.40": {52000}}, map[string]int{"10.0.3.40": 3}))
	s := brokerSample(30*time.Second, map[string][]int{"10.0.3.17": {41000, 41001, 41002}, "10.0.3.40": {52000}}, map[string]int{"10.0.3.40": 3})
	tr.Add(s)
	c.Update(s, nil, time.Millisecond)
	c.UpdateClients(tr.Clients())
	got := flat(gather(t, c), "kdiag_broker_client_connections", "kdiag_broker_client_connections_opened_per_minute", "kdiag_broker_client_addresses")
	want := []string{
		"kdiag_broker_client_addresses{} 2",
		"kdiag_broker_client_connections{client=10.0.3.17,state=ESTABLISHED} 3",
		"kdiag_broker_client_connections{client=10.0.3.40,state=ESTABLISHED} 1",
		"kdiag_broker_client_connections{client=10.0.3.40,state=FIN_WAIT2} 3",
		"kdiag_broker_client_connections_opened_per_minute{client=10.0.3.17} 4",
		"kdiag_broker_client_connections_opened_per_minute{client=10.0.3.40} 0",
	}
	slices.Sort(want)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("broker families (-want +got):\n%s", d)
	}
	// A watch of a client host has no broker view: no such family.
	mfs := gather(t, fed(3))
	for _, name := range []string{"kdiag_broker_client_connections", "kdiag_broker_client_connections_opened_per_minute", "kdiag_broker_client_addresses"} {
		if mfs[name] != nil {
			t.Errorf("a watch without a broker view exports %s", name)
		}
	}
}

// TestBrokerClientsCapped: a broker with many clients keeps the busiest
// and the fastest openers under their own address, the rest under
// client="other", which sums them.
func TestBrokerClientsCapped(t *testing.T) {
	var cs []analyzer.ClientCounts
	total := 0
	for i := range 50 {
		var x analyzer.ClientCounts
		x.Client = netip.AddrFrom4([4]byte{10, 0, 4, byte(i)})
		x.Counts[netstat.Established] = 100 - i // 10.0.4.0 the busiest
		x.HasRate = true
		total += x.Counts[netstat.Established]
		cs = append(cs, x)
	}
	// A storm: few connections at once, many opened.
	cs[49].Opened, cs[49].OpenedPerMinute = 600, 600
	analyzer.SortClients(cs)
	c := New()
	c.MaxClients = 5
	c.UpdateClients(cs)
	mfs := gather(t, c)
	var clients []string
	sum := 0.0
	for _, m := range mfs["kdiag_broker_client_connections"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "client" {
				clients = append(clients, l.GetValue())
			}
		}
		sum += m.GetGauge().GetValue()
	}
	want := []string{"10.0.4.0", "10.0.4.1", "10.0.4.2", "10.0.4.3", "10.0.4.4", "10.0.4.49", "other"}
	if d := cmp.Diff(want, clients); d != "" {
		t.Errorf("client label values (-want +got):\n%s", d)
	}
	if sum != float64(total) {
		t.Errorf("connections sum to %v over the series, want all %d", sum, total)
	}
	if got := mfs["kdiag_broker_client_addresses"].GetMetric()[0].GetGauge().GetValue(); got != 50 {
		t.Errorf("addresses %v, want 50", got)
	}
}

// TestPromtoolChecksBrokerFamilies runs promtool check metrics on a broker
// host's exposition.
func TestPromtoolChecksBrokerFamilies(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Skip("promtool not installed (Debian package prometheus; .ci/run installs it)")
	}
	tr := &analyzer.ClientTracker{Ports: []uint16{9092}}
	for i := range 3 {
		conns := map[string][]int{}
		for j := range 30 {
			conns[fmt.Sprintf("10.0.5.%d", j)] = []int{40000 + i}
		}
		tr.Add(brokerSample(time.Duration(i)*time.Second, conns, map[string]int{"10.0.5.1": 2}))
	}
	c := New()
	c.UpdateClients(tr.Clients())
	var b bytes.Buffer
	c.WritePrometheus(&b)
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = &b
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	} else if s := strings.TrimSpace(string(out)); s != "" {
		t.Logf("promtool: %s", s)
	}
}
