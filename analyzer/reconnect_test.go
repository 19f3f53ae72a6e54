package analyzer

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/netstat"
)

// reconnecting returns samples every step of a process that holds one
// connection to each of three brokers and opens a new one (a new local
// port) to each every `every` samples.
func reconnecting(n, every int, step time.Duration) []netstat.Snapshot {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	brokers := []string{"10.0.0.1:9092", "10.0.0.2:9092", "10.0.0.3:9092"}
	var out []netstat.Snapshot
	for i := range n {
		s := netstat.Snapshot{Time: t0.Add(time.Duration(i) * step), Processes: []netstat.Process{{PID: 7, Name: "java"}}}
		for j, b := range brokers {
			port := uint16(40000 + 100*j + i/every)
			s.Sockets = append(s.Sockets, netstat.Socket{Family: netstat.IPv4, State: netstat.Established, PID: 7, Inode: uint64(1000*j + i/every + 1),
				Local: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.9"), port), Remote: netip.MustParseAddrPort(b)})
		}
		out = append(out, s)
	}
	return out
}

func TestReconnects(t *testing.T) {
	isB := func(ap netip.AddrPort) bool { return ap.Port() == 9092 }
	for _, tc := range []struct {
		name         string
		n, every     int
		step         time.Duration
		opened       int
		severity     Severity
		summaryStart string
	}{
		{"every idle period", 31, 3, time.Second, 30, Info, "java (pid 7) reconnects to 3 brokers every ~3s"},
		{"storm", 31, 1, 500 * time.Millisecond, 90, Warning, "Reconnect storm"},
		{"steady", 31, 100, time.Second, 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Analyze(reconnecting(tc.n, tc.every, tc.step), Options{IsBroker: isB})
			if len(a.Processes) != 1 || a.Processes[0].Opened != tc.opened {
				t.Fatalf("opened %d, want %d (the first sample's connections were open before)", a.Processes[0].Opened, tc.opened)
			}
			i := slices.IndexFunc(a.Findings, func(f Finding) bool { return f.Kind == KindReconnects })
			switch {
			case tc.severity == 0 && i >= 0:
				t.Errorf("a finding for a process that does not reconnect: %+v", a.Findings[i])
			case tc.severity == 0:
			case i < 0:
				t.Errorf("no %s finding: %+v", KindReconnects, a.Findings)
			case a.Findings[i].Severity != tc.severity || !strings.HasPrefix(a.Findings[i].Summary, tc.summaryStart):
				t.Errorf("finding %s %q, want %s %q…", a.Findings[i].Severity, a.Findings[i].Summary, tc.severity, tc.summaryStart)
			}
		})
	}
}

// TestReconnectPorts: the sockets toward each broker, the process's and the
// TIME_WAIT no process holds, are counted against the ephemeral range of
// its namespace; a reconnecting process whose range toward one broker is
// more than half spent gets a warning saying so.
func TestReconnectPorts(t *testing.T) {
	isB := func(ap netip.AddrPort) bool { return ap.Port() == 9092 }
	snaps := reconnecting(31, 3, time.Second)
	last := &snaps[len(snaps)-1]
	b1 := netip.MustParseAddrPort("10.0.0.1:9092")
	for i := range 40 {
		last.Sockets = append(last.Sockets, netstat.Socket{Family: netstat.IPv4, State: netstat.TimeWait,
			Local: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.9"), uint16(50000+i)), Remote: b1})
	}
	last.Sockets = append(last.Sockets,
		// Another destination's TIME_WAIT and a port outside the range
		// toward b1 are not counted in use.
		netstat.Socket{Family: netstat.IPv4, State: netstat.TimeWait, Local: netip.MustParseAddrPort("10.0.0.9:50000"), Remote: netip.MustParseAddrPort("10.0.0.7:443")},
		netstat.Socket{Family: netstat.IPv4, State: netstat.SynSent, Local: netip.MustParseAddrPort("10.0.0.9:1500"), Remote: b1})
	a := Analyze(snaps, Options{IsBroker: isB})
	i := slices.IndexFunc(a.Processes, func(p ProcessSeries) bool { return p.Key.PID == 7 })
	if i < 0 {
		t.Fatalf("no series of pid 7: %+v", a.Processes)
	}
	p := &a.Processes[i]
	for _, tc := range []struct {
		low, high int
		severity  Severity
		evidence  string
	}{
		{32768, 60999, Info, "Ports: toward 10.0.0.1:9092, 40 TIME_WAIT and 1 SYN_SENT (any holder); 41 of the 28232 ephemeral ports (32768-60999) in use toward it (0.1%), the most of its 3 brokers."},
		{40000, 40079, Info, "Ports: toward 10.0.0.1:9092, 40 TIME_WAIT and 1 SYN_SENT (any holder); 1 of the 80 ephemeral ports (40000-40079) in use toward it (1.2%), the most of its 3 brokers."},
		{49990, 50069, Warning, "Ports: toward 10.0.0.1:9092, 40 TIME_WAIT and 1 SYN_SENT (any holder); 40 of the 80 ephemeral ports (49990-50069) in use toward it (50.0%), the most of its 3 brokers."},
	} {
		sc := &netstat.TCPSysctls{PortLow: tc.low, PortHigh: tc.high}
		ev := Evidence{Client: p.Client, HeldClosed: -1, Sysctls: sc, Ports: CountPorts(last.Sockets, 7, isB, sc)}
		fs := Diagnose(a, p, ev, Options{IsBroker: isB})
		i := slices.IndexFunc(fs, func(f Finding) bool { return f.Kind == KindReconnects })
		if i < 0 {
			t.Fatalf("range %d-%d: no %s finding: %+v", tc.low, tc.high, KindReconnects, fs)
		}
		f := fs[i]
		if !slices.Contains(f.Evidence, tc.evidence) {
			t.Errorf("range %d-%d: evidence %q, want %q", tc.low, tc.high, f.Evidence, tc.evidence)
		}
		if f.Severity != tc.severity || (tc.severity == Warning) != strings.Contains(f.Summary, "of the ephemeral ports toward one broker in use") {
			t.Errorf("range %d-%d: %s %q, want %s, the ports named in the summary when a warning", tc.low, tc.high, f.Severity, f.Summary, tc.severity)
		}
	}
	if CountPorts(last.Sockets, 7, isB, &netstat.TCPSysctls{}) != nil {
		t.Error("ports counted without a known range")
	}
	if CountPorts(last.Sockets, 8, isB, &netstat.TCPSysctls{PortLow: 32768, PortHigh: 60999}) != nil {
		t.Error("ports counted for a process with no socket to a broker")
	}
}
