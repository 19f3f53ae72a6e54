package scan

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/internal/sockettest"
	"github.com/kdiag/kdiag/netstat"
)

func TestClientViewFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		ports      []uint16
		states     netstat.StateSet
		pids       []int
		hasProcess bool
	}{
		{[]string{"--listen-ports", "9092,9093"}, []uint16{9092, 9093}, cmdutil.ClientViewStates, nil, false},
		{[]string{"--listen-ports", "9092", "--state", "fin-wait-2,close-wait"}, []uint16{9092}, netstat.States(netstat.FinWait2, netstat.CloseWait), nil, false},
		{[]string{"--by-client", "--process", "kafka"}, nil, cmdutil.ClientViewStates, nil, true},
		{[]string{"--by-client", "--pid", "42"}, nil, cmdutil.ClientViewStates, []int{42}, false},
		{[]string{"--by-client", "--listen-ports", "9092", "--state", "all"}, []uint16{9092}, netstat.AllStates, nil, false},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var got *ScanOptions
			f, _, _ := factory()
			cmd := NewCmdScan(f, func(o *ScanOptions) error { got = o; return nil })
			cmd.SetArgs(tc.args)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			q := got.Query
			if d := cmp.Diff(tc.ports, q.ListenPorts); d != "" || q.States != tc.states || !slicesEqual(q.PIDs, tc.pids) || (q.Process != nil) != tc.hasProcess {
				t.Errorf("query: listen ports %v (-want +got: %s), states %b (want %b), pids %v, process %v", q.ListenPorts, d, q.States, tc.states, q.PIDs, q.Process)
			}
			if !got.Filters.ClientView() {
				t.Errorf("not the client view")
			}
		})
	}
	for _, args := range [][]string{
		{"--listen-ports", "0"},
		{"--listen-ports", "65536"},
		{"--by-client"},
		{"--listen-ports", "9092", "--process", "kafka"},
		{"--listen-ports", "9092", "--pid", "1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			f, _, _ := factory()
			cmd := NewCmdScan(f, func(*ScanOptions) error { t.Error("ran with bad flags"); return nil })
			cmd.SetArgs(args)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if cmdutil.ExitCode(err) != cmdutil.ExitUsage {
				t.Errorf("%v: exit %d, want a usage error", err, cmdutil.ExitCode(err))
			}
		})
	}
}

func slicesEqual(a, b []int) bool { return cmp.Equal(a, b) || len(a) == 0 && len(b) == 0 }

// brokerSnapshot is what a scan of a broker host with --listen-ports
// 9092,9093 gives: the broker's listeners and its side of its clients'
// connections, in every state the view counts, fixed for golden output.
func brokerSnapshot() *netstat.Snapshot {
	ap := netip.MustParseAddrPort
	const host = 4026531840
	conn := func(st netstat.State, local, remote string, pid, fd int) netstat.Socket {
		s := netstat.Socket{Family: netstat.IPv4, State: st, Local: ap(local), Remote: ap(remote), PID: pid, FD: fd, NetNS: host}
		if strings.HasPrefix(local, "[") {
			s.Family = netstat.IPv6
		}
		if pid > 0 {
			s.Inode = uint64(200000 + fd)
		} else {
			s.FD = -1
		}
		return s
	}
	socks := []netstat.Socket{
		conn(netstat.Listen, "[::]:9092", "[::]:0", 1100, 150),
		conn(netstat.Listen, "10.0.0.21:9093", "0.0.0.0:0", 1100, 151),
	}
	// 10.0.3.17 makes a producer per request and never closes it.
	for i := range 14 {
		socks = append(socks, conn(netstat.Established, "[::ffff:10.0.0.21]:9092", "[::ffff:10.0.3.17]:"+strconv.Itoa(41000+i), 1100, 300+i))
	}
	// 10.0.3.40 keeps CLOSE_WAIT: the broker closed idle connections it has
	// not closed.
	for i := range 5 {
		socks = append(socks, conn(netstat.FinWait2, "[::ffff:10.0.0.21]:9092", "[::ffff:10.0.3.40]:"+strconv.Itoa(52000+i), 0, 0))
	}
	socks = append(socks,
		conn(netstat.Established, "[::ffff:10.0.0.21]:9092", "[::ffff:10.0.3.40]:52010", 1100, 400),
		conn(netstat.TimeWait, "[::ffff:10.0.0.21]:9092", "[::ffff:10.0.3.40]:52011", 0, 0),
		// A healthy client: one connection, and one to the other listener.
		conn(netstat.Established, "[::ffff:10.0.0.21]:9092", "[::ffff:10.0.2.8]:60000", 1100, 410),
		conn(netstat.Established, "10.0.0.21:9093", "10.0.2.8:60001", 1100, 411),
		// A client that closed; the broker has not.
		conn(netstat.CloseWait, "[::ffff:10.0.0.21]:9092", "[::ffff:10.0.2.9]:33000", 1100, 420),
		// A handshake under way.
		conn(netstat.SynRecv, "[::ffff:10.0.0.21]:9092", "[::ffff:10.0.2.10]:33100", 0, 0),
	)
	return &netstat.Snapshot{
		Time: fixedNow, Source: "netlink", Sockets: socks,
		Processes: []netstat.Process{{PID: 1100, Name: "java", Cmdline: "java -cp /opt/kafka/libs/* kafka.Kafka server.properties", User: "kafka", NetNS: host,
			States: map[string]int{"LISTEN": 2, "ESTABLISHED": 17, "CLOSE_WAIT": 1}}},
	}
}

func TestClientViewGolden(t *testing.T) {
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			f, out, _ := factory()
			o := &ScanOptions{IO: f.IO, Now: f.Now, Output: format, Warn: -1, Crit: -1, HostNetNS: 4026531840,
				Filters: cmdutil.Filters{ListenPorts: []int{9092, 9093}},
				Query:   netstat.Query{ListenPorts: []uint16{9092, 9093}, States: cmdutil.ClientViewStates},
				Scan:    func(context.Context, netstat.Query) (*netstat.Snapshot, error) { return brokerSnapshot(), nil }}
			if err := runScan(o); err != nil {
				t.Fatal(err)
			}
			golden(t, "scan_clients_"+format, out.Bytes())
		})
	}
}

// TestClientViewByClientPorts checks --by-client's two scans: the
// listeners of the selected processes first, then their ports' sockets of
// every process (the broker's closed ends are held by none).
func TestClientViewByClientPorts(t *testing.T) {
	var queries []netstat.Query
	f, out, _ := factory()
	o := &ScanOptions{IO: f.IO, Now: f.Now, Output: "table", Warn: -1, Crit: -1,
		Filters: cmdutil.Filters{ByClient: true, Process: "java"},
		Query:   netstat.Query{Process: regexp.MustCompile("java"), States: cmdutil.ClientViewStates},
		Scan: func(_ context.Context, q netstat.Query) (*netstat.Snapshot, error) {
			queries = append(queries, q)
			return brokerSnapshot(), nil
		}}
	if err := runScan(o); err != nil {
		t.Fatal(err)
	}
	if len(queries) != 2 || queries[0].States != netstat.States(netstat.Listen) || queries[0].Process == nil {
		t.Fatalf("queries %+v: want the listeners of --process first", queries)
	}
	if q := queries[1]; !cmp.Equal(q.ListenPorts, []uint16{9092, 9093}) || q.Process != nil || q.PIDs != nil || q.States != cmdutil.ClientViewStates {
		t.Errorf("second query %+v: want ports 9092,9093 of any process", q)
	}
	if !strings.Contains(out.String(), "10.0.3.17  14") {
		t.Errorf("table:\n%s", out)
	}

	// Processes that listen on nothing: an error that says so, exit 3.
	f, _, _ = factory()
	o.IO, o.Query = f.IO, netstat.Query{Process: regexp.MustCompile("java"), States: cmdutil.ClientViewStates}
	o.Scan = func(context.Context, netstat.Query) (*netstat.Snapshot, error) {
		return &netstat.Snapshot{Time: fixedNow}, nil
	}
	err := runScan(o)
	if cmdutil.ExitCode(err) != cmdutil.ExitUnknown || !strings.Contains(err.Error(), `the processes --process "java" selects listen on no TCP port`) {
		t.Errorf("error %v (exit %d), want exit 3 saying the process listens on nothing", err, cmdutil.ExitCode(err))
	}
}

// clientDoc is the view's JSON as a user's script reads it.
type clientDoc struct {
	ListenPorts []int `json:"listen_ports"`
	Listeners   []struct {
		Local string `json:"local"`
		PID   int    `json:"pid"`
	} `json:"listeners"`
	Clients []struct {
		Client      string         `json:"client"`
		States      map[string]int `json:"states"`
		TopListener string         `json:"top_listener"`
	} `json:"clients"`
}

// TestClientViewRealSockets runs the view on real sockets: a broker on
// 127.0.0.1 whose clients connect from 127.0.0.2 and 127.0.0.3, some
// connections closed by the broker (FIN_WAIT2 on its side, the client
// holding CLOSE_WAIT), one closed by the client (CLOSE_WAIT on the
// broker's side), one by both (TIME_WAIT on the broker's side); through
// --listen-ports and through --by-client --pid, each source.
func TestClientViewRealSockets(t *testing.T) {
	b := sockettest.NewBroker(t)
	c2 := b.Connect("127.0.0.2", 5)
	c3 := b.Connect("127.0.0.3", 2)
	b.ServerClose(c2[0])
	b.ServerClose(c2[1])
	b.BothClose(c2[2])
	b.ClientClose(c3[0])
	port := strconv.Itoa(int(b.Listener.Local.Port()))
	want := map[string]map[string]int{
		"127.0.0.2": {"ESTABLISHED": 2, "FIN_WAIT2": 2, "TIME_WAIT": 1},
		"127.0.0.3": {"ESTABLISHED": 1, "CLOSE_WAIT": 1},
	}
	for _, src := range []string{"proc", "netlink"} {
		for _, sel := range [][]string{{"--listen-ports", port}, {"--by-client", "--pid", strconv.Itoa(os.Getpid())}} {
			t.Run(src+"/"+sel[0], func(t *testing.T) {
				f, out, errOut := factory()
				cmd := NewCmdScan(f, nil)
				cmd.SetArgs(append([]string{"--source", src, "-o", "json"}, sel...))
				if err := cmd.Execute(); err != nil {
					if src == "netlink" && strings.Contains(err.Error(), "netlink") {
						t.Skipf("netlink unavailable: %v", err)
					}
					t.Fatalf("%v; stderr %s", err, errOut)
				}
				var doc clientDoc
				if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				got := map[string]map[string]int{}
				for _, c := range doc.Clients {
					if c.TopListener != b.Listener.Local.String() {
						continue // another listener of this process (--by-client --pid)
					}
					got[c.Client] = c.States
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("clients (-want +got):\n%s\n%s", d, out)
				}
				found := false
				for _, l := range doc.Listeners {
					found = found || l.Local == b.Listener.Local.String() && l.PID == os.Getpid()
				}
				if !found {
					t.Errorf("listeners %+v lack %s held by this process", doc.Listeners, b.Listener.Local)
				}
			})
		}
	}
	// The table says the same, with the legend of its states.
	f, out, errOut := factory()
	cmd := NewCmdScan(f, nil)
	cmd.SetArgs([]string{"--listen-ports", port})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v; stderr %s", err, errOut)
	}
	for _, line := range []string{
		"127.0.0.2  2            2           0           1          0      " + b.Listener.Local.String() + " (5)",
		"127.0.0.3  1            0           1           0          0      " + b.Listener.Local.String() + " (2)",
		"7 connections from 2 clients to port " + port,
		"FIN-WAIT-2: closed by the broker",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("table lacks %q:\n%s", line, out)
		}
	}
}
