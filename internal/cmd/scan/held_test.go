//go:build linux

package scan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/internal/sockettest"
	"github.com/kdiag/kdiag/netstat"
)

// heldChild starts a child, in a network namespace of its own with
// tcp_fin_timeout 2 s, holding 4 CLOSE_WAIT sockets to one listener (the
// "broker") and an ESTABLISHED connection elsewhere, turns keepalive on
// for 3 of the CLOSE_WAIT sockets, and waits, bounded, until the peers'
// FIN_WAIT_2 sides have expired and the probes' RSTs have made those 3
// held CLOSE: 1 CLOSE_WAIT and 3 held CLOSE, as a Go client's leak a
// minute on.
func heldChild(t *testing.T) *sockettest.Child {
	t.Helper()
	c := sockettest.StartChild(t, sockettest.Spec{Established: 1, CloseWait: 4, KeepAlive: time.Second,
		DeferKeepAlive: true, FinTimeout: 2 * time.Second, NetNS: true})
	if err := c.StartKeepAliveOn(3); err != nil {
		t.Fatal(err)
	}
	s := netstat.NewScanner("/proc")
	s.NoCache = true
	defer s.Close()
	q := netstat.Query{States: netstat.States(netstat.CloseWait, netstat.Close), PIDs: []int{c.PID}}
	want := map[string]int{"CLOSE_WAIT": 1, "CLOSE": 3}
	for deadline := time.Now().Add(60 * time.Second); ; {
		snap, err := s.Scan(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, x := range snap.Sockets {
			got[x.State.String()]++
		}
		if cmp.Equal(want, got) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s the child's sockets are %v, want %v", got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestScanFiltersKeepHeldClose: --brokers, --remote and --port keep
// exactly the held CLOSE sockets of the process they select (a held
// socket has no remote to match), labelled in JSON, wide and the table,
// and the check counts them with the CLOSE_WAIT: 1 CLOSE_WAIT and 3 held
// CLOSE are CRITICAL above 2 with a filter as without (before, --brokers
// made it WARNING, 1). --state close-wait leaves them out and says so,
// once, on stderr.
func TestScanFiltersKeepHeldClose(t *testing.T) {
	c := heldChild(t)
	broker := c.CloseWait[0].Remote
	pid := strconv.Itoa(c.PID)
	var heldFDs []float64
	for _, s := range c.CloseWait[:3] {
		heldFDs = append(heldFDs, float64(s.FD))
	}
	// The child's fds need not ascend in the order it made the sockets
	// (12, 14, 13 happens): compared sorted, as the scan's are.
	slices.Sort(heldFDs)
	run := func(t *testing.T, args ...string) (string, string, error) {
		t.Helper()
		f, out, errOut := factory()
		f.Now = time.Now
		cmd := NewCmdScan(f, nil)
		cmd.SetArgs(append([]string{"--pid", pid}, args...))
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.Execute()
		return out.String(), errOut.String(), err
	}
	filters := [][]string{
		nil,
		{"--brokers", broker.String()},
		{"--remote", broker.String()},
		{"--port", strconv.Itoa(int(broker.Port()))},
	}
	for _, fl := range filters {
		name := "no filter"
		if fl != nil {
			name = fl[0]
		}
		t.Run(name, func(t *testing.T) {
			out, errOut, err := run(t, append(slices.Clone(fl), "-o", "json")...)
			if err != nil {
				t.Fatalf("%v; stderr %s", err, errOut)
			}
			var doc struct {
				Sockets []map[string]any `json:"sockets"`
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatal(err)
			}
			var held []float64
			cw := 0
			for _, s := range doc.Sockets {
				switch s["state"] {
				case "CLOSE":
					held = append(held, s["fd"].(float64))
					kept, _ := s["kept_by_process"].(bool)
					if kept != (fl != nil) || s["remote"] != "" {
						t.Errorf("held socket %v: kept_by_process %v, want %v, and no remote", s, kept, fl != nil)
					}
				case "CLOSE_WAIT":
					cw++
				}
			}
			slices.Sort(held)
			if d := cmp.Diff(heldFDs, held); d != "" || cw != 1 {
				t.Errorf("%d CLOSE_WAIT (want 1), held CLOSE fds (-want +got):\n%s", cw, d)
			}

			out, _, err = run(t, append(slices.Clone(fl), "--state", "close-wait,close", "-o", "wide")...)
			if err != nil {
				t.Fatal(err)
			}
			mark := "CLOSE (held)  "
			if fl != nil {
				mark = "CLOSE (held)*"
			}
			if n := strings.Count(out, mark); n != 3 || (fl != nil) != strings.Contains(out, "* 3 held CLOSE sockets (no remote known") {
				t.Errorf("wide: %d lines %q (want 3), and the note only with a filter:\n%s", n, mark, out)
			}

			out, _, err = run(t, append(slices.Clone(fl), "--warn", "0", "--crit", "2")...)
			if code := cmdutil.ExitCode(err); code != cmdutil.ExitCritical {
				t.Errorf("check: exit %d (%v), want %d", code, err, cmdutil.ExitCritical)
			}
			first, rest, _ := strings.Cut(out, "\n")
			want := fmt.Sprintf("KDIAG CRITICAL - 1 CLOSE_WAIT and 3 held CLOSE in pid %d", c.PID)
			if !strings.HasPrefix(first, want) || !strings.Contains(first, "| close_wait=4;0;2 close_wait_total=4") {
				t.Errorf("check line %q, want %q ... close_wait=4", first, want)
			}
			cell := " 3  "
			if fl != nil {
				cell = " 3* "
			}
			if !strings.Contains(rest, cell) {
				t.Errorf("table: the HELD-CLOSE count %q is not there:\n%s", cell, rest)
			}

			// --state close-wait leaves them out, and says so in one line.
			out, errOut, err = run(t, append(slices.Clone(fl), "--state", "close-wait")...)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, "CLOSE ") || strings.Contains(out, "HELD") {
				t.Errorf("--state close-wait listed held CLOSE:\n%s", out)
			}
			var lines []string
			for _, l := range strings.Split(errOut, "\n") {
				if strings.Contains(l, "held CLOSE") {
					lines = append(lines, l)
				}
			}
			wantLine := fmt.Sprintf("kdiag: note: 3 held CLOSE sockets left out, of pid %d (", c.PID)
			if len(lines) != 1 || !strings.HasPrefix(lines[0], wantLine) || !strings.HasSuffix(lines[0], "--state close-wait,close shows them") {
				t.Errorf("stderr lines about held CLOSE %q, want one: %q ... --state close-wait,close shows them", lines, wantLine)
			}
		})
	}
}
