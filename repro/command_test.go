package repro

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/netstat"
)

func TestParseStat(t *testing.T) {
	for _, tt := range []struct {
		line string
		want statInfo
		err  string
	}{
		{line: "1234 (java) S 1200 1234 1200 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 30 0 98765 1 2 3", want: statInfo{state: 'S', ppid: 1200, start: 98765}},
		// A command name with spaces and parentheses: fields count from the last ')'.
		{line: "77 (a (b) c) Z 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 555 0 0", want: statInfo{state: 'Z', ppid: 1, start: 555}},
		{line: "1 init S 0", err: "no command name"},
		{line: "1 (x) S 0 1 1", err: "want at least 20"},
		{line: "1 (x) S p 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0", err: `parent pid "p"`},
	} {
		got, err := parseStat([]byte(tt.line))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseStat(%q) error %v, want %q", tt.line, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v", tt.line, got, err, tt.want)
		}
	}
}

func TestHasEnv(t *testing.T) {
	env := []byte("PATH=/bin\x00KDIAG_REPRO_RUN=abc\x00X=1\x00")
	if !hasEnv(env, "KDIAG_REPRO_RUN=abc") || hasEnv(env, "KDIAG_REPRO_RUN=ab") || hasEnv(env, "KDIAG_REPRO_RUN=abcd") {
		t.Error("hasEnv matches other than the whole entry")
	}
}

func TestLineTail(t *testing.T) {
	var relayed strings.Builder
	lt := &lineTail{max: 3, relay: &relayed}
	_, _ = lt.Write([]byte("one\ntwo\r\nthree\nfour --sasl.password=hunter2\nfi"))
	_, _ = lt.Write([]byte("ve"))
	want := []string{"three", "four --sasl.password=******", "five"}
	if diff := cmp.Diff(want, lt.Lines()); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if !strings.Contains(relayed.String(), "hunter2") {
		t.Error("the relay is the command's own output, unchanged")
	}
}

// sock is a client socket to broker b from local port l.
func sock(state netstat.State, l uint16, b string, inode uint64, recvQ uint32) netstat.Socket {
	return netstat.Socket{State: state, Local: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), l),
		Remote: netip.MustParseAddrPort(b), Inode: inode, RecvQ: recvQ, PID: 42, FD: int(inode) - 3}
}

// TestTimeline follows three connections through the broker's log and the
// client's samples: one the client closes at once after the broker's
// close (and reconnects), one it holds in CLOSE_WAIT until keepalive's
// reset leaves it in CLOSE with its fd held, and one it closes itself.
func TestTimeline(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	const b0, b1 = "127.0.0.1:9092", "127.0.0.1:9093"
	tl := newTimeline(start, []string{b0, b1})
	ev := []BrokerEvent{
		{At: at(100), Kind: "accepted", Node: 0, Client: "127.0.0.1:40001", Conn: "c1", Broker: b0},
		{At: at(110), Kind: "accepted", Node: 1, Client: "127.0.0.1:40002", Conn: "c2", Broker: b1},
		{At: at(120), Kind: "accepted", Node: 1, Client: "127.0.0.1:40003", Conn: "c3", Broker: b1},
		{At: at(150), Kind: "request", Client: "127.0.0.1:40001", Conn: "c1", API: "Metadata (key 3) v12"},
		{At: at(160), Kind: "request", Client: "127.0.0.1:40001", Conn: "c1", API: "Produce (key 0) v11"},
	}
	tl.events(ev)
	s := tl.sample(at(200), []netstat.Socket{sock(netstat.Established, 40001, b0, 11, 0), sock(netstat.Established, 40002, b1, 12, 0),
		sock(netstat.Established, 40003, b1, 13, 0), sock(netstat.Established, 50000, "10.0.0.9:443", 14, 0)}, nil)
	if s.Established != 3 {
		t.Errorf("sample: %+v, want 3 ESTABLISHED to the brokers (not the one to 10.0.0.9)", s)
	}
	ev = append(ev,
		BrokerEvent{At: at(3000), Kind: "closed", Client: "127.0.0.1:40001", Conn: "c1", Reason: broker.ReasonIdle, IdleFor: 2840 * time.Millisecond},
		BrokerEvent{At: at(3000), Kind: "closed", Client: "127.0.0.1:40002", Conn: "c2", Reason: broker.ReasonIdle, IdleFor: 2890 * time.Millisecond},
		BrokerEvent{At: at(3100), Kind: "closed", Client: "127.0.0.1:40003", Conn: "c3", Reason: broker.ReasonClientClosed},
		BrokerEvent{At: at(3050), Kind: "accepted", Node: 0, Client: "127.0.0.1:40004", Conn: "c4", Broker: b0},
	)
	tl.events(ev)
	s = tl.sample(at(3200), []netstat.Socket{sock(netstat.CloseWait, 40002, b1, 12, 1), sock(netstat.Established, 40004, b0, 15, 0)}, nil)
	if s.CloseWait != 1 || s.Established != 1 {
		t.Errorf("sample after the close: %+v", s)
	}
	tl.sample(at(9000), []netstat.Socket{sock(netstat.CloseWait, 40002, b1, 12, 1)}, nil)
	// Keepalive's reset: the socket is in no table any more, its fd is
	// held (the fd check says so; a scan with CLOSE would list it).
	holds := func(pid, fd int, inode uint64) bool { return pid == 42 && fd == 9 && inode == 12 }
	s = tl.sample(at(19000), nil, holds)
	if s.HeldClose != 1 {
		t.Errorf("sample after the reset: %+v, want the held CLOSE socket counted", s)
	}
	tl.sample(at(25000), []netstat.Socket{{State: netstat.Close, Inode: 12, PID: 42}}, nil)
	tl.finish(3*time.Second, 26000)

	c := tl.conns
	if len(c) != 4 {
		t.Fatalf("%d connections, want 4", len(c))
	}
	if c[0].Requests != 2 || c[0].ClosedBy != "broker" || c[0].IdleMS != 2840 || c[0].Outcome != OutcomeClosedAtOnce ||
		c[0].GoneMS != 3200 || c[0].ReconnectMS != 3050 || c[0].Held {
		t.Errorf("closed at once: %+v", c[0])
	}
	if c[1].Outcome != OutcomeHeldClose || c[1].CloseWaitMS != 5800 || c[1].RecvQ != 1 || c[1].HeldCloseAtMS != 19000 ||
		c[1].HeldCloseMS != 6000 || !c[1].Held || c[1].GoneMS != -1 {
		t.Errorf("held, then CLOSE: %+v", c[1])
	}
	if c[2].ClosedBy != "client" || c[2].Outcome != "" {
		t.Errorf("closed by the client: %+v", c[2])
	}
	if c[3].ClosedBy != "" || c[3].ClosedMS != -1 {
		t.Errorf("open at the end: %+v", c[3])
	}
	if got := tl.otherRemotes(); !cmp.Equal(got, []string{"10.0.0.9:443"}) {
		t.Errorf("other remotes %v", got)
	}
}

// TestJudgeCommand: each kind of run gets its status, exit code and a
// verdict that says why.
func TestJudgeCommand(t *testing.T) {
	franz := clients.Client{Library: clients.FranzGo, Version: "v1.22.3"}
	java := clients.Client{Library: clients.KafkaClients, Version: "3.9.0"}
	held := &Conn{ID: 1, ClosedBy: "broker", Outcome: OutcomeHeldCloseWait, CloseWaitMS: 7000, RecvQ: 1, Held: true, ReconnectMS: -1}
	atOnce := func(reconnect int64) *Conn {
		return &Conn{ID: 2, ClosedBy: "broker", Outcome: OutcomeClosedAtOnce, ReconnectMS: reconnect}
	}
	base := func(c clients.Client, conns ...*Conn) CommandResult {
		return CommandResult{Client: c, ClientPID: 7, Connections: conns, MaxHoldMS: 3000, DurationMS: 30000, FirstConnectMS: 100,
			BootstrapEnv: []string{BootstrapVar}, Bootstrap: "127.0.0.1:9092", Closes: ClosesDriven, Rounds: []Round{{AtMS: 3100, Closed: 1}}}
	}
	tests := []struct {
		name   string
		res    CommandResult
		status string
		code   int
		want   []string
	}{
		{name: "held", res: base(franz, held), status: StatusHeld, code: 1,
			want: []string{"HELD: franz-go v1.22.3 held 1 of 1 connection the broker closed for up to 7s, past --max-hold 3s (CLOSE_WAIT, Recv-Q 1, to the end)"}},
		{name: "closed at once and reconnected", res: base(java, atOnce(3200), atOnce(-1)), status: StatusOK, code: 0,
			want: []string{"OK: kafka-clients 3.9.0 closed all 2 connections the broker closed at once (within 1s), reconnected after 1 of them; none held past --max-hold 3s"}},
		{name: "exited at once", res: func() CommandResult {
			r := base(clients.Client{})
			r.ClientPID, r.FirstConnectMS, r.Connections = 0, -1, nil
			r.Exit, r.StderrTail = &ExitInfo{Status: "exit status 2", Code: 2, AtMS: 12}, []string{"usage: svc BROKERS"}
			return r
		}(), status: StatusUnknown, code: 3,
			want: []string{"UNKNOWN: the command exited after 12ms with exit status 2 before connecting to the brokers; the last lines of its stderr: usage: svc BROKERS"}},
		{name: "connected elsewhere", res: func() CommandResult {
			r := base(clients.Client{})
			r.ClientPID, r.FirstConnectMS, r.Connections, r.OtherRemotes = 0, -1, nil, []string{"127.0.0.1:9999"}
			return r
		}(), status: StatusUnknown, code: 3,
			want: []string{"never connected to the brokers", "it connected to 127.0.0.1:9999 instead: it ignores the bootstrap list (127.0.0.1:9092)"}},
		{name: "no close made", res: func() CommandResult {
			r := base(java, &Conn{ID: 1, ClosedBy: "stopped"})
			return r
		}(), status: StatusUnknown, code: 3, want: []string{"UNKNOWN: the broker closed none of kafka-clients 3.9.0's connections", "request in flight at each of the 1 driven close"}},
		{name: "held, though it exited early", res: func() CommandResult {
			r := base(franz, held)
			r.Exit = &ExitInfo{Status: "exit status 1", AtMS: 9000}
			return r
		}(), status: StatusHeld, code: 1, want: []string{"HELD: franz-go"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.res
			judgeCommand(&res, CommandOptions{ConnectTimeout: time.Minute})
			if res.Status != tt.status || res.ExitCode != tt.code {
				t.Errorf("status %s exit %d, want %s %d: %s", res.Status, res.ExitCode, tt.status, tt.code, res.Verdict)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.Verdict, w) {
					t.Errorf("verdict %q lacks %q", res.Verdict, w)
				}
			}
			if tt.status == StatusHeld && (res.Fix == "" || res.Ends == "") {
				t.Errorf("a held verdict without the client's fix and end: %+v", res)
			}
		})
	}
}

// BenchmarkTreeRefresh is what following a command costs per sample on
// this host's /proc: every process's stat (refresh), and with sweep every
// environment too (every fifth sample, and each one once CMD exited).
func BenchmarkTreeRefresh(b *testing.B) {
	for _, sweep := range []bool{false, true} {
		b.Run(map[bool]string{false: "stat", true: "stat+environ"}[sweep], func(b *testing.B) {
			tr := newTree("/proc", os.Getpid(), MarkerVar+"=none", time.Now())
			for b.Loop() {
				tr.refresh(sweep)
			}
		})
	}
}

// BenchmarkSample is one sample of a command: the tree's refresh and a
// scan of its sockets (netstat.Scanner with the command's pids), here the
// test process's own.
func BenchmarkSample(b *testing.B) {
	sc := netstat.NewScanner("/proc")
	tr := newTree("/proc", os.Getpid(), MarkerVar+"=none", time.Now())
	for b.Loop() {
		tr.refresh(false)
		if _, err := sc.Scan(context.Background(), netstat.Query{PIDs: tr.live()}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTimelineDeferredRelease: a socket the client shut down itself, whose
// fd it releases a sample later (Java NIO closes a registered channel's fd
// at the Selector's next select), is closed at once, not held CLOSE after
// keepalive; one whose fd stays past AtOnce is held.
func TestTimelineDeferredRelease(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	const b0 = "127.0.0.1:9092"
	tl := newTimeline(start, []string{b0})
	tl.events([]BrokerEvent{
		{At: at(100), Kind: "accepted", Node: 0, Client: "127.0.0.1:40001", Conn: "c1", Broker: b0},
		{At: at(110), Kind: "accepted", Node: 0, Client: "127.0.0.1:40002", Conn: "c2", Broker: b0},
		{At: at(3000), Kind: "closed", Client: "127.0.0.1:40001", Conn: "c1", Reason: broker.ReasonIdle, IdleFor: 2900 * time.Millisecond},
		{At: at(3000), Kind: "closed", Client: "127.0.0.1:40002", Conn: "c2", Reason: broker.ReasonIdle, IdleFor: 2890 * time.Millisecond},
	})
	tl.sample(at(200), []netstat.Socket{sock(netstat.Established, 40001, b0, 11, 0), sock(netstat.Established, 40002, b0, 12, 0)}, nil)
	both := func(pid, fd int, inode uint64) bool { return pid == 42 && (inode == 11 || inode == 12) }
	if s := tl.sample(at(3200), nil, both); s.HeldClose != 2 {
		t.Errorf("sample after the close: %+v, want both fds seen holding a socket in no table", s)
	}
	second := func(pid, fd int, inode uint64) bool { return pid == 42 && inode == 12 }
	tl.sample(at(3400), nil, second)
	tl.sample(at(6000), nil, second)
	tl.finish(3*time.Second, 7000)
	if c := tl.conns[0]; c.Outcome != OutcomeClosedAtOnce || c.Held || c.GoneMS != 3400 {
		t.Errorf("fd released 200 ms after the socket left the tables: %+v, want closed at once", c)
	}
	if c := tl.conns[1]; c.Outcome != OutcomeHeldClose || c.HeldCloseMS != 2800 {
		t.Errorf("fd held for 2.8 s: %+v, want held CLOSE", c)
	}
}

// TestFirstHeldClose: of the connections keepalive reset into held CLOSE,
// the one seen so first; none when no connection got there.
func TestFirstHeldClose(t *testing.T) {
	r := &CommandResult{Connections: []*Conn{
		{Outcome: OutcomeHeldClose, HeldCloseAtMS: 9000},
		{Outcome: OutcomeHeldCloseWait, HeldCloseAtMS: 0},
		{Outcome: OutcomeHeldClose, HeldCloseAtMS: 4000},
	}}
	if c := r.FirstHeldClose(); c != r.Connections[2] {
		t.Errorf("FirstHeldClose = %+v, want the one held CLOSE at 4000 ms", c)
	}
	r.Connections = r.Connections[1:2]
	if c := r.FirstHeldClose(); c != nil {
		t.Errorf("FirstHeldClose = %+v with no held CLOSE, want nil", c)
	}
}

// TestTimelinePortReused: a client that closes a connection the broker
// closed and reconnects from the same port (Linux often gives it back) has
// two connections at one address. Each keeps its own story: the first,
// held in CLOSE_WAIT and then closed, is not "held to the end" for want of
// a sample without a socket at its address, and does not take the second
// one's socket; one held CLOSE by its fd stays held while its port serves
// a new connection. CI's race run met the first case with Java's blocking
// callback.
func TestTimelinePortReused(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	const b0 = "127.0.0.1:9092"
	tl := newTimeline(start, []string{b0})
	ev := []BrokerEvent{
		{At: at(100), Kind: "accepted", Node: 0, Client: "127.0.0.1:40001", Broker: b0, Conn: "a1"},
		{At: at(110), Kind: "accepted", Node: 0, Client: "127.0.0.1:40002", Broker: b0, Conn: "b1"},
		{At: at(3000), Kind: "closed", Client: "127.0.0.1:40001", Reason: broker.ReasonIdle, IdleFor: 2900 * time.Millisecond, Conn: "a1"},
		{At: at(3000), Kind: "closed", Client: "127.0.0.1:40002", Reason: broker.ReasonIdle, IdleFor: 2890 * time.Millisecond, Conn: "b1"},
	}
	tl.events(ev)
	tl.sample(at(200), []netstat.Socket{sock(netstat.Established, 40001, b0, 11, 0), sock(netstat.Established, 40002, b0, 12, 0)}, nil)
	tl.sample(at(3200), []netstat.Socket{sock(netstat.CloseWait, 40001, b0, 11, 1), sock(netstat.CloseWait, 40002, b0, 12, 1)}, nil)
	// Keepalive resets the second (its fd stays); the first is still
	// in CLOSE_WAIT.
	heldB := func(pid, fd int, inode uint64) bool { return pid == 42 && inode == 12 }
	tl.sample(at(9000), []netstat.Socket{sock(netstat.CloseWait, 40001, b0, 11, 1)}, heldB)
	// The client closes the first and reconnects from both ports.
	ev = append(ev,
		BrokerEvent{At: at(12000), Kind: "closed", Client: "127.0.0.1:40001", Reason: broker.ReasonClientClosed, Conn: "a1"},
		BrokerEvent{At: at(12010), Kind: "accepted", Node: 0, Client: "127.0.0.1:40001", Broker: b0, Conn: "a2"},
		BrokerEvent{At: at(12020), Kind: "accepted", Node: 0, Client: "127.0.0.1:40002", Broker: b0, Conn: "b2"},
	)
	tl.events(ev)
	tl.sample(at(12100), []netstat.Socket{sock(netstat.Established, 40001, b0, 21, 0), sock(netstat.Established, 40002, b0, 22, 0)}, heldB)
	ev = append(ev,
		BrokerEvent{At: at(15000), Kind: "closed", Client: "127.0.0.1:40001", Reason: broker.ReasonIdle, Conn: "a2"},
		BrokerEvent{At: at(15000), Kind: "closed", Client: "127.0.0.1:40002", Reason: broker.ReasonIdle, Conn: "b2"},
	)
	tl.events(ev)
	tl.sample(at(15200), nil, heldB)
	tl.finish(3*time.Second, 16000)

	if len(tl.conns) != 4 {
		t.Fatalf("%d connections, want 4", len(tl.conns))
	}
	a1, b1, a2, b2 := tl.conns[0], tl.conns[1], tl.conns[2], tl.conns[3]
	if a1.Outcome != OutcomeClosedLater || a1.GoneMS != 12100 || a1.CloseWaitMS != 5800 || a1.HeldCloseMS != 0 {
		t.Errorf("first connection from 40001: %+v (outcome %q), want held CLOSE_WAIT 5.8 s, then closed, gone at 12100", *a1, a1.Outcome)
	}
	if b1.Outcome != OutcomeHeldClose || b1.GoneMS != -1 || b1.HeldCloseMS != 6200 {
		t.Errorf("first connection from 40002: %+v (outcome %q), want held CLOSE from 9000 to the end", *b1, b1.Outcome)
	}
	for _, c := range []*Conn{a2, b2} {
		if c.Outcome != OutcomeClosedAtOnce || c.inode != uint64(20+c.ID-2) || c.CloseWaitMS != 0 {
			t.Errorf("second connection %s: %+v (outcome %q), want its own socket, closed at once", c, *c, c.Outcome)
		}
	}
}
