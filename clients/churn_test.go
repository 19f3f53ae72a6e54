package clients_test

// The incidents people report beyond a passive close (issue 28), each
// driven with a real client: producers created and never closed, a process
// near its fd limit, and a client that reconnects after each idle close of
// the broker's. The test makes each event happen (a producer per command,
// an idle close per call of Cluster.CloseIdle) while kdiag doctor samples
// with --duration, and checks what doctor says: the finding, its figures.

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/doctor"
	"github.com/kdiag/kdiag/fds"
	"github.com/kdiag/kdiag/netstat"
)

// finding returns the process's finding of kind, nil when there is none.
func finding(p *doctor.Process, kind string) *doctor.Finding {
	i := slices.IndexFunc(p.Findings, func(f doctor.Finding) bool { return f.ID == kind })
	if i < 0 {
		return nil
	}
	return &p.Findings[i]
}

// doctorDuring starts `kdiag doctor -o json ARGS` in the background and
// returns a function that waits for its report.
func doctorDuring(t *testing.T, args ...string) func() (*doctor.Report, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, kdiagBin(t), append([]string{"doctor", "-o", "json"}, args...)...)
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return func() (*doctor.Report, int) {
		t.Helper()
		err := <-done
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return decodeReport(t, out.String(), code), code
	}
}

// TestJavaProducersNeverClosed: nine KafkaProducers alive in one JVM, each
// made for one message and never closed (the real kafka-clients 3.9.0):
// one look of doctor warns of them, and its fd census counts the epoll
// instance each producer's Selector holds.
func TestJavaProducersNeverClosed(t *testing.T) {
	c := startIdleBroker(t)
	one := startJava(t, "3.9.0", c.BootstrapServers(), 1)
	j := startJava(t, "3.9.0", c.BootstrapServers(), 9)
	for i := 1; i <= 9; i++ {
		j.do("send " + strconv.Itoa(i))
		j.waitLine("acked " + strconv.Itoa(i-1))
	}
	one.do("send 1")
	one.waitLine("acked 0")
	r, code := firstLook(t, "--pid", strconv.Itoa(j.pid), "--pid", strconv.Itoa(one.pid))
	many, single := reportOf(r, j.pid), reportOf(r, one.pid)
	if many == nil || single == nil {
		t.Fatalf("doctor lists %d processes, want both JVMs", len(r.Processes))
	}
	f := finding(many, analyzer.KindInstancesMany)
	if f == nil || f.Severity != analyzer.Warning || many.Instances == nil || *many.Instances != 9 {
		t.Fatalf("nine producers: instances %v, finding %+v; want 9 and a warning", many.Instances, f)
	}
	if finding(single, analyzer.KindInstancesMany) != nil {
		t.Errorf("one producer got the many-instances finding")
	}
	if many.FDs == nil || single.FDs == nil {
		t.Fatalf("no fd census: %+v %+v", many.FDs, single.FDs)
	}
	// Each KafkaProducer's Selector is one epoll instance: eight more
	// producers, eight more epoll fds.
	if d := many.FDs.ByKind[fds.Epoll] - single.FDs.ByKind[fds.Epoll]; d != 8 {
		t.Errorf("epoll fds: %d with nine producers, %d with one: %d more, want 8", many.FDs.ByKind[fds.Epoll], single.FDs.ByKind[fds.Epoll], d)
	}
	if !strings.Contains(strings.Join(f.KeyEvidence, " "), "epoll instances") || code < 1 {
		t.Errorf("finding evidence %q, exit %d: want the epoll count and exit 1", f.KeyEvidence, code)
	}
	t.Logf("nine producers: %s; fds %s; one producer: fds %s", f.Title, analyzer.CensusWords(many.FDs.Census), analyzer.CensusWords(single.FDs.Census))
}

// TestJavaReconnectChurn: a polling Java producer answers each idle close of
// the broker's by reconnecting for metadata. With the test closing its idle
// connections every 3 s while doctor samples for 40 s, doctor counts the new
// connections and reports the churn with its rate.
func TestJavaReconnectChurn(t *testing.T) {
	c := startIdleBroker(t)
	j := startJava(t, "3.9.0", c.BootstrapServers(), 1)
	j.do("send 1")
	j.waitLine("acked 0")
	wait := doctorDuring(t, "--pid", strconv.Itoa(j.pid), "--brokers", c.BootstrapServers(), "--duration", "40s", "--interval", "1s")
	closes := 0
	for end := time.Now().Add(38 * time.Second); time.Now().Before(end); {
		if c.CloseIdle() > 0 {
			closes++
		}
		time.Sleep(3 * time.Second)
	}
	r, _ := wait()
	p := reportOf(r, j.pid)
	if p == nil {
		t.Fatal("doctor does not list the producer")
	}
	f := finding(p, analyzer.KindReconnects)
	if f == nil {
		t.Fatalf("%d driven idle closes: no %s finding: %v", closes, analyzer.KindReconnects, findingIDs(*p))
	}
	if !strings.Contains(f.Title, "reconnects to 1 broker every ~") || f.Severity != analyzer.Info {
		t.Errorf("finding %q (%s), want an info with the reconnect interval", f.Title, f.Severity)
	}
	// The ports toward the broker, counted with the TIME_WAIT no process
	// holds (none here: the broker closed each connection first).
	ports := regexp.MustCompile(`^Ports: toward 127\.0\.0\.1:\d+, 0 TIME_WAIT and 0 SYN_SENT \(any holder\); [1-9]\d* of the \d+ ephemeral ports \(\d+-\d+\) in use toward it`)
	// They are counted from the last scan's sockets of the process to the
	// broker: one the scan caught between a close and its reconnect has
	// none, and no ports line.
	switch open := p.BrokerSockets[netstat.Established.String()]; {
	case open > 0 && !slices.ContainsFunc(f.KeyEvidence, ports.MatchString):
		t.Errorf("evidence %q with %d connections to the broker at the last scan, want the ports in use toward it", f.KeyEvidence, open)
	case open == 0:
		t.Logf("the last scan caught the producer between a close and its reconnect: no ports line to check")
	}
	t.Logf("%d driven idle closes in 38s: %s; %q", closes, f.Title, f.KeyEvidence)
}

// clientPerLine is a franz-go program that, for each line on stdin, makes
// a new client, produces one record with it and never closes it.
const clientPerLine = `package main

import (
	"bufio"
	"context"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	var leaked []*kgo.Client
	in := bufio.NewScanner(os.Stdin)
	first := true
	for first || in.Scan() {
		first = false
		cl, err := kgo.NewClient(kgo.SeedBrokers(os.Args[1]), kgo.DefaultProduceTopic("live"))
		if err != nil {
			panic(err)
		}
		if err := cl.ProduceSync(context.Background(), kgo.StringRecord("one")).FirstErr(); err != nil {
			panic(err)
		}
		leaked = append(leaked, cl)
		fmt.Println("sent")
	}
	select {}
}
`

// TestGoClientPerMessageNearFDLimit: a franz-go program that makes a client
// per message and never closes it, under an fd limit of 256 (prlimit),
// given a message a second while doctor samples for 40 s: its connections
// grow, and its fds grow toward the limit, with the time left to EMFILE.
func TestGoClientPerMessageNearFDLimit(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit not installed (Debian package util-linux)")
	}
	bin := goClient(t, "perline", "github.com/twmb/franz-go@v1.22.3", clientPerLine)
	c := startBroker(t)
	cl := start(t, nil, "prlimit", "--nofile=256", bin, c.BootstrapServers())
	pid := cl.cmd.Process.Pid
	wait := doctorDuring(t, "--pid", strconv.Itoa(pid), "--brokers", c.BootstrapServers(), "--duration", "40s", "--interval", "1s")
	for end := time.Now().Add(38 * time.Second); time.Now().Before(end); {
		cl.poke(t)
		time.Sleep(time.Second)
	}
	r, _ := wait()
	p := reportOf(r, pid)
	if p == nil {
		t.Fatal("doctor does not list the program")
	}
	// The churn finding: connections that grow, ESTABLISHED (kept) or
	// CLOSE_WAIT (once the broker closed each leaked client's idle
	// connection), blamed first on clients created and never closed.
	leak := finding(p, analyzer.KindConnLeak)
	if cw := finding(p, analyzer.KindLeak); leak == nil && cw != nil {
		leak = cw
	}
	if leak == nil || len(leak.Causes) == 0 || leak.Causes[0].ID != "clients-not-closed" {
		t.Errorf("a client per message: findings %v, want growing connections caused first by clients-not-closed", findingIDs(*p))
	}
	f := finding(p, analyzer.KindFDLimit)
	if f == nil || p.FDs == nil || p.FDs.Soft != 256 || p.FDs.UntilLimit <= 0 || !strings.Contains(f.Title, "EMFILE") {
		t.Fatalf("fds %+v, finding %+v: want the limit 256, a growth and the time to EMFILE", p.FDs, f)
	}
	t.Logf("client per message under ulimit -n 256: %s", f.Title)
}
