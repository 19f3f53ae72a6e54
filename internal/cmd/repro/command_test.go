package repro

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/repro"
	"go.yaml.in/yaml/v3"
)

// commandFixture reads a result of a real kdiag repro -o json -- CMD run:
// command-held.json (franz-go v1.22.3, one broker, 8 s), command-ok.json
// (kcat, three brokers, 8 s).
func commandFixture(t *testing.T, name string) *repro.CommandResult {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var res repro.CommandResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// TestMarkdownReport: the Markdown report of a held and of a clean run, as
// pasted into an issue.
func TestMarkdownReport(t *testing.T) {
	for _, name := range []string{"command-held", "command-ok"} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeMarkdownReport(&b, commandFixture(t, name)); err != nil {
				t.Fatal(err)
			}
			golden(t, name+".md", b.String())
		})
	}
}

// TestCommandText: the text of a run fits the terminal and says what
// happened to each connection, the client and the verdict.
func TestCommandText(t *testing.T) {
	res := commandFixture(t, "command-held")
	for _, width := range []int{80, 120} {
		var b bytes.Buffer
		if err := writeCommandText(&b, res, width); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		// Every line fits but the verdict's, which is one line.
		if n, line := widest(strings.ReplaceAll(out, res.Verdict, "")); n > width {
			t.Errorf("a line is %d columns wide, more than %d:\n%s", n, width, line)
		}
		golden(t, fmt.Sprintf("command-held-%d", width), out)
	}
}

// TestHTMLReport: the HTML report is report's page, with the run's verdict
// among its notes.
func TestHTMLReport(t *testing.T) {
	res := commandFixture(t, "command-held")
	var b bytes.Buffer
	if err := writeHTMLReport(&b, res); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"<html", "kdiag repro -- ", "HELD: franz-go v1.22.3 held 3 of 3"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("the HTML report lacks %q", s)
		}
	}
}

// reproCmd runs kdiag repro -o json with args as a user does, and returns
// its result, its exit status and its stderr; it fails the test when any
// process of the run is left once kdiag has exited.
func reproCmd(t *testing.T, args ...string) (*repro.CommandResult, int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kdiagBin, append([]string{"repro", "-o", "json"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var res repro.CommandResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("kdiag repro %v (exit %d): %v\n%s\n%s", args, code, err, stdout.String(), stderr.String())
	}
	t.Logf("kdiag repro %s: exit %d: %s", strings.Join(args, " "), code, res.Verdict)
	if code != res.ExitCode {
		t.Errorf("exit %d, the JSON says %d", code, res.ExitCode)
	}
	if left := leftOf(res.RunID); len(left) > 0 {
		t.Errorf("processes of the run left after kdiag repro exited: %v", left)
	}
	return &res, code, stderr.String()
}

// leftOf lists the live processes whose environment carries the run's
// marker (every process the command started inherits it).
func leftOf(runID string) []string {
	want := []byte(repro.MarkerVar + "=" + runID)
	names, _ := os.ReadDir("/proc")
	var out []string
	for _, n := range names {
		if _, err := strconv.Atoi(n.Name()); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", n.Name(), "environ"))
		if err != nil || !slices.ContainsFunc(bytes.Split(env, []byte{0}), func(e []byte) bool { return bytes.Equal(e, want) }) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", n.Name(), "stat")); err == nil && bytes.Contains(st, []byte(") Z ")) {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", n.Name(), "cmdline"))
		out = append(out, n.Name()+" "+string(bytes.ReplaceAll(cl, []byte{0}, []byte{' '})))
	}
	return out
}

// TestCommandExitsAtOnce: a command that exits at once gets UNKNOWN (3),
// with its exit status and the last lines of its stderr.
func TestCommandExitsAtOnce(t *testing.T) {
	t.Parallel()
	res, code, _ := reproCmd(t, "--", "sh", "-c", "echo 'svc: no config file' >&2; exit 4")
	if code != 3 || res.Status != repro.StatusUnknown || res.Exit == nil || res.Exit.Code != 4 {
		t.Fatalf("exit %d, %+v", code, res)
	}
	for _, s := range []string{"the command exited after", "exit status 4", "before connecting to the brokers", "svc: no config file"} {
		if !strings.Contains(res.Verdict, s) {
			t.Errorf("verdict %q lacks %q", res.Verdict, s)
		}
	}
}

// TestCommandNeverConnects: a command that runs and never connects gets
// UNKNOWN (3) after --connect-timeout, and is stopped.
func TestCommandNeverConnects(t *testing.T) {
	t.Parallel()
	res, code, _ := reproCmd(t, "--connect-timeout", "2s", "--", "sleep", "300")
	if code != 3 || !strings.Contains(res.Verdict, "never connected to the brokers in 2s") ||
		!strings.Contains(res.Verdict, "KAFKA_BOOTSTRAP_SERVERS") {
		t.Errorf("exit %d, verdict %q", code, res.Verdict)
	}
	if res.Exit == nil || !res.Exit.ByKdiag {
		t.Errorf("sleep should have been stopped by kdiag: %+v", res.Exit)
	}
}

// TestCommandIgnoresTheBootstrapList: a producer given another cluster's
// address (a broker the test runs) gets UNKNOWN (3), naming where it
// connected instead.
func TestCommandIgnoresTheBootstrapList(t *testing.T) {
	t.Parallel()
	other, err := broker.Start(context.Background(), broker.Config{Brokers: 1, Ports: []int{0}, Topics: []string{repro.DefaultTopic}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	res, code, _ := reproCmd(t, "--connect-timeout", "5s", "--", kdiagBin, "produce", "--bootstrap-server", other.BootstrapServers(),
		"--messages", "0", "--interval", "1h", "--duration", "2m")
	if code != 3 || !slices.Contains(res.OtherRemotes, other.BootstrapServers()) ||
		!strings.Contains(res.Verdict, "it connected to "+other.BootstrapServers()+" instead: it ignores the bootstrap list") {
		t.Errorf("exit %d, other remotes %v, verdict %q", code, res.OtherRemotes, res.Verdict)
	}
}

// TestCommandForksAChildThatHolds: the command starts a producer that reads
// on demand (as Sarama, franz-go and kafka-go do) in a session of its own,
// from a subshell that exits at once, and exits itself: kdiag follows the
// producer by the marker in its environment, judges its sockets (HELD),
// and stops it at the end.
func TestCommandForksAChildThatHolds(t *testing.T) {
	t.Parallel()
	script := fmt.Sprintf(`(setsid %s produce --bootstrap-server "$KAFKA_BOOTSTRAP_SERVERS" --reader on-demand --set connections.max.idle.ms=-1 --messages 0 --interval 1h --duration 5m >/dev/null 2>&1 &); exit 0`, kdiagBin)
	res, code, _ := reproCmd(t, "--duration", "8s", "--", "sh", "-c", script)
	if code != 1 || res.Status != repro.StatusHeld {
		t.Errorf("exit %d: %s", code, res.Verdict)
	}
	if res.Client.Kdiag == nil || res.Client.Kdiag.Command != "produce" {
		t.Errorf("the client is %s, want kdiag produce", res.Client)
	}
	var found bool
	for _, p := range res.Processes {
		if p.PID == res.ClientPID {
			found = true
			if p.Found == "command" {
				t.Errorf("the producer is the command itself: %+v", p)
			}
		}
	}
	if !found {
		t.Errorf("the client pid %d is not among the processes followed %+v", res.ClientPID, res.Processes)
	}
	if res.Exit == nil || res.Exit.ByKdiag || res.Exit.Code != 0 {
		t.Errorf("the shell exited by itself, status 0: %+v", res.Exit)
	}
}

// TestCommandReportFiles: --report writes the Markdown and HTML reports
// of a run.
func TestCommandReportFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	md, html := filepath.Join(dir, "r.md"), filepath.Join(dir, "r.html")
	res, _, _ := reproCmd(t, "--connect-timeout", "1s", "--report", md, "--report", html, "--", "sleep", "30")
	for _, f := range []string{md, html} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "UNKNOWN: the command never connected") {
			t.Errorf("%s does not give the verdict %q", f, res.Verdict)
		}
	}
}

// TestNetNSHeldClose: with --netns, a Go client that holds the broker's
// closes (kdiag produce --reader on-demand: Go's net.Dialer, keepalive 15 s)
// shows held CLOSE within 30 s: the broker's side is gone after the
// namespace's 2 s tcp_fin_timeout, and the client's first keepalive probe
// draws a reset, which leaves its fd held.
func TestNetNSHeldClose(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("--netns needs root")
	}
	res, code, stderr := reproCmd(t, "--netns", "--duration", "30s", "--", kdiagBin, "produce", "--bootstrap-server", "{bootstrap}",
		"--reader", "on-demand", "--set", "connections.max.idle.ms=-1", "--messages", "0", "--interval", "1h", "--duration", "5m")
	if !res.NetNS || res.FinTimeoutS != 2 {
		t.Errorf("netns %v, fin timeout %d: %s", res.NetNS, res.FinTimeoutS, stderr)
	}
	first := res.FirstHeldClose()
	if first == nil {
		t.Fatalf("no connection held in CLOSE (exit %d): %s", code, res.Verdict)
	}
	if d := time.Duration(first.HeldCloseAtMS-first.ClosedMS) * time.Millisecond; d > 30*time.Second {
		t.Errorf("held CLOSE %v after the broker's close, want within 30s", d)
	}
	if code != 1 || !strings.Contains(res.Verdict, "then CLOSE after keepalive's reset") {
		t.Errorf("exit %d: %s", code, res.Verdict)
	}
}

// TestActionRepro runs action.yml's mode repro as a runner would: its
// repro step's script, with the inputs in its environment, against a
// service that holds the broker's closes (kdiag produce reading on demand,
// as Go clients do), then its failing step: the step records exit code 1
// and a HELD verdict, puts the report in the job's summary, and the job
// fails.
func TestActionRepro(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Inputs map[string]map[string]string `yaml:"inputs"`
		Runs   struct {
			Steps []struct {
				ID   string            `yaml:"id"`
				Name string            `yaml:"name"`
				If   string            `yaml:"if"`
				Run  string            `yaml:"run"`
				Env  map[string]string `yaml:"env"`
			} `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"mode", "command", "repro-args", "report", "fail-on-unknown"} {
		if _, ok := a.Inputs[in]; !ok {
			t.Errorf("input %s is not declared", in)
		}
	}
	var step, fail string
	var stepEnv map[string]string
	for _, s := range a.Runs.Steps {
		switch {
		case s.ID == "repro":
			step, stepEnv = s.Run, s.Env
			if !strings.Contains(s.If, "inputs.mode == 'repro'") || strings.Contains(s.Run, "${{") {
				t.Errorf("repro step: if %q; its script must take the inputs from its environment:\n%s", s.If, s.Run)
			}
		case strings.Contains(s.If, "steps.repro.outputs.exit-code"):
			fail = s.Run
		}
	}
	if step == "" || fail == "" || stepEnv["KDIAG_COMMAND"] != "${{ inputs.command }}" {
		t.Fatalf("no repro step or no step failing on its exit code: %q %q %v", step, fail, stepEnv)
	}

	dir := t.TempDir()
	if err := os.Symlink(kdiagBin, filepath.Join(dir, "kdiag")); err != nil {
		t.Fatal(err)
	}
	out, summary, report := filepath.Join(dir, "output"), filepath.Join(dir, "summary"), filepath.Join(dir, "kdiag-repro.md")
	cmd := exec.Command("bash", "-c", step)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RUNNER_TEMP="+dir, "GITHUB_OUTPUT="+out, "GITHUB_STEP_SUMMARY="+summary,
		"KDIAG_COMMAND="+kdiagBin+" produce --bootstrap-server {bootstrap} --reader on-demand --set connections.max.idle.ms=-1 --messages 0 --interval 1h --duration 5m",
		"KDIAG_ARGS=--duration 6s", "KDIAG_REPORT="+report)
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the repro step failed itself (it should record kdiag's status and exit 0): %v\n%s", err, o)
	}
	outputs, _ := os.ReadFile(out)
	if !strings.Contains(string(outputs), "exit-code=1\n") || !strings.Contains(string(outputs), "verdict=HELD: ") {
		t.Errorf("the step's outputs:\n%s\nwant exit-code=1 and a HELD verdict", outputs)
	}
	if s, _ := os.ReadFile(summary); !strings.Contains(string(s), "**HELD: ") {
		t.Errorf("the job summary lacks the report:\n%s", s)
	}
	code := regexp.MustCompile(`exit-code=(\d)`).FindStringSubmatch(string(outputs))
	verdict := regexp.MustCompile(`verdict=(.*)`).FindStringSubmatch(string(outputs))
	if code == nil || verdict == nil {
		t.Fatal("no exit code or verdict in the step's outputs")
	}
	f := exec.Command("bash", "-c", fail)
	f.Env = append(os.Environ(), "CODE="+code[1], "VERDICT="+verdict[1], "FAIL_ON_UNKNOWN="+a.Inputs["fail-on-unknown"]["default"])
	o, err := f.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(o), "::error title=kdiag repro::HELD") {
		t.Errorf("the failing step: %v\n%s\nwant exit 1 with the verdict as an error annotation", err, o)
	}
}

// TestCommandInterrupt: Ctrl-C (SIGINT) during a -- CMD run stops the
// command and everything it started, and says the run was interrupted
// (UNKNOWN, exit 3).
func TestCommandInterrupt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kdiagBin, "repro", "-o", "json", "--", "sh", "-c", "sleep 300 & sleep 301")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	var sh int
	deadline := time.Now().Add(30 * time.Second)
	for sh == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		sh = findChild(cmd.Process.Pid, "sleep 301")
	}
	if sh == 0 {
		t.Fatalf("the command did not start; stderr:\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("kdiag repro -- CMD after SIGINT: %v, want exit status 3\nstderr:\n%s", err, stderr.String())
	}
	var res repro.CommandResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("JSON after interrupt: %v\n%s", err, stdout.String())
	}
	if !res.Interrupted || !strings.Contains(res.Verdict, "interrupted") {
		t.Errorf("interrupted %v, verdict %q", res.Interrupted, res.Verdict)
	}
	if left := leftOf(res.RunID); len(left) > 0 {
		t.Errorf("processes of the run left after kdiag repro exited: %v", left)
	}
}
