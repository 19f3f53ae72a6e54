//go:build linux

package netstat

import (
	"context"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/internal/sockettest"
)

// brokerFixture is two brokers (listeners on 127.0.0.1) whose clients
// connect from other loopback addresses, in the states a broker host sees,
// and a third listener whose port no query asks for.
type brokerFixture struct {
	ports []uint16
	// want are the broker ends and listeners a query of ports must report.
	want []*sockettest.Socket
	// clients are the client ends, whose remote port is a broker's: no
	// query of ports may report them.
	clients []*sockettest.Socket
	other   *sockettest.Broker
}

func newBrokerFixture(t *testing.T) *brokerFixture {
	b1, b2 := sockettest.NewBroker(t), sockettest.NewBroker(t)
	f := &brokerFixture{ports: []uint16{b1.Listener.Local.Port(), b2.Listener.Local.Port()}}
	c2 := b1.Connect("127.0.0.2", 3)
	c3 := b1.Connect("127.0.0.3", 2)
	c4 := b2.Connect("127.0.0.4", 1)
	b1.ServerClose(c2[0]) // the broker's end FIN_WAIT2, no file
	b1.BothClose(c2[1])   // the broker's end TIME_WAIT
	b1.ClientClose(c3[0]) // the broker's end CLOSE_WAIT, held
	f.other = sockettest.NewBroker(t)
	f.other.Connect("127.0.0.2", 1)
	f.want = []*sockettest.Socket{b1.Listener, b2.Listener}
	for _, c := range slices.Concat(c2, c3, c4) {
		f.want = append(f.want, c.Server)
		if c.Client.FD >= 0 {
			f.clients = append(f.clients, c.Client)
		}
	}
	return f
}

// TestDumpNetlinkSports checks the kernel's filter: a dump with sports
// lists the broker ends of every state and the listeners, and nothing
// whose local port is another (the clients' ends).
func TestDumpNetlinkSports(t *testing.T) {
	if !slices.Contains(sources(t), SourceNetlink) {
		t.Skip("netlink unavailable")
	}
	f := newBrokerFixture(t)
	for _, info := range []StateSet{0, AllStates} {
		socks, err := dumpNetlinkHost(AllStates, dumpOptions{info: info, sports: f.ports})
		if err != nil {
			t.Fatalf("dump with sports %v: %v", f.ports, err)
		}
		m := byTuple(t, "netlink", socks)
		for _, w := range f.want {
			got, ok := m[testTuple(w)]
			if !ok {
				t.Errorf("info %v: %s not reported", info != 0, w)
				continue
			}
			if got.State.String() != w.State {
				t.Errorf("info %v: %s reported %s", info != 0, w, got.State)
			}
		}
		for _, s := range socks {
			if !slices.Contains(f.ports, s.Local.Port()) {
				t.Errorf("info %v: %s %s->%s: local port not one of %v", info != 0, s.State, s.Local, s.Remote, f.ports)
			}
		}
	}
}

// TestScanListenPorts checks Query.ListenPorts on a broker host's sockets,
// through each source: exactly the broker ends and listeners, each with its
// holder (none for the fileless FIN_WAIT2 and TIME_WAIT), in a query that
// the kernel filters (no CLOSE) and in one filtered after a full dump
// (every state).
func TestScanListenPorts(t *testing.T) {
	f := newBrokerFixture(t)
	host, err := NetNSOf("/proc", 0)
	if err != nil {
		t.Fatal(err)
	}
	loopback := netip.MustParseAddr("127.0.0.1") // where the brokers listen
	var want []seen
	for _, w := range f.want {
		want = append(want, fromTest(w))
	}
	slices.SortFunc(want, compareSeen)
	for _, src := range sources(t) {
		for _, states := range []StateSet{AllStates &^ States(Close), AllStates} {
			name := src + "/all"
			if states != AllStates {
				name = src + "/no-close"
			}
			t.Run(name, func(t *testing.T) {
				s := NewScanner("/proc")
				s.Source = src
				snap, err := s.Scan(context.Background(), Query{States: states, ListenPorts: f.ports})
				if err != nil {
					t.Fatal(err)
				}
				var got []seen
				for _, x := range snap.Sockets {
					if x.NetNS != host && x.NetNS != 0 {
						continue // another namespace's, with a port of the same number
					}
					if x.KeptByProcess {
						continue // a held CLOSE socket of this process, which the filter selects
					}
					if x.Local.Addr() != loopback {
						// A client end elsewhere on the loopback (another
						// test's) whose ephemeral port is a broker's port
						// by chance: the filter is by port, and keeps it.
						continue
					}
					got = append(got, fromScan(x))
				}
				slices.SortFunc(got, compareSeen)
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("sockets (-want +got):\n%s", d)
				}
				if src == SourceNetlink && states != AllStates && s.lastDumped != len(snap.Sockets) {
					t.Errorf("the dumps listed %d sockets and the scan kept %d: the kernel did not filter by local port", s.lastDumped, len(snap.Sockets))
				}
				for _, c := range f.clients {
					if slices.ContainsFunc(snap.Sockets, func(x Socket) bool { return x.Local == c.Local && x.Remote == c.Remote }) {
						t.Errorf("client end %s reported", c)
					}
				}
			})
		}
	}
	// The state counts of this process: the broker ends it holds.
	snap := scan(t, SourceAuto, "", Query{States: AllStates &^ States(Close), ListenPorts: f.ports})
	for _, p := range snap.Processes {
		if p.PID != os.Getpid() {
			continue
		}
		if d := cmp.Diff(map[string]int{"LISTEN": 2, "ESTABLISHED": 3, "CLOSE_WAIT": 1}, p.States); d != "" {
			t.Errorf("this process's states (-want +got):\n%s", d)
		}
	}
}

func compareSeen(a, b seen) int {
	if c := cmpString(a.Local, b.Local); c != 0 {
		return c
	}
	return cmpString(a.Remote, b.Remote)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestScanNoAges checks that a single scan with NoAges asks no tcp_info:
// its sockets have no age, where the same scan without it has one for each.
func TestScanNoAges(t *testing.T) {
	if !slices.Contains(sources(t), SourceNetlink) {
		t.Skip("netlink unavailable")
	}
	f := newBrokerFixture(t)
	for _, noAges := range []bool{false, true} {
		s := NewScanner("/proc")
		s.Source, s.NoCache, s.NoAges = SourceNetlink, true, noAges
		snap, err := s.Scan(context.Background(), Query{States: States(Established, CloseWait), ListenPorts: f.ports})
		if err != nil {
			t.Fatal(err)
		}
		aged := 0
		for _, x := range snap.Sockets {
			if x.HasAge {
				aged++
			}
		}
		switch {
		case len(snap.Sockets) < 4:
			t.Fatalf("NoAges %v: %d sockets, want the fixture's 4 ESTABLISHED and 1 CLOSE_WAIT at least", noAges, len(snap.Sockets))
		case noAges && aged > 0:
			t.Errorf("NoAges: %d of %d sockets have an age", aged, len(snap.Sockets))
		case !noAges && aged != len(snap.Sockets):
			t.Errorf("without NoAges: %d of %d sockets have an age", aged, len(snap.Sockets))
		}
	}
}
