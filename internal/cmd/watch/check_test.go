package watch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/internal/sockettest"
	"github.com/kdiag/kdiag/netstat"
)

// TestReportPathCheckedAtStart: a --report that could not be written is a
// usage error before the first scan, saying why, not one at the end of the
// watch naming a temporary file.
func TestReportPathCheckedAtStart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"/nonexistent-dir/x.html", "--report /nonexistent-dir/x.html: directory /nonexistent-dir does not exist"},
		{filepath.Join(file, "x.html"), "is not a directory"},
		{dir, "is a directory; name the report file"},
	} {
		f := &cmdutil.Factory{ProcRoot: "/proc"}
		f.IO, _, _, _ = cmdutil.Test()
		cmd := NewCmdWatch(f, func(*WatchOptions) error {
			t.Errorf("--report %s: the watch ran", tc.path)
			return nil
		})
		cmd.SetArgs([]string{"--events", "off", "--count", "1", "--report", tc.path})
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.Execute()
		if cmdutil.ExitCode(err) != cmdutil.ExitUsage || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--report %s: %v (exit %d), want a usage error saying %q", tc.path, err, cmdutil.ExitCode(err), tc.want)
		}
	}
}

func TestWarnCritFlags(t *testing.T) {
	f := &cmdutil.Factory{ProcRoot: "/proc"}
	f.IO, _, _, _ = cmdutil.Test()
	for _, tc := range []struct {
		args []string
		want *Thresholds
	}{
		{nil, nil},
		{[]string{"--warn", "5"}, &Thresholds{Warn: 5, Crit: -1}},
		{[]string{"--crit", "0"}, &Thresholds{Warn: -1, Crit: 0}},
		{[]string{"--warn", "10", "--crit", "100"}, &Thresholds{Warn: 10, Crit: 100}},
	} {
		var got *WatchOptions
		cmd := NewCmdWatch(f, func(o *WatchOptions) error { got = o; return nil })
		cmd.SetArgs(append([]string{"--events", "off"}, tc.args...))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if (got.Check == nil) != (tc.want == nil) || got.Check != nil && *got.Check != *tc.want {
			t.Errorf("%v: Check = %+v, want %+v", tc.args, got.Check, tc.want)
		}
	}
	for _, bad := range [][]string{{"--warn", "100", "--crit", "10"}, {"--warn", "-2"}} {
		cmd := NewCmdWatch(f, func(*WatchOptions) error { return nil })
		cmd.SetArgs(append([]string{"--events", "off"}, bad...))
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		if err := cmd.Execute(); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}

// TestWarnCrit: a watch with --warn/--crit ends with scan's check line of
// its last scan, first on stdout when quiet, and exits with its status.
func TestWarnCrit(t *testing.T) {
	// n CLOSE_WAIT and 1 held CLOSE in pid 40 at scan n.
	fill := func(s *netstat.Snapshot, n int) {
		s.Processes = []netstat.Process{{PID: 40, Name: "app", StartTime: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC),
			States: map[string]int{"CLOSE_WAIT": n, "CLOSE": 1}}}
		for i := range n + 1 {
			st := netstat.CloseWait
			if i == n {
				st = netstat.Close
			}
			s.Sockets = append(s.Sockets, netstat.Socket{State: st, PID: 40, FD: 10 + i, Inode: uint64(100 + i)})
		}
	}
	for _, tc := range []struct {
		name       string
		warn, crit int
		fail       bool // the last scan fails
		code       int
		line       string
	}{
		{"ok", 10, 20, false, cmdutil.ExitOK, "KDIAG OK - 3 CLOSE_WAIT and 1 held CLOSE in pid 40 (app) | close_wait=4;10;20 close_wait_total=4"},
		{"warning", 3, 20, false, cmdutil.ExitWarning, "KDIAG WARNING - 3 CLOSE_WAIT and 1 held CLOSE in pid 40 (app) | close_wait=4;3;20 close_wait_total=4"},
		{"critical, crit only", -1, 3, false, cmdutil.ExitCritical, "KDIAG CRITICAL - 3 CLOSE_WAIT and 1 held CLOSE in pid 40 (app) | close_wait=4;;3 close_wait_total=4"},
		{"the last scan failed", 3, 20, true, cmdutil.ExitUnknown, "KDIAG UNKNOWN - the last scan failed: netlink: permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ios, _, out, _ := cmdutil.Test()
			o := threeScans(ios, fill)
			o.Check = &Thresholds{Warn: tc.warn, Crit: tc.crit}
			if tc.fail {
				scan := o.Scan
				o.Scan = func(ctx context.Context, q netstat.Query) (*netstat.Snapshot, error) {
					s, _ := scan(ctx, q)
					if s.Time.Second() == 3 {
						return nil, errors.New("netlink: permission denied")
					}
					return s, nil
				}
			}
			err := runWatch(o)
			if code := cmdutil.ExitCode(err); code != tc.code {
				t.Errorf("exit %d (%v), want %d", code, err, tc.code)
			}
			if first, _, _ := strings.Cut(out.String(), "\n"); first != tc.line {
				t.Errorf("first line %q, want %q\n%s", first, tc.line, out)
			}
			if !strings.Contains(out.String(), "samples over") {
				t.Errorf("no findings after the check line:\n%s", out)
			}
		})
	}
	// Stopped before the first scan: the check cannot say OK.
	ios, _, out, _ := cmdutil.Test()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := threeScans(ios, fill)
	o.Context, o.Check = ctx, &Thresholds{Warn: 3, Crit: 20}
	if err := runWatch(o); cmdutil.ExitCode(err) != cmdutil.ExitUnknown || !strings.HasPrefix(out.String(), "KDIAG UNKNOWN - ") {
		t.Errorf("stopped before a scan: %v, %q; want UNKNOWN", err, out)
	}
}

// TestWarnCritRealSockets runs kdiag watch --warn 3 --crit 10 --quiet over
// a child's 5 real CLOSE_WAIT sockets, with the real scanner: it ends
// WARNING, exit 1, the check line first.
func TestWarnCritRealSockets(t *testing.T) {
	c := sockettest.StartChild(t, sockettest.Spec{CloseWait: 5})
	f := &cmdutil.Factory{ProcRoot: "/proc"}
	ios, _, out, errOut := cmdutil.Test()
	f.IO = ios
	cmd := NewCmdWatch(f, nil)
	cmd.SetArgs([]string{"--pid", strconv.Itoa(c.PID), "--state", "close-wait", "--interval", "20ms", "--count", "2",
		"--events", "off", "--quiet", "--warn", "3", "--crit", "10"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	if code := cmdutil.ExitCode(err); code != cmdutil.ExitWarning {
		t.Errorf("exit %d (%v), want 1 (WARNING)\n%s", code, err, errOut)
	}
	want := fmt.Sprintf("KDIAG WARNING - 5 CLOSE_WAIT in pid %d (", c.PID)
	if !strings.HasPrefix(out.String(), want) || !strings.Contains(out.String(), "| close_wait=5;3;10 ") {
		t.Errorf("stdout does not start %q:\n%s", want, out)
	}
}

// TestHeldCloseLabelledLive: the live table counts held CLOSE sockets in
// their own HELD-CLOSE column, as scan's table does, not under OTHER, and
// the plain line says held_close.
func TestHeldCloseLabelledLive(t *testing.T) {
	s := &netstat.Snapshot{Time: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Processes: []netstat.Process{{PID: 5, Name: "app"}}}
	for i := range 6 {
		st := netstat.CloseWait
		if i >= 3 {
			st = netstat.Close
		}
		s.Sockets = append(s.Sockets, netstat.Socket{State: st, PID: 5, FD: 10 + i, Inode: uint64(1 + i)})
	}
	tr := analyzer.NewTracker(analyzer.Options{})
	tr.Add(s)
	ios, _, out, _ := cmdutil.Test()
	ios.SetStdoutTTY(true)
	(&liveView{io: ios, interval: time.Second}).draw(s, tr.Analysis(), time.Millisecond)
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 3 {
		t.Fatalf("table:\n%s", out)
	}
	header, row := strings.Fields(lines[1]), strings.Fields(lines[2])
	got := map[string]string{}
	for i, h := range header[:6] {
		got[h] = row[i]
	}
	if got["CLOSE_WAIT"] != "3" || got["HELD-CLOSE"] != "3" || got["OTHER"] != "0" {
		t.Errorf("columns %v, want CLOSE_WAIT 3, HELD-CLOSE 3, OTHER 0:\n%s", got, out)
	}
	if l := plainLine(s, tr.Analysis(), time.Millisecond); !strings.Contains(l, " close_wait=3 held_close=3 ") || !strings.Contains(l, "app[5] close_wait=3 held_close=3 ") {
		t.Errorf("plain line %q lacks close_wait=3 held_close=3", l)
	}
}
