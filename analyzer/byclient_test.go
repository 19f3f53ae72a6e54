package analyzer

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/netstat"
)

// brokerSide is a broker-side socket: local is the broker's end, remote the
// client's.
func brokerSide(state netstat.State, local, remote string) netstat.Socket {
	return netstat.Socket{Family: netstat.IPv4, State: state, Local: netip.MustParseAddrPort(local), Remote: netip.MustParseAddrPort(remote)}
}

func counts(kv ...any) Counts {
	var c Counts
	for i := 0; i < len(kv); i += 2 {
		c[kv[i].(netstat.State)] = kv[i+1].(int)
	}
	return c
}

// netipCmp compares netip values, whose fields are unexported, by ==.
var netipCmp = []cmp.Option{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }),
}

func TestByClient(t *testing.T) {
	socks := []netstat.Socket{
		brokerSide(netstat.Listen, "0.0.0.0:9092", "0.0.0.0:0"),
		brokerSide(netstat.Established, "10.0.0.1:9092", "10.0.1.2:40000"),
		brokerSide(netstat.Established, "10.0.0.1:9092", "10.0.1.2:40001"),
		brokerSide(netstat.FinWait2, "10.0.0.1:9092", "10.0.1.2:40002"),
		brokerSide(netstat.Established, "10.0.0.5:9093", "10.0.1.2:40003"),
		// A dual-stack listener shows IPv4 clients mapped.
		{Family: netstat.IPv6, State: netstat.CloseWait, Local: netip.MustParseAddrPort("[::ffff:10.0.0.1]:9092"), Remote: netip.MustParseAddrPort("[::ffff:10.0.1.3]:50000")},
		brokerSide(netstat.TimeWait, "10.0.0.1:9092", "10.0.1.3:50001"),
		// The broker's own connection to another broker: not a listening port.
		brokerSide(netstat.Established, "10.0.0.1:41000", "10.0.0.2:9092"),
		// A held CLOSE socket of unknown address.
		{State: netstat.Close, PID: 1},
	}
	got := ByClient(socks, []uint16{9092, 9093})
	want := []ClientCounts{
		{Client: netip.MustParseAddr("10.0.1.2"), Counts: counts(netstat.Established, 3, netstat.FinWait2, 1),
			Listener: netip.MustParseAddrPort("10.0.0.1:9092"), ListenerConns: 3, Listeners: 2},
		{Client: netip.MustParseAddr("10.0.1.3"), Counts: counts(netstat.CloseWait, 1, netstat.TimeWait, 1),
			Listener: netip.MustParseAddrPort("10.0.0.1:9092"), ListenerConns: 2, Listeners: 1},
	}
	if d := cmp.Diff(want, got, netipCmp...); d != "" {
		t.Errorf("ByClient (-want +got):\n%s", d)
	}
	// Without ports, every socket with a remote counts, the broker's own
	// connection included.
	if n := len(ByClient(socks, nil)); n != 3 {
		t.Errorf("ByClient without ports: %d clients, want 3", n)
	}
}

// TestByClientListenerAddress checks that a socket of a listening port
// counts only when a listener of its namespace listens on its address: a
// client end whose ephemeral port is the same number does not.
func TestByClientListenerAddress(t *testing.T) {
	in := func(ns uint64, s netstat.Socket) netstat.Socket { s.NetNS = ns; return s }
	socks := []netstat.Socket{
		in(1, brokerSide(netstat.Listen, "10.0.0.1:40000", "0.0.0.0:0")),
		in(1, brokerSide(netstat.Established, "10.0.0.1:40000", "10.0.1.2:50000")),
		// A client end of namespace 1 on another address, port 40000 by chance.
		in(1, brokerSide(netstat.TimeWait, "10.0.0.9:40000", "10.0.1.7:9092")),
		// Namespace 2 listens on every address.
		in(2, brokerSide(netstat.Listen, "[::]:40000", "[::]:0")),
		in(2, netstat.Socket{Family: netstat.IPv6, State: netstat.Established, Local: netip.MustParseAddrPort("[::ffff:10.0.9.1]:40000"), Remote: netip.MustParseAddrPort("[::ffff:10.0.1.3]:50001")}),
		// Namespace 3 has no listener (the broker gone): its port decides.
		in(3, brokerSide(netstat.FinWait2, "10.0.8.1:40000", "10.0.1.4:50002")),
	}
	var got []string
	for _, c := range ByClient(socks, []uint16{40000}) {
		got = append(got, c.Client.String())
	}
	if d := cmp.Diff([]string{"10.0.1.2", "10.0.1.3", "10.0.1.4"}, got); d != "" {
		t.Errorf("clients (-want +got):\n%s", d)
	}
}

// sample is a snapshot at t0+at of broker-side ESTABLISHED sockets: for
// each client, the client ports of its connections to 10.0.0.1:9092.
func sample(at time.Duration, conns map[string][]uint16) *netstat.Snapshot {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	s := &netstat.Snapshot{Time: t0.Add(at)}
	for client, ports := range conns {
		for _, p := range ports {
			s.Sockets = append(s.Sockets, netstat.Socket{Family: netstat.IPv4, State: netstat.Established,
				Local: netip.MustParseAddrPort("10.0.0.1:9092"), Remote: netip.AddrPortFrom(netip.MustParseAddr(client), p)})
		}
	}
	return s
}

// opened returns each client's Opened, and its rate where it has one.
func opened(cs []ClientCounts) map[string][2]float64 {
	out := map[string][2]float64{}
	for _, c := range cs {
		out[c.Client.String()] = [2]float64{float64(c.Opened), c.OpenedPerMinute}
	}
	return out
}

func TestClientTrackerOpened(t *testing.T) {
	tr := &ClientTracker{Ports: []uint16{9092}, RateWindow: time.Minute}
	steps := []struct {
		at    time.Duration
		conns map[string][]uint16
		want  map[string][2]float64
	}{
		// The first sample's connections were open before kdiag looked.
		{0, map[string][]uint16{"10.0.1.2": {40000, 40001}}, map[string][2]float64{"10.0.1.2": {0, 0}}},
		// One more from .2 (a client per request, never closed); .3 is new:
		// both of its connections are.
		{20 * time.Second, map[string][]uint16{"10.0.1.2": {40000, 40001, 40002}, "10.0.1.3": {50000, 50001}},
			map[string][2]float64{"10.0.1.2": {1, 3}, "10.0.1.3": {2, 6}}},
		// .3 reconnects: one closed, one opened; .2 keeps its three.
		{40 * time.Second, map[string][]uint16{"10.0.1.2": {40000, 40001, 40002}, "10.0.1.3": {50000, 50002}},
			map[string][2]float64{"10.0.1.2": {1, 1.5}, "10.0.1.3": {3, 4.5}}},
		// A minute after the first sample: its rate window is all of it.
		{60 * time.Second, map[string][]uint16{"10.0.1.2": {40000, 40001, 40002, 40003}, "10.0.1.3": {50000, 50002}},
			map[string][2]float64{"10.0.1.2": {2, 2}, "10.0.1.3": {3, 3}}},
		// The window moves on: the sample at 20 s, .3's two, falls out;
		// .3 is gone, and stays while its opens are in the window.
		{80 * time.Second, map[string][]uint16{"10.0.1.2": {40000, 40001, 40002, 40003}},
			map[string][2]float64{"10.0.1.2": {1, 1}, "10.0.1.3": {1, 1}}},
		// Gone, and nothing opened within the window: forgotten.
		{200 * time.Second, map[string][]uint16{"10.0.1.2": {40000, 40001, 40002, 40003}},
			map[string][2]float64{"10.0.1.2": {0, 0}}},
	}
	for _, st := range steps {
		tr.Add(sample(st.at, st.conns))
		if d := cmp.Diff(st.want, opened(tr.Clients())); d != "" {
			t.Errorf("at %s: opened and per minute (-want +got):\n%s", st.at, d)
		}
	}
	if len(tr.times) > 3 {
		t.Errorf("%d sample times kept, want those of the rate window only", len(tr.times))
	}
}

// TestClientTrackerUnchanged checks that a snapshot serving the last dump
// again (kdiag watch --events) repeats its counts and opens nothing.
func TestClientTrackerUnchanged(t *testing.T) {
	tr := &ClientTracker{Ports: []uint16{9092}}
	s := sample(0, map[string][]uint16{"10.0.1.2": {40000}})
	s.Dump = 1
	tr.Add(s)
	s2 := sample(10*time.Second, map[string][]uint16{"10.0.1.2": {40000, 40001}})
	s2.Dump = 2
	tr.Add(s2)
	served := *s2
	served.Time, served.Unchanged = s2.Time.Add(10*time.Second), true
	tr.Add(&served)
	cs := tr.Clients()
	if len(cs) != 1 || cs[0].Connections() != 2 || cs[0].Opened != 1 || cs[0].OpenedPerMinute != 3 {
		t.Errorf("after a served sample: %+v, want 2 connections, 1 opened in 20 s (3/min)", cs)
	}
}
