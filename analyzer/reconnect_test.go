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
