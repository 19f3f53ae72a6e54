package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/doctor"
	"github.com/kdiag/kdiag/internal/testbin"
	"github.com/kdiag/kdiag/netstat"
)

var kdiagBin string

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m.Run, &kdiagBin, "the e2e tests"))
}

// peerIdle is how long the test's "broker" lets the connection idle before
// it closes it, as a broker's connections.max.idle.ms does.
const peerIdle = 2 * time.Second

// closeWaitWithKeepalive makes one CLOSE_WAIT socket held by this process:
// a client dialled with Go's keepalive (at a 1 s period instead of the
// default 15 s, so that its probes come within the test), a request and a
// response, then the peer's close after peerIdle of quiet. The peer's side
// stays in FIN_WAIT_2 (tcp_fin_timeout, 60 s) and answers every probe, so
// each probe's ACK resets tcp_info's last-ACK time: what made kdiag call a
// minute-old CLOSE_WAIT 8 s old. It returns the client's local address and
// the time the FIN was sent.
func closeWaitWithKeepalive(t *testing.T) (net.Addr, time.Time) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	d := net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: time.Second, Interval: time.Second, Count: 30}}
	client, err := d.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if _, err := server.Read(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Write([]byte("response")); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Read(buf); err != nil {
		t.Fatal(err)
	}
	// The peer's idle close: quiet for peerIdle, then the FIN. The client
	// never reads again, as a Go Kafka client with nothing pending.
	time.Sleep(peerIdle)
	fin := time.Now()
	if err := server.Close(); err != nil {
		t.Fatal(err)
	}
	return client.LocalAddr(), fin
}

// waitWidened waits until a scan shows the socket's age as a range: a
// keepalive ACK has come after the FIN.
func waitWidened(t *testing.T, local net.Addr) {
	t.Helper()
	sc := netstat.NewScanner("/proc")
	sc.NoCache = true
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := sc.Scan(context.Background(), netstat.Query{States: netstat.States(netstat.CloseWait), PIDs: []int{os.Getpid()}})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range s.Sockets {
			if k.Local.String() == local.String() && k.HasAge && !k.AgeExact() {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no keepalive ACK widened the CLOSE_WAIT socket's age within 30s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ageToken is one age as human.Age writes it.
var ageToken = regexp.MustCompile(`(\d+)d(\d\d)h|(\d+)h(\d\d)m|(\d+)m(\d\d)s|(\d+(?:\.\d)?)s`)

func parseAge(s string) (time.Duration, bool) {
	m := ageToken.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n := func(i int) time.Duration { v, _ := strconv.Atoi(m[i]); return time.Duration(v) }
	switch {
	case m[1] != "":
		return n(1)*24*time.Hour + n(2)*time.Hour, true
	case m[3] != "":
		return n(3)*time.Hour + n(4)*time.Minute, true
	case m[5] != "":
		return n(5)*time.Minute + n(6)*time.Second, true
	}
	f, _ := strconv.ParseFloat(m[7], 64)
	return time.Duration(f * float64(time.Second)), true
}

// bounds reads an age as kdiag writes it ("5.2s", "~5.2s", "3.1s-7.2s",
// "≥3.1s", "at least 3.1s, at most 7.2s") into what it claims: at least
// lo, at most hi (hi < 0: no upper bound).
func bounds(s string) (lo, hi time.Duration, ok bool) {
	s = strings.TrimSpace(s)
	var toks []time.Duration
	for _, m := range ageToken.FindAllString(s, 2) {
		d, _ := parseAge(m)
		toks = append(toks, d)
	}
	switch {
	case len(toks) == 0:
		return 0, 0, false
	case strings.HasPrefix(s, "≥"), strings.HasPrefix(s, "at least") && !strings.Contains(s, "at most"):
		return toks[0], -1, true
	case len(toks) == 2 && (strings.Contains(s, "at most") || strings.Contains(s, "-")):
		return toks[0], toks[1], true
	}
	return toks[0], toks[0], true // exact, or ~narrowed: one figure
}

// claim is one age kdiag gave, where, as text ("~5.2s") or as bounds
// (JSON and metrics: lo, hi; hi < 0 when unbounded).
type claim struct {
	where, text string
	lo, hi      time.Duration
}

// check holds every claim to the true age, which lay in [lo, hi] while
// the command ran: none may say the socket is younger than it was, nor
// older. slack covers human.Age's rounding and the scan's own time.
func check(t *testing.T, claims []claim, lo, hi time.Duration) {
	t.Helper()
	const slack = 600 * time.Millisecond
	if len(claims) == 0 {
		t.Fatal("no age was reported")
	}
	for _, c := range claims {
		cl, ch, ok := c.lo, c.hi, true
		if c.text != "" {
			cl, ch, ok = bounds(c.text)
		}
		switch {
		case !ok:
			t.Errorf("%s: %q is no age", c.where, c.text)
		case ch >= 0 && ch+slack < lo:
			t.Errorf("%s says %q [%s, %s]: younger than the true age, at least %s", c.where, c.text, cl, ch, lo.Round(100*time.Millisecond))
		case cl > hi+slack:
			t.Errorf("%s says %q [%s, %s]: older than the true age, at most %s", c.where, c.text, cl, ch, hi.Round(100*time.Millisecond))
		default:
			t.Logf("%s: %q [%s, %s] (true age %s-%s)", c.where, c.text, cl, ch, lo.Round(100*time.Millisecond), hi.Round(100*time.Millisecond))
		}
	}
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kdiagBin, args...).Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("kdiag %v: %v", args, err)
	}
	return string(out)
}

// after returns, for each line of out that has label, what follows it up
// to the first of stops (or the line's end).
func after(out, label, where string, stops ...string) []claim {
	var cs []claim
	for _, line := range strings.Split(out, "\n") {
		_, rest, ok := strings.Cut(line, label)
		if !ok {
			continue
		}
		for _, stop := range stops {
			if i := strings.Index(rest, stop); i >= 0 {
				rest = rest[:i]
			}
		}
		cs = append(cs, claim{where: where, text: strings.TrimSuffix(strings.TrimSpace(rest), ".")})
	}
	return cs
}

// TestReportedAgesNeverYounger: with Go's keepalive resetting tcp_info's
// last-ACK time, every age doctor, watch, the report and the metrics give
// of a CLOSE_WAIT socket whose FIN time the test knows holds the true age:
// never a lower bound given as the age. With the peer's idle timeout
// given, the narrowed age is the true one.
func TestReportedAgesNeverYounger(t *testing.T) {
	local, fin := closeWaitWithKeepalive(t)
	waitWidened(t, local)
	time.Sleep(2 * time.Second) // a few more probes: the lower bound stays young, the true age grows
	pid := strconv.Itoa(os.Getpid())
	dir := t.TempDir()
	rec, prom := filepath.Join(dir, "rec.jsonl"), filepath.Join(dir, "prom")
	if err := os.Mkdir(prom, 0o755); err != nil {
		t.Fatal(err)
	}

	// Each command's claims are held to the true age while it ran.
	type window struct{ lo, hi time.Duration }
	runIn := func(args ...string) (string, window) {
		from := time.Since(fin)
		out := run(t, args...)
		return out, window{from, time.Since(fin)}
	}
	doc, wDoc := runIn("doctor", "--pid", pid, "-o", "json")
	docText, wText := runIn("doctor", "--pid", pid)
	docIdle, wIdle := runIn("doctor", "--pid", pid, "--broker-idle-ms", strconv.FormatInt(peerIdle.Milliseconds(), 10))
	watch, wWatch := runIn("watch", "--pid", pid, "--state", "close-wait", "--interval", "500ms", "--count", "3", "--stuck-age", "1s", "--record", rec, "--textfile", prom)
	report := run(t, "report", "--stuck-age", "1s", rec)
	metrics, err := os.ReadFile(filepath.Join(prom, "kdiag.prom"))
	if err != nil {
		t.Fatal(err)
	}
	var r doctor.Report
	if err := json.Unmarshal([]byte(doc), &r); err != nil || len(r.Processes) != 1 || r.Processes[0].OldestCloseWait == nil {
		t.Fatalf("doctor -o json: %v\n%s", err, doc)
	}
	b := r.Processes[0].OldestCloseWait
	hi := time.Duration(-1)
	if b.HasMax {
		hi = b.Max
	}
	check(t, []claim{{where: "doctor -o json", lo: b.Min, hi: hi}}, wDoc.lo, wDoc.hi)
	check(t, append(after(docText, "oldest CLOSE_WAIT:", "doctor", " ("), after(docText, ") is ", "doctor's finding", ", since", " (")...), wText.lo, wText.hi)
	idle := after(docIdle, "oldest CLOSE_WAIT:", "doctor --broker-idle-ms", " (")
	check(t, idle, wIdle.lo, wIdle.hi)
	var claims []claim
	claims = append(claims, after(watch, "oldest=", "watch", " ", "|")...)
	claims = append(claims, after(watch, ") is ", "watch's finding", ", since", " (")...)
	claims = append(claims, after(report, ") is ", "report's finding", ", since", " (")...)
	var gauges int
	for _, line := range strings.Split(string(metrics), "\n") {
		if strings.HasPrefix(line, "kdiag_close_wait_oldest_age") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			d := time.Duration(v * float64(time.Second))
			c := claim{where: "metrics " + f[0], lo: d, hi: d}
			if strings.HasPrefix(line, "kdiag_close_wait_oldest_age_seconds") {
				c.hi = -1 // the least it can be, when not exact (its HELP says so)
			}
			if strings.HasPrefix(line, "kdiag_close_wait_oldest_age_max_seconds") {
				c.lo = 0
			}
			claims = append(claims, c)
			gauges++
		}
	}
	if gauges != 2 {
		t.Errorf("metrics: %d oldest-age gauges, want _seconds and _max_seconds:\n%s", gauges, metrics)
	}
	check(t, claims, wWatch.lo, wWatch.hi)
	for _, c := range idle {
		if lo, hi, _ := bounds(c.text); lo != hi || !strings.HasPrefix(c.text, "~") {
			t.Errorf("with --broker-idle-ms the age is narrowed to one figure; doctor says %q", c.text)
		}
	}
}
