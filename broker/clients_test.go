package broker

// Third-party clients against the embedded broker: kcat (librdkafka) and
// franz-go's kgo produce (and kcat consumes) through it, and each test
// records what the client leaves behind after the broker's idle close, by
// reading the client's own sockets to the broker from /proc/net/tcp and
// attributing them to the client's pid through /proc/<pid>/fd.
//
// What they observe (and assert, as stable and explained behaviour):
//
//   - kcat (librdkafka) keeps every broker socket in its poll set, so it reads
//     the broker's FIN at once and closes: its sockets never stay in
//     CLOSE_WAIT; it reconnects when it has something to send, and the next
//     message is delivered.
//   - kgo reads a connection only while a response is pending, so the
//     connections the broker closed for idleness sit in CLOSE_WAIT, every one
//     of them, until kgo either writes on one again (the write draws an RST,
//     the read sees EOF, kgo closes it and retries on a new connection) or
//     its ConnIdleTimeout reaper closes it (up to 2x ConnIdleTimeout after
//     the last use; 30s by default, so a CLOSE_WAIT lives for up to ~60s per
//     connection with a default client).
//
// No test races the broker's idle timer: each runs the cluster with no
// reaper (Idle 0) and closes the client's connections itself with
// Cluster.CloseIdle once they are idle now, as the reaper would once Idle
// passed. Where a client's own timer must not fire during a check, the
// timer is set longer than the test can live.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/netstat"
	"github.com/twmb/franz-go/pkg/kgo"
)

// clientSockets returns the ESTABLISHED and CLOSE_WAIT sockets that pid holds
// to the brokers at addrs.
func clientSockets(t *testing.T, pid int, addrs []string) []netstat.Socket {
	t.Helper()
	var remotes []netip.AddrPort
	for _, a := range addrs {
		remotes = append(remotes, netip.MustParseAddrPort(a))
	}
	all, err := netstat.ReadProcNetTCP("/proc", 0, netstat.States(netstat.Established, netstat.CloseWait))
	if err != nil {
		t.Fatalf("read /proc/net/tcp: %v", err)
	}
	var toBroker []netstat.Socket
	for _, s := range all {
		if slices.Contains(remotes, s.Remote) {
			toBroker = append(toBroker, s)
		}
	}
	netstat.NewAttributor("/proc").AttributeSockets(context.Background(), []int{pid}, toBroker)
	var out []netstat.Socket
	for _, s := range toBroker {
		if s.PID == pid {
			out = append(out, s)
		}
	}
	return out
}

// countStates counts ESTABLISHED and CLOSE_WAIT sockets.
func countStates(socks []netstat.Socket) (est, cw int) {
	for _, s := range socks {
		switch s.State {
		case netstat.Established:
			est++
		case netstat.CloseWait:
			cw++
		}
	}
	return est, cw
}

func describe(socks []netstat.Socket) string {
	var parts []string
	for _, s := range socks {
		parts = append(parts, fmt.Sprintf("%s->%s %s", s.Local, s.Remote, s.State))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func requireKcat(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (Debian package kcat; .ci/run installs it): skipping the librdkafka client test")
	}
	return path
}

// kcat runs kcat to completion with stdin, bounded in time.
func kcat(t *testing.T, kcatPath string, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcatPath, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

func TestKcatProducesAndConsumes(t *testing.T) {
	kc := requireKcat(t)
	c, _ := startTest(t, Config{Brokers: 3})
	bs := c.BootstrapServers()
	// The topic does not exist: the broker creates it on kcat's metadata
	// request (librdkafka's producer asks for auto-creation).
	kcat(t, kc, "hello from kcat\n", "-b", bs, "-P", "-t", "kcat-test")
	got := kcat(t, kc, "", "-b", bs, "-C", "-t", "kcat-test", "-c", "1", "-e")
	if strings.TrimSpace(got) != "hello from kcat" {
		t.Fatalf("consumed %q, want %q", got, "hello from kcat")
	}
	if s := c.Stats(); s.Accepted == 0 {
		t.Fatalf("broker accepted no connection: %+v", s)
	}
}

// closeIdleNow waits until the cluster's connections are all idle now and
// closes them as the broker's idle close does, returning how many it closed.
func closeIdleNow(t *testing.T, c *Cluster) int {
	t.Helper()
	waitFor(t, 20*time.Second, "the client's connections are idle", func() bool { return allIdleNow(c) })
	n := c.CloseIdle()
	if n == 0 {
		t.Fatalf("CloseIdle closed nothing; broker %+v", c.Stats().Counts)
	}
	return n
}

func TestKcatAfterIdleClose(t *testing.T) {
	kc := requireKcat(t)
	c, _ := startTest(t, Config{Brokers: 3})
	addrs := c.Addrs()
	bs := c.BootstrapServers()

	// A long-lived kcat producer reading from a pipe we keep open. -E: when
	// every broker connection librdkafka has is down at once, as after an
	// idle close of all of them, it reports ALL_BROKERS_DOWN, and kcat
	// (kcat.c's error_cb, not librdkafka) exits on it unless -E says not
	// to: that exit was issue 16's "All broker connections are down". An
	// application keeps running and librdkafka reconnects, which is what
	// this test checks.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kc, "-E", "-b", bs, "-P", "-t", "kcat-idle")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	w := bufio.NewWriter(stdin)
	fmt.Fprintln(w, "before idle close")
	w.Flush()

	// The broker closes kcat's connections once they are idle.
	closed := closeIdleNow(t, c)
	// librdkafka polls every socket, so it reads the FIN and closes: after
	// the close, no CLOSE_WAIT remains (a transient one may be seen for the
	// few ms between FIN and close, so the test waits for the settled state
	// and then checks it holds).
	var peakCW int
	waitFor(t, 10*time.Second, "kcat holds no CLOSE_WAIT", func() bool {
		_, cw := countStates(clientSockets(t, pid, addrs))
		peakCW = max(peakCW, cw)
		return cw == 0
	})
	for range 5 {
		time.Sleep(100 * time.Millisecond)
		socks := clientSockets(t, pid, addrs)
		if _, cw := countStates(socks); cw != 0 {
			t.Fatalf("kcat holds CLOSE_WAIT %s after it had none", describe(socks))
		}
	}
	t.Logf("kcat after the broker's idle close of %d connection(s): broker %+v, kcat sockets %s, peak CLOSE_WAIT seen %d",
		closed, c.Stats().Counts, describe(clientSockets(t, pid, addrs)), peakCW)

	// kcat reconnects for the next message, which is delivered.
	fmt.Fprintln(w, "after idle close")
	w.Flush()
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kcat producer: %v\nstderr:\n%s", err, stderr.String())
	}
	got := kcat(t, kc, "", "-b", bs, "-C", "-t", "kcat-idle", "-c", "2", "-e", "-f", "%s\n")
	lines := strings.Fields(strings.ReplaceAll(got, " ", "_"))
	slices.Sort(lines)
	if want := []string{"after_idle_close", "before_idle_close"}; !slices.Equal(lines, want) {
		t.Fatalf("consumed %q, want %q", lines, want)
	}
}

// kgoIdleClosed produces one record with a new kgo client, then has the
// broker close, as idle, every connection open once all are idle now. It
// returns the client, how many connections it had opened and how many the
// broker closed: fewer when kgo closed some itself first.
//
// The client sends no KIP-714 client metrics: kgo asks for its telemetry
// subscription just after its first produce, and a request in flight when
// the broker closes is one kgo reads, so it would see that close at once.
// Without it kgo is quiet once the produce is answered.
func kgoIdleClosed(t *testing.T, c *Cluster, topic string, opts ...kgo.Opt) (cl *kgo.Client, opened, closed int) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic(topic), kgo.DisableClientMetrics()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("first")).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	waitFor(t, 20*time.Second, "kgo's connections are idle or closed", func() bool {
		open, idle := idleCounts(c)
		return open == idle
	})
	return cl, c.Stats().Accepted, c.CloseIdle()
}

func TestKgoAfterIdleClose(t *testing.T) {
	c, logs := startTest(t, Config{Brokers: 1, Topics: []string{"kgo-idle"}})
	addrs := c.Addrs()
	pid := os.Getpid()
	// kgo's own reaper must not close the CLOSE_WAIT sockets while the test
	// looks at them: at 10 minutes it cannot, as go test's default timeout
	// ends the test first.
	cl, opened, closed := kgoIdleClosed(t, c, "kgo-idle", kgo.ConnIdleTimeout(10*time.Minute))
	if closed != opened || opened == 0 {
		t.Fatalf("the broker closed %d of kgo's %d connections", closed, opened)
	}

	// kgo does not read idle connections, so every one the broker closed
	// goes to CLOSE_WAIT and stays there.
	var held []netstat.Socket
	defer func() {
		if t.Failed() {
			t.Logf("sockets %s\nlog:\n%s", describe(held), logs.String())
		}
	}()
	waitFor(t, 5*time.Second, "kgo's sockets reach CLOSE_WAIT", func() bool {
		held = clientSockets(t, pid, addrs)
		_, cw := countStates(held)
		return cw == opened
	})
	for range 5 {
		time.Sleep(100 * time.Millisecond)
		if _, cw := countStates(clientSockets(t, pid, addrs)); cw != opened {
			t.Fatalf("kgo's CLOSE_WAIT count changed from %d to %d before any write or reap", opened, cw)
		}
	}
	t.Logf("kgo after the broker's idle close: %d connection(s) opened, all in CLOSE_WAIT: %s", opened, describe(held))

	// The next produce writes on a CLOSE_WAIT connection (or replaces it),
	// fails over to a new connection and succeeds.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("second")).FirstErr(); err != nil {
		t.Fatalf("produce after idle close: %v", err)
	}
	after := clientSockets(t, pid, addrs)
	est, cw := countStates(after)
	t.Logf("kgo after the next produce: broker %+v, sockets %s", c.Stats().Counts, describe(after))
	if cw >= opened || est == 0 {
		t.Fatalf("after the next produce kgo holds %d CLOSE_WAIT and %d ESTABLISHED, want the connection it wrote on replaced: %s", cw, est, describe(after))
	}

	// The records were stored.
	cons, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics("kgo-idle"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	for len(got) < 2 && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	if want := []string{"first", "second"}; !slices.Equal(got, want) {
		t.Fatalf("consumed %q, want %q", got, want)
	}
}

// TestKgoReaperClosesCloseWait: kgo's ConnIdleTimeout reaper is what ends
// the CLOSE_WAIT of a connection kgo never writes on again. The broker must
// close first, within ConnIdleTimeout of the produce; on a machine too slow
// for that, kgo's reaper wins, which the counts show, and the test tries
// again with a ConnIdleTimeout four times longer. It waits for the end state
// the reaper causes (no socket to the broker left while the client lives),
// not for a moment inside its period.
func TestKgoReaperClosesCloseWait(t *testing.T) {
	pid := os.Getpid()
	for _, connIdle := range []time.Duration{2 * time.Second, 8 * time.Second, 32 * time.Second} {
		c, _ := startTest(t, Config{Brokers: 1, Topics: []string{"kgo-reap"}})
		cl, opened, closed := kgoIdleClosed(t, c, "kgo-reap", kgo.ConnIdleTimeout(connIdle))
		if closed != opened || opened == 0 {
			t.Logf("ConnIdleTimeout %v: kgo's reaper closed %d of its %d connections before the broker did: trying a longer one", connIdle, opened-closed, opened)
			cl.Close()
			c.Close()
			continue
		}
		waitFor(t, 4*connIdle+20*time.Second, "kgo's reaper closes its broker-closed sockets", func() bool {
			return len(clientSockets(t, pid, c.Addrs())) == 0
		})
		if s := c.Stats(); s.ClosedIdle != opened || s.Open != 0 {
			t.Fatalf("broker %+v, want the %d connections kgo opened closed as idle and none open", s.Counts, opened)
		}
		t.Logf("ConnIdleTimeout %v: kgo's reaper closed the %d connection(s) the broker had closed; no socket to the broker left", connIdle, opened)
		return
	}
	t.Fatal("kgo's reaper closed its connections before the broker's close each time, even with a 32s ConnIdleTimeout")
}
