package analyzer

// The series in this file are synthetic: built in the test to pin one edge
// case each. Series recorded from real runs are in testdata/*.jsonl and are
// exercised in recorded_test.go.

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/netstat"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

var (
	broker1 = netip.MustParseAddrPort("10.0.0.1:9092")
	broker2 = netip.MustParseAddrPort("10.0.0.2:9092")
)

// proc is a process of the synthetic series.
func proc(pid int, name string, start time.Time) netstat.Process {
	return netstat.Process{PID: pid, Name: name, Cmdline: name, StartTime: start}
}

// snap builds a snapshot at t0+sec holding, for each entry of cw, that many
// CLOSE_WAIT sockets (inodes base..base+n-1, toward broker1) of the process,
// and est ESTABLISHED sockets toward broker2.
type spec struct {
	p        netstat.Process
	cw, est  int
	inode    uint64 // first CLOSE_WAIT inode: stable inodes keep first-seen
	recvQ    uint32
	age      time.Duration
	hasAge   bool
	portBase uint16
}

func snap(sec float64, specs ...spec) netstat.Snapshot {
	s := netstat.Snapshot{Time: t0.Add(time.Duration(sec * float64(time.Second))), Source: "netlink"}
	for _, sp := range specs {
		s.Processes = append(s.Processes, sp.p)
		for i := range sp.cw {
			s.Sockets = append(s.Sockets, netstat.Socket{
				Family: netstat.IPv4, State: netstat.CloseWait,
				Local:  netip.AddrPortFrom(netip.MustParseAddr("10.0.0.9"), 40000+sp.portBase+uint16(i)),
				Remote: broker1, RecvQ: sp.recvQ, Inode: sp.inode + uint64(i),
				Age: sp.age, HasAge: sp.hasAge, PID: sp.p.PID, FD: 10 + i,
			})
		}
		for i := range sp.est {
			s.Sockets = append(s.Sockets, netstat.Socket{
				Family: netstat.IPv4, State: netstat.Established,
				Local:  netip.AddrPortFrom(netip.MustParseAddr("10.0.0.9"), 50000+sp.portBase+uint16(i)),
				Remote: broker2, Inode: 900000 + sp.inode + uint64(i), PID: sp.p.PID, FD: 1000 + i,
			})
		}
	}
	return s
}

func TestFitVerdicts(t *testing.T) {
	opts := Options{}
	rng := rand.New(rand.NewPCG(1, 2))
	series := func(n int, step time.Duration, f func(i int) int) ([]time.Time, []int) {
		var ts []time.Time
		var cs []int
		for i := range n {
			ts = append(ts, t0.Add(time.Duration(i)*step))
			cs = append(cs, f(i))
		}
		return ts, cs
	}
	tests := []struct {
		name string
		n    int
		step time.Duration
		f    func(i int) int
		want Verdict
	}{
		{"flat", 60, time.Second, func(int) int { return 40 }, Steady},
		{"exact line up 1 per sample", 60, time.Second, func(i int) int { return i }, Growing},
		{"exact line down", 60, time.Second, func(i int) int { return 100 - i }, Draining},
		{"noise around a level", 120, time.Second, func(int) int { return 100 + rng.IntN(11) - 5 }, Steady},
		{"slow leak under noise", 600, time.Second, func(i int) int { return 100 + i/20 + rng.IntN(7) - 3 }, Growing},
		{"drift of one socket is not a leak", 60, time.Second, func(i int) int { return 3 + i/59 }, Steady},
		{"too few samples", 4, 20 * time.Second, func(i int) int { return i * 10 }, TooShort},
		{"too short a window", 20, time.Second, func(i int) int { return i * 10 }, TooShort},
		{"one burst then flat", 120, time.Second, func(i int) int {
			if i < 2 {
				return 0
			}
			return 50
		}, Steady},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, cs := series(tc.n, tc.step, tc.f)
			got := Fit(ts, cs, opts)
			if got.Verdict != tc.want {
				t.Errorf("verdict = %v, want %v (trend %+v)", got.Verdict, tc.want, got)
			}
		})
	}
}

// "one burst then flat" above is Steady only because the t test weighs the
// step against the flat run; check the slope of an exact line too.
func TestFitSlopePerMinute(t *testing.T) {
	var ts []time.Time
	var cs []int
	for i := range 61 {
		ts = append(ts, t0.Add(time.Duration(i)*time.Second))
		cs = append(cs, 2*i) // 2 per second = 120 per minute
	}
	got := Fit(ts, cs, Options{})
	if d := got.PerMinute - 120; d > 1e-9 || d < -1e-9 {
		t.Errorf("PerMinute = %v, want 120", got.PerMinute)
	}
	if got.StdErr != 0 || math.Abs(got.Change-120) > 1e-9 || got.First != 0 || got.Last != 120 {
		t.Errorf("trend = %+v", got)
	}
}

func TestAnalyzeLeakFinding(t *testing.T) {
	app := proc(4242, "java", t0.Add(-time.Hour))
	app.Cmdline = "java -cp kafka-clients-3.9.0.jar App"
	app.Kafka = "kafka-clients on class path"
	var snaps []netstat.Snapshot
	for i := range 61 {
		// 1 new CLOSE_WAIT per second, FIN unread (Recv-Q 1), tcp_info age.
		snaps = append(snaps, snap(float64(i), spec{p: app, cw: i, inode: 1000, recvQ: 1, est: 3}))
	}
	a := Analyze(snaps, Options{IsBroker: isBroker1})
	if len(a.Processes) != 1 {
		t.Fatalf("processes = %d, want 1", len(a.Processes))
	}
	p := a.Processes[0]
	if p.CloseWait.Verdict != Growing || p.CloseWait.Last != 60 {
		t.Errorf("close-wait trend = %+v", p.CloseWait)
	}
	if p.Established.Verdict != Steady {
		t.Errorf("established verdict = %v, want steady", p.Established.Verdict)
	}
	if len(p.CloseWaitSockets) != 60 {
		t.Fatalf("live close-wait = %d, want 60", len(p.CloseWaitSockets))
	}
	// Without tcp_info ages the oldest is the one first seen at t0+1s.
	oldest, _ := p.OldestCloseWait()
	if !oldest.FirstSeen.Equal(t0.Add(time.Second)) || oldest.Inode != 1000 {
		t.Errorf("oldest = %+v", oldest)
	}
	if len(a.Findings) != 1 {
		t.Fatalf("findings = %+v", a.Findings)
	}
	f := a.Findings[0]
	if f.Severity != Critical || f.Kind != KindLeak {
		t.Errorf("finding = %v %v", f.Severity, f.Kind)
	}
	text := f.Summary + "\n" + strings.Join(f.Details, "\n")
	for _, want := range []string{"java (pid 4242)", "0 → 60", "+60.0/min", "10.0.0.1:9092 (60 CLOSE_WAIT, 0 ESTABLISHED, broker)", "60 of 60: Recv-Q 1: the FIN was never read", "kafka-clients on class path"} {
		if !strings.Contains(text, want) {
			t.Errorf("finding text lacks %q:\n%s", want, text)
		}
	}
	// Sixty connections to one broker, growing, are many clients (one
	// holds a connection or two to a broker): that comes first; then, as
	// a JVM reads every connection, a blocked network thread.
	if len(f.Causes) < 3 || f.Causes[0].ID != "clients-not-closed" || !strings.Contains(f.Causes[1].Text, "network thread is blocked") || !cmp.Equal(f.Causes[2].Rules, []string{"KD101", "KD102"}) {
		t.Errorf("causes = %+v", f.Causes)
	}
}

func TestAnalyzeNonJVMUnreadFINBlamesIdleClose(t *testing.T) {
	app := proc(77, "app", t0)
	var snaps []netstat.Snapshot
	for i := range 40 {
		snaps = append(snaps, snap(float64(i), spec{p: app, cw: i / 2, inode: 1, recvQ: 1}))
	}
	a := Analyze(snaps, Options{})
	if len(a.Findings) != 1 {
		t.Fatalf("findings = %+v", a.Findings)
	}
	// Nineteen connections to one broker, growing: clients not closed
	// first, then the idle close a client that does not read would hold.
	c := a.Findings[0].Causes
	if len(c) < 3 || c[0].ID != "clients-not-closed" || !cmp.Equal(c[1].Rules, []string{"KD101", "KD102"}) || !strings.Contains(c[2].Text, "Sarama, franz-go and kafka-go") {
		t.Errorf("causes = %+v", c)
	}
}

func TestAnalyzeRecvQZeroBlamesNotClosed(t *testing.T) {
	app := proc(77, "app", t0)
	var snaps []netstat.Snapshot
	for i := range 40 {
		snaps = append(snaps, snap(float64(i), spec{p: app, cw: i, inode: 1, recvQ: 0}))
	}
	f := Analyze(snaps, Options{}).Findings
	if len(f) != 1 || !strings.Contains(f[0].Causes[0].Text, "did not close") && !strings.Contains(f[0].Causes[0].Text, "without close()") {
		t.Fatalf("findings = %+v", f)
	}
	if !strings.Contains(strings.Join(f[0].Details, "\n"), "39 of 39: Recv-Q 0: the FIN was read (EOF) but the socket was never closed") {
		t.Errorf("details = %q", f[0].Details)
	}
}

func TestAnalyzeHeldUsesTCPInfoAge(t *testing.T) {
	app := proc(10, "svc", t0)
	var snaps []netstat.Snapshot
	for i := range 40 {
		// 20 sockets held, the FIN arrived 10 minutes before the first sample.
		snaps = append(snaps, snap(float64(i), spec{p: app, cw: 20, inode: 1, recvQ: 1, hasAge: true, age: 10*time.Minute + time.Duration(i)*time.Second}))
	}
	a := Analyze(snaps, Options{})
	if len(a.Findings) != 1 || a.Findings[0].Kind != KindHeld || a.Findings[0].Severity != Warning {
		t.Fatalf("findings = %+v", a.Findings)
	}
	oldest, _ := a.Processes[0].OldestCloseWait()
	if got := oldest.AgeAt(a.End); got != 10*time.Minute+39*time.Second {
		t.Errorf("oldest age = %v", got)
	}
	if want := t0.Add(-10 * time.Minute); !oldest.Since().Equal(want) {
		t.Errorf("since = %v, want %v", oldest.Since(), want)
	}
}

func TestAnalyzeHeldYoungIsNoFinding(t *testing.T) {
	app := proc(10, "svc", t0)
	var snaps []netstat.Snapshot
	for i := range 40 {
		snaps = append(snaps, snap(float64(i), spec{p: app, cw: 20, inode: 1, recvQ: 1}))
	}
	if f := Analyze(snaps, Options{}).Findings; len(f) != 0 {
		t.Errorf("findings = %+v, want none (39s < StuckAge)", f)
	}
}

func TestAnalyzeDraining(t *testing.T) {
	app := proc(10, "svc", t0)
	var snaps []netstat.Snapshot
	for i := range 40 {
		// The newest sockets close first: inodes 1..(40-i) stay.
		snaps = append(snaps, snap(float64(i), spec{p: app, cw: 40 - i, inode: 1}))
	}
	a := Analyze(snaps, Options{})
	p := a.Processes[0]
	if p.CloseWait.Verdict != Draining || p.Closed != 39 || len(p.CloseWaitSockets) != 1 {
		t.Errorf("trend %+v closed %d live %d", p.CloseWait, p.Closed, len(p.CloseWaitSockets))
	}
	if len(a.Findings) != 1 || a.Findings[0].Kind != KindDraining || len(a.Findings[0].Causes) != 0 {
		t.Errorf("findings = %+v", a.Findings)
	}
}

func TestAnalyzePIDReuseIsANewProcess(t *testing.T) {
	old := proc(500, "old", t0.Add(-time.Hour))
	reborn := proc(500, "new", t0.Add(20*time.Second))
	var snaps []netstat.Snapshot
	for i := range 40 {
		p := old
		if i >= 20 {
			p = reborn
		}
		snaps = append(snaps, snap(float64(i), spec{p: p, cw: 5, inode: uint64(1 + 100*(i/20))}))
	}
	a := Analyze(snaps, Options{})
	if len(a.Processes) != 2 {
		t.Fatalf("processes = %d, want 2 (pid reused)", len(a.Processes))
	}
	byName := map[string]ProcessSeries{}
	for _, p := range a.Processes {
		byName[p.Name()] = p
	}
	if o := byName["old"]; len(o.Points) != 40 || o.Points[39].Counts.Get(netstat.CloseWait) != 0 || o.Closed != 5 {
		t.Errorf("old: points %d closed %d", len(o.Points), o.Closed)
	}
	if n := byName["new"]; len(n.Points) != 20 || !n.FirstSeen.Equal(t0.Add(20*time.Second)) || len(n.CloseWaitSockets) != 5 {
		t.Errorf("new: points %d first %v live %d", len(n.Points), n.FirstSeen, len(n.CloseWaitSockets))
	}
}

func TestAnalyzeConnectionLeak(t *testing.T) {
	app := proc(9, "app", t0)
	var snaps []netstat.Snapshot
	for i := range 60 {
		snaps = append(snaps, snap(float64(i), spec{p: app, est: i, inode: 1}))
	}
	f := Analyze(snaps, Options{}).Findings
	if len(f) != 1 || f[0].Kind != KindConnLeak || !strings.Contains(f[0].Causes[0].Text, "never closed") {
		t.Fatalf("findings = %+v", f)
	}
}

func TestAnalyzeUnattributed(t *testing.T) {
	var snaps []netstat.Snapshot
	for i := range 40 {
		s := snap(float64(i), spec{p: proc(0, "", time.Time{}), cw: i, inode: 1})
		s.Processes = nil
		snaps = append(snaps, s)
	}
	a := Analyze(snaps, Options{})
	if len(a.Processes) != 1 || a.Processes[0].Name() != "(unattributed)" || len(a.Findings) != 1 {
		t.Fatalf("processes %+v findings %+v", a.Processes, a.Findings)
	}
	if !strings.Contains(a.Findings[0].Details[0], "run kdiag as root") {
		t.Errorf("details = %q", a.Findings[0].Details)
	}
}

func TestTrackerWindowDropsOldSamples(t *testing.T) {
	app := proc(1, "a", t0)
	gone := proc(2, "gone", t0)
	tr := NewTracker(Options{Window: 30 * time.Second})
	for i := range 100 {
		specs := []spec{{p: app, cw: 3, inode: 1}}
		if i < 10 {
			specs = append(specs, spec{p: gone, cw: 1, inode: 50})
		}
		s := snap(float64(i), specs...)
		tr.Add(&s)
	}
	a := tr.Analysis()
	if a.Samples != 31 || !a.Start.Equal(t0.Add(69*time.Second)) {
		t.Errorf("samples %d start %v", a.Samples, a.Start)
	}
	if len(a.Processes) != 1 || len(a.Processes[0].Points) != 31 {
		t.Fatalf("processes = %+v", a.Processes)
	}
	// First seen stays the first sample that saw the socket, even out of the window.
	if c, _ := a.Processes[0].OldestCloseWait(); !c.FirstSeen.Equal(t0) {
		t.Errorf("first seen = %v", c.FirstSeen)
	}
}

func TestTrackerIgnoresOutOfOrder(t *testing.T) {
	tr := NewTracker(Options{})
	a, b := snap(10), snap(5)
	tr.Add(&a)
	tr.Add(&b)
	if tr.Samples() != 1 {
		t.Errorf("samples = %d, want 1", tr.Samples())
	}
}

func TestMaxRemotesOverflow(t *testing.T) {
	s := netstat.Snapshot{Time: t0, Processes: []netstat.Process{proc(3, "srv", t0)}}
	for i := range 10 {
		s.Sockets = append(s.Sockets, netstat.Socket{State: netstat.Established, PID: 3,
			Remote: netip.AddrPortFrom(netip.MustParseAddr("10.1.1.1"), uint16(30000+i)), Inode: uint64(i + 1)})
	}
	s.Sockets = append(s.Sockets, netstat.Socket{State: netstat.CloseWait, PID: 3, Remote: broker1, Inode: 99})
	a := Analyze([]netstat.Snapshot{s}, Options{MaxRemotes: 4, IsBroker: isBroker1})
	var names []string
	total := 0
	for _, r := range a.Processes[0].Remotes {
		names = append(names, r.Name())
		total += r.Last.Total()
	}
	if len(names) != 6 || total != 11 || names[0] != broker1.String() {
		t.Errorf("remotes = %v (total %d), want broker first, 4 tracked + other", names, total)
	}
}

func isBroker1(ap netip.AddrPort) bool { return ap == broker1 }

// TestHeldCloseIsTheSameLeak: CLOSE_WAIT sockets that a keepalive RST turns
// into held CLOSE ones (same inodes, no remote in the snapshot) stay the
// same sockets: the leak does not drain, none is counted closed, they keep
// their broker, and their CLOSE_WAIT age stays what tcp_info said.
func TestHeldCloseIsTheSameLeak(t *testing.T) {
	p := proc(42, "app", t0.Add(-time.Hour))
	tr := NewTracker(Options{IsBroker: isBroker1})
	for i := range 40 {
		s := snap(float64(i), spec{p: p, cw: 1 + i/4, inode: 100, age: time.Duration(i) * time.Second, hasAge: true})
		if i >= 30 {
			// The first five went to CLOSE: reset, held, addresses unknown.
			for j := range s.Sockets {
				if x := &s.Sockets[j]; x.Inode < 105 {
					x.State, x.Local, x.Remote, x.HasAge, x.Age = netstat.Close, netip.AddrPort{}, netip.AddrPort{}, false, 0
				}
			}
		}
		tr.Add(&s)
	}
	a := tr.Analysis()
	ps := a.Processes[0]
	if ps.CloseWait.Verdict != Growing || ps.CloseWait.Last != 10 {
		t.Errorf("leak verdict %v, last %d; want growing with 10 (CLOSE_WAIT plus held CLOSE)", ps.CloseWait.Verdict, ps.CloseWait.Last)
	}
	if ps.Closed != 0 {
		t.Errorf("%d sockets counted closed, want 0: they are held", ps.Closed)
	}
	held := 0
	for _, c := range ps.CloseWaitSockets {
		if c.Held {
			held++
			if c.Remote != broker1 || c.HeldSince != t0.Add(30*time.Second) {
				t.Errorf("held socket %d: remote %v since %v, want %v since %v", c.Inode, c.Remote, c.HeldSince, broker1, t0.Add(30*time.Second))
			}
		}
	}
	if held != 5 || len(ps.CloseWaitSockets) != 10 {
		t.Errorf("%d held of %d sockets, want 5 of 10", held, len(ps.CloseWaitSockets))
	}
	if len(ps.Remotes) == 0 || ps.Remotes[0].Remote != broker1 || ps.Remotes[0].Last.Leaked() != 5 {
		t.Errorf("remotes %+v: want broker1 first, its 5 CLOSE_WAIT (the held ones have no remote in the snapshot)", ps.Remotes)
	}
}

// TestAgeBounds: a socket whose tcp_info age is a bound is not Exact, and
// the bounds the samples give are kept at their tightest.
func TestAgeBounds(t *testing.T) {
	p := proc(42, "app", t0.Add(-time.Hour))
	tr := NewTracker(Options{})
	for i, b := range []struct {
		age  time.Duration
		span uint32
	}{{10 * time.Second, 30000}, {time.Second, 60000}} {
		s := snap(float64(10*i), spec{p: p, cw: 1, inode: 7, age: b.age, hasAge: true})
		s.Sockets[0].AgeSpan = b.span
		tr.Add(&s)
	}
	c := tr.Analysis().Processes[0].CloseWaitSockets[0]
	// Sample 1 at t0: FIN between t0-40s and t0-10s. Sample 2 at t0+10s:
	// between t0-51s and t0+9s. So t0-40s to t0-10s.
	if c.Exact() || !c.Since().Equal(t0.Add(-10*time.Second)) || !c.FINEarliest.Equal(t0.Add(-40*time.Second)) {
		t.Errorf("exact %v, since %v, earliest %v; want a bound from t0-40s to t0-10s", c.Exact(), c.Since(), c.FINEarliest)
	}
	if hi, ok := c.MaxAgeAt(t0.Add(10 * time.Second)); !ok || hi != 50*time.Second {
		t.Errorf("MaxAgeAt = %v, %v; want 50s", hi, ok)
	}
}

// TestPointsBounded: a process's series of more than MaxPoints samples is
// given in MaxPoints points, in time order from its first sample, with a
// one-sample spike kept; a shorter one has a point per sample.
func TestPointsBounded(t *testing.T) {
	for _, n := range []int{MaxPoints - 1, MaxPoints, MaxPoints + 1, 3*MaxPoints + 7} {
		tr := NewTracker(Options{Window: 24 * time.Hour})
		spike := n * 2 / 3
		for i := range n {
			s := &netstat.Snapshot{Time: t0.Add(time.Duration(i) * time.Second), Processes: []netstat.Process{proc(5, "app", t0)}}
			cw := 1
			if i == spike {
				cw = 40
			}
			for j := range cw {
				s.Sockets = append(s.Sockets, netstat.Socket{State: netstat.CloseWait, PID: 5, Inode: uint64(j + 1)})
			}
			tr.Add(s)
		}
		pts := tr.Analysis().Processes[0].Points
		if want := min(n, MaxPoints); len(pts) != want {
			t.Errorf("%d samples: %d points, want %d", n, len(pts), want)
		}
		top := 0
		for i, p := range pts {
			if i > 0 && !p.Time.After(pts[i-1].Time) {
				t.Errorf("%d samples: point %d at %v, not after %v", n, i, p.Time, pts[i-1].Time)
			}
			top = max(top, p.Counts.Get(netstat.CloseWait))
		}
		if top != 40 || !pts[0].Time.Equal(t0) {
			t.Errorf("%d samples: highest point %d CLOSE_WAIT (want the spike's 40), first at %v", n, top, pts[0].Time)
		}
	}
}
