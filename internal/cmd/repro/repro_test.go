package repro

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/internal/testbin"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/repro"
)

// kdiagBin is kdiag built once, to run `kdiag repro` as a user does.
var kdiagBin string

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m.Run, &kdiagBin, "the repro command tests"))
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    ReproOptions
		wantErr string
	}{
		{
			name: "defaults: embedded broker at 10m/200",
			want: ReproOptions{BrokerIdle: 3 * time.Second, Scale: 200, SampleInterval: 200 * time.Millisecond,
				Topic: "kdiag-repro", Parallel: true, Output: "table", Width: 80, Brokers: 3, Closes: "driven"},
		},
		{
			name: "scenarios, scale, duration, json, one after another",
			args: []string{"healthy", "leak", "--scale", "400", "--duration", "5s", "-o", "json", "--parallel=false"},
			want: ReproOptions{Scenarios: []string{"healthy", "leak"}, BrokerIdle: 1500 * time.Millisecond, Scale: 400,
				Duration: 5 * time.Second, SampleInterval: 200 * time.Millisecond, Topic: "kdiag-repro", Output: "json", Width: 80, Brokers: 3, Closes: "driven"},
		},
		{
			name: "a real cluster keeps the real idle timeout",
			args: []string{"--bootstrap-server", "kafka:9092"},
			want: ReproOptions{Bootstrap: "kafka:9092", BrokerIdle: 10 * time.Minute, Scale: 200,
				SampleInterval: 200 * time.Millisecond, Topic: "kdiag-repro", Parallel: true, Output: "table", Width: 80, Brokers: 3, Closes: "driven"},
		},
		{
			name: "a real cluster with its idle timeout",
			args: []string{"--bootstrap-server", "kafka:9092", "--broker-idle", "30s"},
			want: ReproOptions{Bootstrap: "kafka:9092", BrokerIdle: 30 * time.Second, Scale: 200,
				SampleInterval: 200 * time.Millisecond, Topic: "kdiag-repro", Parallel: true, Output: "table", Width: 80, Brokers: 3, Closes: "driven"},
		},
		{
			name: "every detail",
			args: []string{"-o", "wide"},
			want: ReproOptions{BrokerIdle: 3 * time.Second, Scale: 200, SampleInterval: 200 * time.Millisecond,
				Topic: "kdiag-repro", Parallel: true, Output: "wide", Width: 80, Brokers: 3, Closes: "driven"},
		},
		{
			name: "-- CMD: the command and its defaults",
			args: []string{"--", "./svc", "--brokers", "{bootstrap}"},
			want: ReproOptions{Command: []string{"./svc", "--brokers", "{bootstrap}"}, BrokerIdle: 3 * time.Second, Scale: 200,
				SampleInterval: 200 * time.Millisecond, Topic: "kdiag-repro", Parallel: true, Output: "table", Width: 80, Brokers: 3,
				Closes: "driven", Duration: 30 * time.Second, MaxHold: 3 * time.Second, ConnectTimeout: time.Minute},
		},
		{
			name: "-- CMD with its flags",
			args: []string{"--bootstrap-env", "BROKERS", "--max-hold", "10s", "--report", "r.md", "--report", "r.html", "--brokers", "1",
				"--broker-idle", "5s", "--duration", "1m", "--broker-closes", "idle", "-o", "json", "--", "python3", "p.py"},
			want: ReproOptions{Command: []string{"python3", "p.py"}, BootstrapEnv: []string{"BROKERS"}, Reports: []string{"r.md", "r.html"},
				BrokerIdle: 5 * time.Second, Scale: 200, SampleInterval: 200 * time.Millisecond, Topic: "kdiag-repro", Parallel: true,
				Output: "json", Width: 80, Brokers: 1, Closes: "idle", Duration: time.Minute, MaxHold: 10 * time.Second, ConnectTimeout: time.Minute},
		},
		{name: "-- CMD and scenarios", args: []string{"healthy", "--", "./svc"}, wantErr: "give scenarios or -- CMD, not both"},
		{name: "nothing after --", args: []string{"--"}, wantErr: "nothing after --"},
		{name: "-- CMD against a real cluster", args: []string{"--bootstrap-server", "k:9092", "--", "./svc"}, wantErr: "--bootstrap-server does not apply to -- CMD"},
		{name: "-- CMD, a report of no known kind", args: []string{"--report", "r.txt", "--", "./svc"}, wantErr: "--report r.txt: name it FILE.md"},
		{name: "-- CMD, closes of no known kind", args: []string{"--broker-closes", "sometimes", "--", "./svc"}, wantErr: `--broker-closes "sometimes": want driven or idle`},
		{name: "-- CMD, -o wide", args: []string{"-o", "wide", "--", "./svc"}, wantErr: `unknown output format "wide"`},
		{name: "-- CMD, a bad variable name", args: []string{"--bootstrap-env", "A=B", "--", "./svc"}, wantErr: `--bootstrap-env "A=B" is not an environment variable name`},
		{name: "a report without -- CMD", args: []string{"--report", "r.md"}, wantErr: "apply to -- CMD"},
		{name: "unknown scenario", args: []string{"heathy"}, wantErr: `unknown scenario "heathy": want one of healthy, never-idle`},
		{name: "scale with a real cluster", args: []string{"--bootstrap-server", "k:9092", "--scale", "10"}, wantErr: "--scale applies to the embedded broker"},
		{name: "scale too large", args: []string{"--scale", "100000"}, wantErr: "too short to observe"},
		{name: "bad scale", args: []string{"--scale", "0"}, wantErr: "--scale must be positive"},
		{name: "bad format", args: []string{"-o", "yaml"}, wantErr: `unknown output format "yaml"`},
		{name: "tiny sample interval", args: []string{"--sample-interval", "1ms"}, wantErr: "at least 10ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			io, _, _, _ := cmdutil.Test()
			var got *ReproOptions
			cmd := NewCmdRepro(&cmdutil.Factory{IO: io, ProcRoot: "/proc", Executable: "kdiag"}, func(o *ReproOptions) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			cmd.SetOut(io.Out)
			cmd.SetErr(io.ErrOut)
			err := cmd.Execute()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				if code := cmdutil.ExitCode(err); code != cmdutil.ExitUsage {
					t.Errorf("exit code %d, want %d", code, cmdutil.ExitUsage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Executable != "kdiag" || (got.Sockets == nil && len(got.Command) == 0) || got.Run == nil || got.Context == nil {
				t.Errorf("dependencies not set: %+v", got)
			}
			if diff := cmp.Diff(tt.want, *got, cmpopts.IgnoreFields(ReproOptions{}, "IO", "Context", "Executable", "Sockets", "Run", "Args", "ProcRoot"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHelpExplainsScenariosAndScale(t *testing.T) {
	io, _, out, _ := cmdutil.Test()
	cmd := NewCmdRepro(&cmdutil.Factory{IO: io}, nil)
	cmd.SetArgs([]string{"--help"})
	cmd.SetOut(io.Out)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, s := range append(repro.Names(), "10m0s -> 3s", "9m0s -> 2.7s", "5m0s -> 1.5s", "callbacks block until every connection is in CLOSE_WAIT",
		"connections.max.idle.ms (2.7s) below the broker's (3s)", "request.timeout.ms              30s (not scaled", "Stands for Sarama, franz-go and kafka-go", "every time kdiag repro prints", "-o wide", "Example", "kdiag repro -o json") {
		if flat := strings.Join(strings.Fields(out.String()), " "); !strings.Contains(out.String(), s) && !strings.Contains(flat, s) {
			t.Errorf("help lacks %q", s)
		}
	}
}

// TestRunReproRealScenarios runs two scenarios for real (embedded broker,
// `kdiag produce` child) through the command's run function and checks the
// table and the JSON they give. The two are those whose outcome no timer
// decides: passive-close holds CLOSE_WAIT once the broker has closed, and
// stalled-callback's stall is released on what the run sees.
func TestRunReproRealScenarios(t *testing.T) {
	run := func(output string) (string, error) {
		io, _, out, _ := cmdutil.Test()
		err := runRepro(&ReproOptions{
			IO: io, Context: context.Background(), Executable: kdiagBin,
			Sockets: repro.ScannerSource("/proc"), Run: repro.Run,
			Scenarios: []string{"stalled-callback", "passive-close"}, BrokerIdle: 2 * time.Second, Duration: 6 * time.Second,
			SampleInterval: 200 * time.Millisecond, Topic: "kdiag-repro", Parallel: true, Output: output, Width: 80,
		})
		return out.String(), err
	}

	table, err := run("table")
	if err != nil {
		t.Fatalf("kdiag repro stalled-callback passive-close: %v\n%s", err, table)
	}
	t.Logf("table output:\n%s", table)
	for _, s := range []string{"stalled-callback", "passive-close", "CLOSE_WAIT came and went: up to", "CLOSE_WAIT held:",
		"What each scenario shows:", "stalled-callback done: CLOSE_WAIT peak", ", final 0 (as expected)", "the real timers divided by 300"} {
		if flat := strings.Join(strings.Fields(table), " "); !strings.Contains(flat, s) {
			t.Errorf("table output lacks %q", s)
		}
	}
	if n, line := widest(table); n > 80 {
		t.Errorf("a line is %d columns wide, more than 80:\n%s", n, line)
	}

	js, err := run("json")
	if err != nil {
		t.Fatalf("kdiag repro -o json: %v\n%s", err, js)
	}
	var doc struct {
		Scenarios []struct {
			Name           string `json:"name"`
			CloseWaitPeak  *int   `json:"close_wait_peak"`
			CloseWaitFinal *int   `json:"close_wait_final"`
			Verdict        string `json:"verdict"`
			AsExpected     bool   `json:"as_expected"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, js)
	}
	if len(doc.Scenarios) != 2 || doc.Scenarios[0].Name != "stalled-callback" || doc.Scenarios[1].Name != "passive-close" {
		t.Fatalf("scenarios %+v", doc.Scenarios)
	}
	for _, s := range doc.Scenarios {
		if s.CloseWaitPeak == nil || s.CloseWaitFinal == nil || s.Verdict == "" || !s.AsExpected {
			t.Errorf("scenario %+v: want close_wait_peak, close_wait_final, a verdict and as_expected", s)
		}
	}
	if *doc.Scenarios[0].CloseWaitFinal != 0 || *doc.Scenarios[1].CloseWaitFinal == 0 {
		t.Errorf("final CLOSE_WAIT stalled-callback %d, passive-close %d: want 0 and more", *doc.Scenarios[0].CloseWaitFinal, *doc.Scenarios[1].CloseWaitFinal)
	}
}

func TestNotAsExpectedExitsOne(t *testing.T) {
	io, _, out, _ := cmdutil.Test()
	// A Run that reports what it got from a real run's shape but not what
	// the scenario is meant to show: the command must say so and exit 1.
	fakeRun := func(ctx context.Context, sc repro.Scenario, o repro.Options, p func(repro.Sample)) (*repro.Result, error) {
		return &repro.Result{Name: sc.Name, Shows: sc.Shows, Reader: sc.Reader, Expected: sc.Expect.String(),
			Verdict: "OK: no CLOSE_WAIT", AsExpected: false}, nil
	}
	err := runRepro(&ReproOptions{IO: io, Context: context.Background(), Run: fakeRun, Scenarios: []string{"passive-close"},
		BrokerIdle: time.Second, Output: "table"})
	if code := cmdutil.ExitCode(err); code != cmdutil.ExitFindings {
		t.Fatalf("exit code %d (%v), want %d", code, err, cmdutil.ExitFindings)
	}
	if !strings.Contains(out.String(), "(NOT as expected)") || !strings.Contains(out.String(), "(NOT what this scenario is meant to") {
		t.Errorf("output does not say the scenario did not show what it should:\n%s", out)
	}
}

// TestInterruptLeavesNothingBehind runs `kdiag repro` as a user would, sends
// it SIGINT (Ctrl-C) while its producer runs, and checks that the producer
// process is gone and the broker's ports are closed.
func TestInterruptLeavesNothingBehind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kdiagBin, "repro", "passive-close", "--duration", "60s", "-o", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()

	// Wait for the child `kdiag produce`.
	var child int
	deadline := time.Now().Add(30 * time.Second)
	for child == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		child = findChild(cmd.Process.Pid, "produce")
	}
	if child == 0 {
		t.Fatalf("no `kdiag produce` child appeared; stderr:\n%s", stderr.String())
	}
	// Let it connect, so that there are sockets to clean up.
	for socketFDs(child) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if socketFDs(child) == 0 {
		t.Fatalf("the producer (pid %d) holds no socket after 30s; stderr:\n%s", child, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("kdiag repro after SIGINT: %v, want exit status 1\nstderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr.String())
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", child)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the producer (pid %d) is still there after kdiag repro exited: %v", child, err)
	}

	var doc struct {
		Scenarios []struct {
			Bootstrap   string `json:"bootstrap"`
			ChildPID    int    `json:"child_pid"`
			Interrupted bool   `json:"interrupted"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil || len(doc.Scenarios) != 1 {
		t.Fatalf("JSON after interrupt: %v\n%s", err, stdout.String())
	}
	s := doc.Scenarios[0]
	if s.ChildPID != child || !s.Interrupted {
		t.Errorf("JSON says child %d interrupted %v, want %d true", s.ChildPID, s.Interrupted, child)
	}
	for _, addr := range strings.Split(s.Bootstrap, ",") {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("broker %s still accepts connections after kdiag repro exited", addr)
		}
	}
}

// findChild returns a child of pid whose command line contains word, or 0.
func findChild(pid int, word string) int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			c, _ := strconv.Atoi(f)
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
			if err == nil && bytes.Contains(cmdline, []byte(word)) {
				return c
			}
		}
	}
	return 0
}

// socketFDs counts the sockets process pid holds.
func socketFDs(pid int) int {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// TestOneRunTimeFigure: the help, the headline of a default run and the
// README give one figure for how long `kdiag repro` takes.
func TestOneRunTimeFigure(t *testing.T) {
	io, _, out, _ := cmdutil.Test()
	cmd := NewCmdRepro(&cmdutil.Factory{IO: io}, nil)
	cmd.SetArgs([]string{"--help"})
	cmd.SetOut(io.Out)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	about := regexp.MustCompile(`about ([0-9.]+ ?(?:s|seconds))`)
	figures := map[string][]string{}
	for _, m := range about.FindAllStringSubmatch(strings.Join(strings.Fields(out.String()), " "), -1) {
		figures["help"] = append(figures["help"], m[1])
	}
	idle := repro.RealBrokerIdle / repro.DefaultScale
	head := headline(&ReproOptions{BrokerIdle: idle, Parallel: true}, len(repro.Catalog()), 4*idle)
	for _, m := range regexp.MustCompile(`about ([0-9.]+ ?(?:s|seconds)) in all`).FindAllStringSubmatch(head, -1) {
		figures["headline"] = append(figures["headline"], m[1])
	}
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.Contains(line, "kdiag repro") || strings.Contains(line, "in all)") {
			for _, m := range about.FindAllStringSubmatch(line, -1) {
				figures["README"] = append(figures["README"], m[1])
			}
		}
	}
	want := human.Age(defaultRunTime())
	for where, fs := range figures {
		for _, f := range fs {
			if f != want {
				t.Errorf("%s says about %s, want about %s (all: %v)", where, f, want, figures)
			}
		}
	}
	for _, where := range []string{"help", "headline", "README"} {
		if len(figures[where]) == 0 {
			t.Errorf("%s gives no run time", where)
		}
	}
}
