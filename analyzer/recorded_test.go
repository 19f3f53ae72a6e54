package analyzer

// The series in this file are recorded from real runs: `kdiag watch
// --record` sampling the leaker helper (internal/cmd/watch/testdata/leaker)
// through the real Scanner, made with scripts/record-leak.sh:
//
//	INTERVAL=1s STEP=30 GROW=1 HOLD=25 DRAIN=0 scripts/record-leak.sh analyzer/testdata/held.jsonl
//	INTERVAL=1s STEP=5 GROW=12 HOLD=6 DRAIN=6 PER=10 scripts/record-leak.sh analyzer/testdata/grow-hold-drain.jsonl

import (
	"strings"
	"testing"
	"time"

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
