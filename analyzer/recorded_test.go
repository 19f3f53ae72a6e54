package analyzer

// The series in this file are recorded from real runs: `kdiag watch
// --record` sampling the leaker helper (internal/cmd/watch/testdata/leaker)
// through the real Scanner, made with scripts/record-leak.sh:
//
//	INTERVAL=1s STEP=30 GROW=1 HOLD=25 DRAIN=0 scripts/record-leak.sh analyzer/testdata/held.jsonl
//	INTERVAL=1s STEP=5 GROW=12 HOLD=6 DRAIN=6 PER=10 scripts/record-leak.sh analyzer/testdata/grow-hold-drain.jsonl

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kdiag/kdiag/netstat"
	"github.com/kdiag/kdiag/record"
)

func loadRecording(t *testing.T, path string) []netstat.Snapshot {
	t.Helper()
	snaps, notes, err := record.ReadFile(path)
	if err != nil || len(notes) != 0 {
		t.Fatalf("%s: %v %v", path, err, notes)
	}
	return snaps
}

// leakerProc is the one process of the recordings.
func leakerProc(t *testing.T, a *Analysis) ProcessSeries {
	t.Helper()
	for _, p := range a.Processes {
		if p.Process.Name == "leaker" {
			return p
		}
	}
	t.Fatalf("no leaker process in %d processes", len(a.Processes))
	return ProcessSeries{}
}

func TestRecordedGrowHoldDrain(t *testing.T) {
	snaps := loadRecording(t, "testdata/grow-hold-drain.jsonl")
	// Split the phases by the count itself: up to the first sample at the
	// peak, at the peak, after it.
	peak, firstPeak, lastPeak := 0, 0, 0
	for i := range snaps {
		n := countState(&snaps[i], netstat.CloseWait)
		if n > peak {
			peak, firstPeak = n, i
		}
		if n == peak {
			lastPeak = i
		}
	}
	if peak != 60 {
		t.Fatalf("peak %d CLOSE_WAIT, want 60 (12 steps of 5)", peak)
	}
	opts := Options{MinDuration: 3 * time.Second, MinSamples: 5}
	for _, ph := range []struct {
		name  string
		snaps []netstat.Snapshot
		want  Verdict
	}{
		{"grow", snaps[:firstPeak+1], Growing},
		{"hold", snaps[firstPeak : lastPeak+1], Steady},
		{"drain", snaps[lastPeak:], Draining},
	} {
		p := leakerProc(t, Analyze(ph.snaps, opts))
		if p.CloseWait.Verdict != ph.want {
			t.Errorf("%s (%d samples): %v, want %v (%+v)", ph.name, len(ph.snaps), p.CloseWait.Verdict, ph.want, p.CloseWait)
		}
	}
	// Over the whole recording every CLOSE_WAIT was closed again.
	p := leakerProc(t, Analyze(snaps, opts))
	if p.Closed != 60 || len(p.CloseWaitSockets) != 0 || p.CloseWait.Last != 0 {
		t.Errorf("whole: closed %d, live %d, last %d", p.Closed, len(p.CloseWaitSockets), p.CloseWait.Last)
	}
}

func TestRecordedHeld(t *testing.T) {
	snaps := loadRecording(t, "testdata/held.jsonl")
	a := Analyze(snaps, Options{StuckAge: 10 * time.Second})
	p := leakerProc(t, a)
	if p.CloseWait.Last != 30 || p.CloseWait.Verdict == Growing || p.CloseWait.Verdict == Draining {
		t.Errorf("trend %+v: 30 opened at once and held is not a trend", p.CloseWait)
	}
	if len(a.Findings) != 1 || a.Findings[0].Kind != KindHeld {
		t.Fatalf("findings = %+v", a.Findings)
	}
	text := strings.Join(a.Findings[0].Details, "\n")
	if !strings.Contains(text, "30 of 30: Recv-Q 1") {
		t.Errorf("details = %s", text)
	}
	// Every socket was seen from the first sample after the burst to the end.
	oldest, _ := p.OldestCloseWait()
	if age := oldest.AgeAt(a.End); age < 20*time.Second {
		t.Errorf("oldest age %v, want over 20s of a 25s hold", age)
	}
}

func countState(s *netstat.Snapshot, st netstat.State) int {
	n := 0
	for _, sk := range s.Sockets {
		if sk.State == st {
			n++
		}
	}
	return n
}

// TestUnchangedSamplesSkipSockets checks that a Tracker given snapshots
// that serve the last dump again (Unchanged, with that dump's Dump number,
// as kdiag watch --events makes them) computes exactly what it computes
// from the same snapshots going through their sockets: the recorded
// series, each snapshot followed by two served again, 250 and 500 ms later
// with the ages advanced, fed once with the Dump numbers and once without.
func TestUnchangedSamplesSkipSockets(t *testing.T) {
	rec := loadRecording(t, "testdata/grow-hold-drain.jsonl")
	var series []netstat.Snapshot
	for i, s := range rec {
		s.Dump = uint64(i + 1)
		series = append(series, s)
		for _, d := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond} {
			c := s
			c.Time, c.Unchanged = s.Time.Add(d), true
			c.Sockets = slices.Clone(s.Sockets)
			for j := range c.Sockets {
				if c.Sockets[j].HasAge {
					c.Sockets[j].Age += d
				}
			}
			series = append(series, c)
		}
	}
	opts := Options{IsBroker: func(ap netip.AddrPort) bool { return ap.Port() == rec[0].Sockets[0].Local.Port() }, Window: 15 * time.Second}
	fast, slow := NewTracker(opts), NewTracker(opts)
	for i, s := range series {
		fast.Add(&s)
		s.Dump = 0
		slow.Add(&s)
		if d := cmp.Diff(slow.Current(), fast.Current(), cmpopts.IgnoreUnexported(CloseWaitSocket{}), cmpopts.EquateComparable(netip.AddrPort{}, netip.Addr{})); d != "" {
			t.Fatalf("sample %d: Current differs (-through sockets +skipping them):\n%s", i, d)
		}
	}
	if d := cmp.Diff(slow.Analysis(), fast.Analysis(), cmpopts.IgnoreUnexported(CloseWaitSocket{}), cmpopts.EquateComparable(netip.AddrPort{}, netip.Addr{})); d != "" {
		t.Errorf("Analysis differs (-through sockets +skipping them):\n%s", d)
	}
	if fast.Samples() != slow.Samples() || fast.Samples() < 3 {
		t.Errorf("samples: %d and %d", fast.Samples(), slow.Samples())
	}
}
