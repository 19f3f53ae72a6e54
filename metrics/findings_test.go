package metrics

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/netstat"
)

// TestFleetFamilies: a node running two Sarama v1.38.1 processes that hold
// broker-closed sockets (the first look's close-wait-held) and a fixed
// franz-go: kdiag_finding counts them by kind and client version, and
// kdiag_client_info names each version's known bugs.
func TestFleetFamilies(t *testing.T) {
	ident := func(p netstat.Process) clients.Client {
		if p.Name == "orders" {
			return clients.Client{Library: clients.FranzGo, Version: "v1.22.3", Language: "Go"}
		}
		return clients.Client{Library: clients.Sarama, Version: "v1.38.1", Language: "Go"}
	}
	c := New()
	c.Analyzer = analyzer.Options{Identify: ident}
	tr := analyzer.NewTracker(c.Analyzer)
	s := netstat.Snapshot{Time: t0, Source: "netlink", Processes: []netstat.Process{
		{PID: 1, Name: "billing"}, {PID: 2, Name: "audit"}, {PID: 3, Name: "orders"}}}
	for pid := 1; pid <= 3; pid++ {
		st := netstat.CloseWait
		if pid == 3 {
			st = netstat.Established
		}
		s.Sockets = append(s.Sockets, netstat.Socket{State: st, PID: pid, Inode: uint64(pid), RecvQ: 1, Age: time.Second, HasAge: true,
			Local: netipPort("10.0.0.9", 40000+pid), Remote: netipPort("10.0.0.1", 9092)})
	}
	tr.Add(&s)
	c.Update(&s, tr.Current(), time.Millisecond)
	got := flat(gather(t, c), "kdiag_finding", "kdiag_client_info")
	want := []string{
		"kdiag_client_info{known_bugs=,library=franz-go,version=v1.22.3} 1",
		"kdiag_client_info{known_bugs=sarama-1162,sarama-3143,library=sarama,version=v1.38.1} 2",
		"kdiag_finding{kind=close-wait-held,library=sarama,severity=warning,version=v1.38.1} 2",
		"kdiag_finding{kind=known-bug,library=sarama,severity=info,version=v1.38.1} 2",
	}
	slices.Sort(want)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("fleet families (-want +got):\n%s", d)
	}
}

func netipPort(addr string, port int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr(addr), uint16(port))
}
