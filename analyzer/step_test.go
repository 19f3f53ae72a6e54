package analyzer

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/netstat"
)

// stepSeries is a client with 6 connections to a broker that closes 5 of
// them at once at 10 s and the sixth at 20 s: each leaves ESTABLISHED for
// CLOSE_WAIT. growthSeries is a client that keeps 1 connection and gets one
// new CLOSE_WAIT every 2 s (it opens a connection the broker closes, and
// never closes it).
func stepSeries() []netstat.Snapshot {
	app := proc(40, "app", t0)
	var out []netstat.Snapshot
	for i := range 40 {
		cw, est := 0, 6
		switch {
		case i >= 20:
			cw, est = 6, 0
		case i >= 10:
			cw, est = 5, 1
		}
		out = append(out, snap(float64(i), spec{p: app, cw: cw, est: est, inode: 1, recvQ: 1}))
	}
	return out
}

func growthSeries() []netstat.Snapshot {
	app := proc(41, "app", t0)
	var out []netstat.Snapshot
	for i := range 40 {
		out = append(out, snap(float64(i), spec{p: app, cw: i / 2, est: 1, inode: 1, recvQ: 1}))
	}
	return out
}

func TestStepIsNotALeak(t *testing.T) {
	for _, tc := range []struct {
		name    string
		series  []netstat.Snapshot
		verdict Verdict
		kind    string
	}{
		{"5 at once, a sixth later, of 6 connections", stepSeries(), Step, KindStep},
		{"one new CLOSE_WAIT every 2 s", growthSeries(), Growing, KindLeak},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Analyze(tc.series, Options{})
			p := a.Processes[0]
			if p.CloseWait.Verdict != tc.verdict {
				t.Errorf("verdict %v (%+v), want %v", p.CloseWait.Verdict, p.CloseWait, tc.verdict)
			}
			if len(a.Findings) == 0 || a.Findings[0].Kind != tc.kind {
				t.Fatalf("findings %+v, want %s first", a.Findings, tc.kind)
			}
			if tc.verdict == Step && a.Findings[0].Severity == Critical {
				t.Errorf("a bounded step reported CRITICAL: %s", a.Findings[0].Summary)
			}
		})
	}
}

// TestStepAndGrowthLive makes both shapes with real sockets on loopback and
// samples them with the real scanner: a listener that closes, when the test
// says, 5 then 1 of the 6 connections a client holds (a step); and one that
// closes each of a stream of new connections at once (growth).
func TestStepAndGrowthLive(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	accepted := make(chan net.Conn, 256)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		return c
	}
	serverSide := func() net.Conn {
		select {
		case c := <-accepted:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no connection accepted in 10s")
		}
		return nil
	}

	s := netstat.NewScanner("/proc")
	q := netstat.Query{States: netstat.States(netstat.CloseWait, netstat.Established), PIDs: []int{os.Getpid()}, RemotePorts: []uint16{port}}
	opts := Options{MinDuration: 2 * time.Second, MinSamples: 6}
	sample := func(tr *Tracker) {
		snap, err := s.Scan(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		tr.Add(snap)
		time.Sleep(50 * time.Millisecond)
	}
	// run samples for d, calling each of at between samples once its time has come.
	run := func(tr *Tracker, d time.Duration, at map[time.Duration]func()) {
		start := time.Now()
		for time.Since(start) < d {
			for when, f := range at {
				if time.Since(start) >= when {
					f()
					delete(at, when)
				}
			}
			sample(tr)
		}
	}
	self := func(a *Analysis) *ProcessSeries {
		for i := range a.Processes {
			if a.Processes[i].Key.PID == os.Getpid() {
				return &a.Processes[i]
			}
		}
		t.Fatalf("this process is not in the analysis: %+v", a.Processes)
		return nil
	}

	t.Run("step", func(t *testing.T) {
		var servers []net.Conn
		for range 6 {
			dial()
			servers = append(servers, serverSide())
		}
		tr := NewTracker(opts)
		run(tr, 4*time.Second, map[time.Duration]func(){
			time.Second: func() {
				for _, c := range servers[:5] {
					c.Close()
				}
			},
			2 * time.Second: func() { servers[5].Close() },
		})
		p := self(tr.Analysis())
		if p.CloseWait.Verdict != Step || p.CloseWait.Last != 6 {
			t.Errorf("verdict %v with %d CLOSE_WAIT at the end, want step with 6 (%+v)", p.CloseWait.Verdict, p.CloseWait.Last, p.CloseWait)
		}
		for _, c := range clients {
			c.Close()
		}
		clients = nil
	})

	t.Run("growth", func(t *testing.T) {
		// Counted from here: the step's sockets are closed.
		tr := NewTracker(opts)
		start := time.Now()
		next := time.Duration(0)
		for time.Since(start) < 4*time.Second {
			if time.Since(start) >= next {
				dial()
				serverSide().Close()
				next += 200 * time.Millisecond
			}
			sample(tr)
		}
		p := self(tr.Analysis())
		if p.CloseWait.Verdict != Growing {
			t.Errorf("verdict %v with %d CLOSE_WAIT at the end, want growing (%+v)", p.CloseWait.Verdict, p.CloseWait.Last, p.CloseWait)
		}
	})
}

// TestBrokerIdleFromFIN: sockets whose idle time before the FIN is known
// say the broker's idle timeout, in the finding.
func TestBrokerIdleFromFIN(t *testing.T) {
	var series []netstat.Snapshot
	for _, s := range stepSeries() {
		for j := range s.Sockets {
			if x := &s.Sockets[j]; x.State == netstat.CloseWait {
				x.IdleMS = uint32(2900 + 100*(j%3)) // 2.9 s to 3.1 s
			}
		}
		series = append(series, s)
	}
	a := Analyze(series, Options{})
	med, lo, hi, n, ok := BrokerIdle(&a.Processes[0])
	if !ok || n != 6 || med != 3*time.Second || lo != 2900*time.Millisecond || hi != 3100*time.Millisecond {
		t.Errorf("BrokerIdle = %v %v %v %d %v; want 3s from 2.9s to 3.1s over 6", med, lo, hi, n, ok)
	}
	want := "the peer closed 6 connections after ~3s idle (2.9s-3.1s)"
	var found bool
	for _, d := range a.Findings[0].Details {
		if strings.Contains(d, want) && strings.Contains(d, "kdiag lint --broker-idle-ms 3000") {
			found = true
		}
	}
	if !found {
		t.Errorf("finding details %q lack %q and the lint hint", a.Findings[0].Details, want)
	}
}
