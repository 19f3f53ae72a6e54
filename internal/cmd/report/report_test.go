package report

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kdiag/kdiag/internal/cmdutil"
)

// TestReplayCutRecording replays the real recording of report/testdata with
// its last line cut in the middle, as a kill -9 of watch leaves it: the cut
// line is a note, the rest is reported.
func TestReplayCutRecording(t *testing.T) {
	b, err := os.ReadFile("../../../report/testdata/leak.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	last := lines[len(lines)-2] // the final element is "" after the last "\n"
	cut := strings.Join(lines[:len(lines)-2], "") + last[:len(last)/3]
	path := filepath.Join(t.TempDir(), "cut.jsonl")
	if err := os.WriteFile(path, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"markdown", "html"} {
		ios, _, out, errOut := cmdutil.Test()
		err := runReport(&ReportOptions{IO: ios, File: path, Output: format})
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		n := len(lines) - 1
		if want := "line " + itoa(n) + ": cut short"; !strings.Contains(errOut.String(), want) {
			t.Errorf("%s: stderr %q lacks %q", format, errOut, want)
		}
		if want := itoa(n-1) + " samples"; !strings.Contains(out.String(), want) {
			t.Errorf("%s: report lacks %q", format, want)
		}
		if !strings.Contains(out.String(), "CLOSE") || !strings.Contains(out.String(), "cut short") {
			t.Errorf("%s: report lacks the finding or the note", format)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestReportFlagsAndErrors(t *testing.T) {
	f := &cmdutil.Factory{}
	f.IO, _, _, _ = cmdutil.Test()
	var got *ReportOptions
	cmd := NewCmdReport(f, func(o *ReportOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"rec.jsonl", "--out", "r.md"})
	if err := cmd.Execute(); err != nil || got.Output != "markdown" || got.File != "rec.jsonl" {
		t.Fatalf("err %v, opts %+v", err, got)
	}
	cmd = NewCmdReport(f, func(o *ReportOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"rec.jsonl", "--out", "r.html"})
	if err := cmd.Execute(); err != nil || got.Output != "html" {
		t.Fatalf("err %v, opts %+v", err, got)
	}
	ios, _, _, _ := cmdutil.Test()
	err := runReport(&ReportOptions{IO: ios, File: filepath.Join(t.TempDir(), "missing.jsonl"), Output: "html"})
	if cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

// TestOutOfOrderRecording replays the real recording with its halves
// swapped and reversed: every sample is reported (sorted by time), and a
// note says some were out of order.
func TestOutOfOrderRecording(t *testing.T) {
	b, err := os.ReadFile("../../../report/testdata/leak.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	if !strings.HasSuffix(lines[len(lines)-1], "\n") {
		lines[len(lines)-1] += "\n"
	}
	half := len(lines) / 2
	reversed := make([]string, len(lines))
	for i, l := range lines {
		reversed[len(lines)-1-i] = l
	}
	for name, body := range map[string]string{
		"swapped":  strings.Join(lines[half:], "") + strings.Join(lines[:half], ""),
		"reversed": strings.Join(reversed, ""),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name+".jsonl")
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			ios, _, out, errOut := cmdutil.Test()
			if err := runReport(&ReportOptions{IO: ios, File: path, Output: "markdown"}); err != nil {
				t.Fatal(err)
			}
			if want := itoa(len(lines)) + " samples"; !strings.Contains(out.String(), want) {
				t.Errorf("report lacks %q: %.300s", want, out)
			}
			if !strings.Contains(errOut.String(), "out of time order") || !strings.Contains(errOut.String(), "none dropped") {
				t.Errorf("stderr %q: want a note that snapshots were sorted", errOut)
			}
		})
	}
}

// TestNoSnapshotSaysWhy: a file that begins as a recording but holds no
// snapshot says why, from its first lines, not only that it has none.
func TestNoSnapshotSaysWhy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(path, []byte("{\"time\":\"2026-12-02T10:00:00Z\",\n{\"source\":\"netlink\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ios, _, _, _ := cmdutil.Test()
	err := runReport(&ReportOptions{IO: ios, File: path, Output: "markdown"})
	if cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Fatalf("exit %d (%v), want %d", cmdutil.ExitCode(err), err, cmdutil.ExitUsage)
	}
	for _, want := range []string{"no snapshot in the recording", "line 1: not a snapshot", "line 2: snapshot without a time"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestNotARecording: a directory, a text file and /dev/zero are said to be
// what they are, at once: not "line 1: read ...: is a directory", not a
// text without a newline "cut short", and /dev/zero not read until the
// memory runs out.
func TestNotARecording(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("hello, this is not a recording"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{dir, "report: record: " + dir + " is a directory, not a recording: give the file kdiag watch --record wrote"},
		{text, "report: record: " + text + `: not a recording: line 1 begins "hello, this is n", where a kdiag watch --record file is JSON lines that begin {"time":`},
		{"/dev/zero", `report: record: /dev/zero: not a recording: line 1 begins "\x00\x00`},
	} {
		ios, _, _, _ := cmdutil.Test()
		err := runReport(&ReportOptions{IO: ios, File: tc.file, Output: "markdown"})
		if cmdutil.ExitCode(err) != cmdutil.ExitUsage || err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v (exit %d), want a usage error %q", tc.file, err, cmdutil.ExitCode(err), tc.want)
		}
	}
}
