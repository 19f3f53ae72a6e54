package clients_test

// kdiag doctor's first look, as an SRE runs it: once, no --pid, the default
// --stuck-age, the binary's JSON. The clients test (live_test.go) starts a
// real client against kdiag's broker; once the broker has closed its idle
// connections, the first look must warn of a client that holds them
// (franz-go, Sarama, kafka-go) with that client's own fix, and must not warn
// of one that closed them on the FIN.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/doctor"
	"github.com/kdiag/kdiag/internal/testbin"
	"github.com/kdiag/kdiag/internal/testio"
	"github.com/kdiag/kdiag/netstat"
)

var (
	firstLookOnce sync.Once
	firstLookBin  string
	firstLookErr  error
)

// kdiagBin builds kdiag once for the package's tests.
func kdiagBin(t *testing.T) string {
	t.Helper()
	firstLookOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kdiag-clients-")
		if err != nil {
			firstLookErr = err
			return
		}
		firstLookBin, firstLookErr = testbin.BuildKdiag(dir)
	})
	if firstLookErr != nil {
		t.Fatal(firstLookErr)
	}
	return firstLookBin
}

// firstLook runs `kdiag doctor -o json` with args and returns its report
// and exit status.
func firstLook(t *testing.T, args ...string) (*doctor.Report, int) {
	t.Helper()
	cmd := exec.Command(kdiagBin(t), append([]string{"doctor", "-o", "json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kdiag doctor %v: %v", args, err)
	}
	if len(out) == 0 {
		t.Fatalf("kdiag doctor %v (exit %d) wrote nothing; stderr:\n%s", args, code, stderr.String())
	}
	return decodeReport(t, string(out), code), code
}

// decodeReport reads doctor's JSON report.
func decodeReport(t *testing.T, out string, code int) *doctor.Report {
	t.Helper()
	var r doctor.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("kdiag doctor's report (exit %d): %v\n%s", code, err, out)
	}
	return &r
}

func reportOf(r *doctor.Report, pid int) *doctor.Process {
	for i := range r.Processes {
		if r.Processes[i].PID == pid {
			return &r.Processes[i]
		}
	}
	return nil
}

// warnings returns the process's findings of warning or worse.
func warnings(p *doctor.Process) []doctor.Finding {
	var out []doctor.Finding
	for _, f := range p.Findings {
		if f.Severity >= analyzer.Warning {
			out = append(out, f)
		}
	}
	return out
}

// checkFirstLookHolds: the first look names the process (no --pid), warns
// of the sockets it holds with the client's own fix and what ends them, and
// exits 1 or worse. finding is the kind expected first: close-wait-held
// while they are in CLOSE_WAIT, sockets-held-closed once keepalive reset
// them.
func checkFirstLookHolds(t *testing.T, r *doctor.Report, code, pid int, lib, version, finding, fixWord string) {
	t.Helper()
	p := reportOf(r, pid)
	if p == nil {
		t.Fatalf("the first look does not list pid %d; it lists %d processes", pid, len(r.Processes))
	}
	if p.Client.Library != lib || p.Client.Version != version {
		t.Errorf("first look names the client %+v, want %s %s", p.Client, lib, version)
	}
	w := warnings(p)
	if len(w) == 0 {
		t.Fatalf("first look: no warning for %s holding %v sockets (%s); findings %v", lib, p.Sockets, p.NoFinding, findingIDs(*p))
	}
	if w[0].ID != finding {
		t.Errorf("first look's first warning is %s, want %s: %v", w[0].ID, finding, findingIDs(*p))
	}
	if !strings.Contains(w[0].Fix, fixWord) {
		t.Errorf("first look's fix %q does not speak %s's terms (%q)", w[0].Fix, lib, fixWord)
	}
	if w[0].Ends == "" {
		t.Errorf("first look does not say what ends the state: %+v", w[0])
	}
	for _, f := range p.Findings {
		if strings.Contains(f.Fix+f.Title, "jstack") {
			t.Errorf("a Java cause for a Go client: %+v", f)
		}
	}
	if code < 1 || code > 2 {
		t.Errorf("first look exits %d, want 1 (a warning); blind %v (%s), notes %q", code, r.Blind, r.BlindReason, r.Notes)
	}
	t.Logf("first look: %s %s holds %v: %s; %s", lib, version, p.Sockets, w[0].Title, w[0].Ends)
}

// checkFirstLookQuiet: a client that closed the broker's FIN gets no
// warning from the first look; a young CLOSE_WAIT caught in flight is
// info at most.
func checkFirstLookQuiet(t *testing.T, r *doctor.Report, pid int, lib string) {
	t.Helper()
	p := reportOf(r, pid)
	if p == nil {
		t.Logf("first look: %s (pid %d) not listed: no socket to the brokers now", lib, pid)
		return
	}
	if w := warnings(p); len(w) > 0 {
		t.Errorf("first look warns of %s, which closes on the FIN: %v; sockets %v", lib, findingIDs(*p), p.Sockets)
	}
	t.Logf("first look: %s listed with sockets %v, findings %v", lib, p.Sockets, findingIDs(*p))
}

// heldScript runs kdiag's broker and a client in a network namespace of
// their own whose tcp_fin_timeout is 2 s, so that the broker's side of an
// idle-closed connection is gone long before the client's first keepalive
// probe (Go's, 15 s after the FIN), which then draws an RST: the client's
// CLOSE_WAIT socket becomes a held CLOSE fd. The client is exec'd last, so
// its pid is the unshare command's.
const heldScript = `set -e
ip link set lo up
sysctl -qw net.ipv4.tcp_fin_timeout=2
"$1" broker --brokers 1 --ports 9092 --idle 3s --topic live >/dev/null 2>&1 &
for i in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/9092) 2>/dev/null && break; sleep 0.1; done
exec "$2" 127.0.0.1:9092
`

// startHeld starts client in heldScript's namespace, or skips when that
// cannot be made (not root, no unshare or ip).
func startHeld(t *testing.T, clientBin string) *client {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a network namespace with its own tcp_fin_timeout needs root")
	}
	for _, tool := range []string{"unshare", "ip", "sysctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (Debian packages util-linux, iproute2, procps)", tool)
		}
	}
	return start(t, nil, "unshare", "-n", "bash", "-c", heldScript, "held", kdiagBin(t), clientBin)
}

// waitHeld waits until pid holds only held CLOSE sockets (no CLOSE_WAIT,
// no ESTABLISHED): keepalive has reset every connection the broker closed.
func waitHeld(t *testing.T, pid int) int {
	t.Helper()
	var held int
	testio.WaitFor(t, 90*time.Second, "keepalive turns the client's CLOSE_WAIT into held CLOSE", func() bool {
		s, err := netstat.NewScanner("/proc").Scan(context.Background(), netstat.Query{PIDs: []int{pid}})
		if err != nil {
			t.Fatal(err)
		}
		held, other := 0, 0
		for _, k := range s.Sockets {
			switch k.State {
			case netstat.Close:
				held++
			case netstat.CloseWait, netstat.Established:
				other++
			}
		}
		return held > 0 && other == 0
	})
	return held
}

// TestFirstLookHeldClose: once keepalive has reset the sockets a Go client
// held in CLOSE_WAIT, the first look, with no --pid and with --brokers,
// still finds the process (its sockets have no address any more) and warns
// of them in the client's own terms.
func TestFirstLookHeldClose(t *testing.T) {
	for _, tc := range []struct {
		name, mod, src, lib, version, fixWord string
	}{
		{"sarama", "github.com/IBM/sarama@v1.61.1", saramaSource, clients.Sarama, "v1.61.1", "Sarama has no idle timeout"},
		{"franz", "github.com/twmb/franz-go@v1.22.3", franzSource, clients.FranzGo, "v1.22.3", "kgo.ConnIdleTimeout"},
		// A Sarama before the fix of IBM/sarama#3143 (sockets the kernel
		// ended are never closed), in that state.
		{"sarama-old", "github.com/IBM/sarama@v1.45.1", saramaSource, clients.Sarama, "v1.45.1", "Sarama has no idle timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := goClient(t, tc.name, tc.mod, tc.src)
			cl := startHeld(t, bin)
			pid := cl.cmd.Process.Pid
			waitHeld(t, pid)
			r, code := firstLook(t)
			checkFirstLookHolds(t, r, code, pid, tc.lib, tc.version, "sockets-held-closed", tc.fixWord)
			// The wording is the namespace's, not a default's.
			if w := warnings(reportOf(r, pid)); len(w) > 0 && len(w[0].Causes) > 0 && !strings.Contains(w[0].Causes[0].Title, "2s in this process's network namespace") {
				t.Errorf("the held CLOSE cause does not cite the namespace's tcp_fin_timeout (2 s): %q", w[0].Causes[0].Title)
			}
			r, code = firstLook(t, "--brokers", "127.0.0.1:9092")
			checkFirstLookHolds(t, r, code, pid, tc.lib, tc.version, "sockets-held-closed", tc.fixWord)
			p := reportOf(r, pid)
			if p.Sockets["CLOSE"] == 0 {
				t.Errorf("--brokers: the held CLOSE sockets are not counted: %v", p.Sockets)
			}
			// The known bug, where the version has it: its issue and the
			// release that fixed it, as a warning (the symptom is shown).
			var bug *doctor.Finding
			for i, f := range p.Findings {
				if f.ID == analyzer.KindKnownBug && strings.Contains(f.Title, "IBM/sarama#3143") {
					bug = &p.Findings[i]
				}
			}
			switch {
			case tc.version == "v1.45.1" && (bug == nil || bug.Severity != analyzer.Warning || !strings.Contains(bug.Title, "fixed in v1.48.0")):
				t.Errorf("Sarama v1.45.1 holding held CLOSE: known-bug finding %+v, want a warning naming IBM/sarama#3143 and v1.48.0", bug)
			case tc.version != "v1.45.1" && bug != nil:
				t.Errorf("%s %s: a known-bug finding for a fixed version: %+v", tc.lib, tc.version, bug)
			}
		})
	}
}

// TestFirstLookKdiagProduce: kdiag's own reference producer, run as the
// README's walkthrough runs it (--reader on-demand, the client's idle
// close off), is named as kdiag's, not as the franz-go it links, and the
// first look warns with its own fix.
func TestFirstLookKdiagProduce(t *testing.T) {
	c := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, kdiagBin(t), "produce", "--bootstrap-server", c.BootstrapServers(), "--topic", "live",
		"--messages", "0", "--interval", "10m", "--duration", "10m", "--reader", "on-demand", "--set", "connections.max.idle.ms=-1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	testio.WaitFor(t, 60*time.Second, "the broker closes the producer's idle connections", func() bool {
		s := c.Stats()
		return s.ClosedIdle >= 1 && s.Open == 0
	})
	testio.WaitFor(t, 10*time.Second, "the producer's sockets reach CLOSE_WAIT", func() bool { cw, _ := states(t, pid, c); return cw >= 1 })
	r, code := firstLook(t, "--brokers", c.BootstrapServers())
	p := reportOf(r, pid)
	if p == nil {
		t.Fatalf("the first look does not list kdiag produce (pid %d)", pid)
	}
	if !p.Client.IsKdiag() || p.Client.Kdiag.Producer == nil || p.Client.Kdiag.Producer.Reader != "on-demand" {
		t.Errorf("kdiag produce is named %q (%+v), want kdiag's reference producer with the on-demand reader", p.Client.String(), p.Client.Kdiag)
	}
	w := warnings(p)
	if len(w) == 0 || w[0].ID != "close-wait-held" || !strings.Contains(w[0].Fix, "--reader poll") || strings.Contains(w[0].Fix, "kgo.") {
		t.Errorf("first look's warnings %+v: want close-wait-held with kdiag produce's own fix (--reader poll), no franz-go words", w)
	}
	if code != 1 && code != 2 {
		t.Errorf("first look exits %d, want 1", code)
	}
	t.Logf("first look: %s: %v", p.Client.String(), findingIDs(*p))
}
