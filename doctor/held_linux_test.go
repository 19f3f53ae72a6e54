package doctor

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/internal/sockettest"
	"github.com/kdiag/kdiag/netstat"
)

// TestCloseInProgressIsNotHeld: a socket in CLOSE that this process still
// holds when doctor scans, as Java NIO leaves one between a channel's close
// and its selector's next select, is held CLOSE only if the fd still holds
// it when doctor looks again. Closed meanwhile (the test closes it during
// doctor's recheck wait), it is neither counted nor a finding, and a note
// says so; still open, it is both.
func TestCloseInProgressIsNotHeld(t *testing.T) {
	for _, release := range []bool{true, false} {
		b := sockettest.NewBroker(t)
		c := b.Connect("127.0.0.1", 1)[0]
		b.ClientShutdown(c)
		pid := os.Getpid()
		var waits []time.Duration
		o := Options{Query: netstat.Query{PIDs: []int{pid}}, ThreadSamples: 1,
			Sleep: func(ctx context.Context, d time.Duration) error {
				waits = append(waits, d)
				if release && len(waits) == 1 {
					return c.Client.Close()
				}
				return nil
			}}
		rep, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		var p *Process
		for i := range rep.Processes {
			if rep.Processes[i].PID == pid {
				p = &rep.Processes[i]
			}
		}
		if p == nil {
			t.Fatalf("release %v: doctor --pid %d does not list the process: %+v", release, pid, rep)
		}
		if len(waits) == 0 || waits[0] != 200*time.Millisecond {
			t.Errorf("release %v: doctor waited %v, want a 200ms recheck first", release, waits)
		}
		held := 0
		for _, f := range p.Findings {
			if f.ID == analyzer.KindHeldClosed {
				held++
			}
		}
		note := strings.Join(rep.Notes, "\n")
		switch {
		case release && (p.Sockets["CLOSE"] != 0 || held != 0 || !strings.Contains(note, "1 socket in state CLOSE closed by the process within 200ms")):
			t.Errorf("a close in progress: sockets %v, %d held-closed findings, notes %q; want none counted, no finding, a note", p.Sockets, held, rep.Notes)
		case !release && (p.Sockets["CLOSE"] != 1 || held != 1 || strings.Contains(note, "close in progress")):
			t.Errorf("a held CLOSE socket: sockets %v, %d held-closed findings, notes %q; want 1 counted and its finding", p.Sockets, held, rep.Notes)
		}
	}
}
