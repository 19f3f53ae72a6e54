package repro

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/internal/testbin"
	"github.com/kdiag/kdiag/internal/testio"
)

// kdiagBin is a kdiag binary built once for the package's tests: the
// scenarios run its `kdiag produce` as their child, as `kdiag repro` does.
var kdiagBin string

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m.Run, &kdiagBin, "the repro tests"))
}

// testSockets is shared by the parallel tests, so that each sample is one
// scan of the host for all of them.
var testSockets = ScannerSource("/proc")

// testIdle is the broker idle timeout of the integration tests: short, with
// the healthy client's 0.9x idle 200ms ahead of the broker's.
const testIdle = 2 * time.Second

// runScenario runs a catalog scenario against the embedded broker, sampling
// the child's sockets through netstat on its pid.
func runScenario(t *testing.T, name string, d time.Duration) *Result {
	t.Helper()
	return runScenarioAt(t, name, d, "")
}

// runScenarioAt is runScenario against the cluster at bootstrap, unless
// it is "".
func runScenarioAt(t *testing.T, name string, d time.Duration, bootstrap string) *Result {
	t.Helper()
	sc, ok := Lookup(name)
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, sc, Options{
		Executable:     kdiagBin,
		Bootstrap:      bootstrap,
		BrokerIdle:     testIdle,
		Duration:       d,
		SampleInterval: 150 * time.Millisecond,
		Sockets:        testSockets,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: peak %d final %d oldest %dms by remote %v; client %+v; broker %+v; verdict %q; notes %q",
		name, res.CloseWaitPeak, res.CloseWaitFinal, res.CloseWaitOldestMS, res.CloseWaitFinalByRemote,
		res.Client, res.Broker, res.Verdict, res.Notes)
	if res.Client == nil {
		t.Fatalf("no client stats from the producer: %q", res.Notes)
	}
	if bootstrap == "" && (res.Broker == nil || res.Broker.Accepted == 0) {
		t.Fatalf("the producer never reached the broker: %+v", res.Broker)
	}
	return res
}

// TestHealthyClientIdleLeadsAtEveryScale: the healthy scenario's client
// closes idle connections before the broker's timeout at any scale kdiag
// repro accepts (the ordering the scenario shows; its margin is a tenth of
// the broker's timeout, Java's 9m against 10m).
func TestHealthyClientIdleLeadsAtEveryScale(t *testing.T) {
	sc, _ := Lookup("healthy")
	for _, idle := range []time.Duration{100 * time.Millisecond, testIdle, 3 * time.Second, 30 * time.Second, RealBrokerIdle} {
		if c := Scale(sc.ClientIdle, idle); c >= idle || c <= 0 {
			t.Errorf("broker idle %v: client idle %v, want it below and positive", idle, c)
		}
	}
}

// TestHealthyNoCloseWaitHeld runs the healthy scenario at its own scale:
// whoever closes each idle connection (the client, when a poll ends after
// its idle deadline; the broker, when none does first), none stays in
// CLOSE_WAIT: the client reads every FIN at once.
func TestHealthyNoCloseWaitHeld(t *testing.T) {
	t.Parallel()
	res := runScenario(t, "healthy", 4*testIdle)
	if res.CloseWaitFinal != 0 || res.CloseWaitOldestMS >= AtOnce.Milliseconds() {
		t.Errorf("CLOSE_WAIT final %d, the longest %dms: want none held (each FIN read within %v)", res.CloseWaitFinal, res.CloseWaitOldestMS, AtOnce)
	}
	if res.Client.ClosedIdle+int64(res.Broker.ClosedIdle) == 0 {
		t.Errorf("no idle close by the client (%d) or the broker (%d) in %v", res.Client.ClosedIdle, res.Broker.ClosedIdle, 4*testIdle)
	}
	if !res.AsExpected || !strings.HasPrefix(res.Verdict, "OK: no CLOSE_WAIT held") {
		t.Errorf("verdict %q, as expected %v", res.Verdict, res.AsExpected)
	}
}

// TestHealthyClientClosesIdleWithALead runs the healthy scenario against
// a broker whose idle timeout is twice what the scenario is scaled for, so
// that the client's idle timeout (0.9 x testIdle) leads the broker's by 1.1
// x testIdle, longer than the client's poll ever waits here
// (metadata.max.age.ms, 0.5 x testIdle): the client closes every idle
// connection itself, at the end of the first poll past its deadline, and
// the broker closes none. (At the scenario's own scale the lead, 0.1 x,
// is shorter than the poll, and the broker closes some first.)
func TestHealthyClientClosesIdleWithALead(t *testing.T) {
	t.Parallel()
	c, err := broker.Start(context.Background(), broker.Config{Ports: []int{0, 0, 0}, Idle: 2 * testIdle, Topics: []string{DefaultTopic}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res := runScenarioAt(t, "healthy", 4*testIdle, c.BootstrapServers())
	st := c.Stats()
	if res.CloseWaitFinal != 0 || res.CloseWaitPeak != 0 {
		t.Errorf("CLOSE_WAIT peak %d final %d, want none: the client closes idle connections first", res.CloseWaitPeak, res.CloseWaitFinal)
	}
	if res.Client.ClosedIdle == 0 || st.ClosedByClient < int(res.Client.ClosedIdle) {
		t.Errorf("the client idle-closed %d, the broker saw %d closed by the client: want the client's idle closes", res.Client.ClosedIdle, st.ClosedByClient)
	}
	if st.ClosedIdle != 0 || res.Client.PeerCloses != 0 {
		t.Errorf("the broker idle-closed %d, the client saw %d peer closes: want the client first every time", st.ClosedIdle, res.Client.PeerCloses)
	}
	if !res.AsExpected {
		t.Errorf("not as expected: %s", res.Verdict)
	}
}

func TestNeverIdlePollReaderClosesOnFIN(t *testing.T) {
	t.Parallel()
	res := runScenario(t, "never-idle", 4*testIdle)
	if res.CloseWaitFinal != 0 {
		t.Errorf("CLOSE_WAIT final %d, want 0: the poll reader closes on the broker's FIN", res.CloseWaitFinal)
	}
	if res.Broker.ClosedIdle == 0 || res.Client.PeerCloses == 0 {
		t.Errorf("broker idle closes %d, client peer closes %d: want the broker to have closed idle connections",
			res.Broker.ClosedIdle, res.Client.PeerCloses)
	}
	if !res.AsExpected {
		t.Errorf("not as expected: %s", res.Verdict)
	}
}

// TestPassiveCloseHoldsWhatTheBrokerClosed: the on-demand client connects
// to one bootstrap server at creation and to the leaders it sends to, never
// to every broker; each connection the broker closes stays in CLOSE_WAIT
// until the client writes on it again, and the bootstrap connection, which
// it never uses again once it has the brokers' metadata, to the end.
func TestPassiveCloseHoldsWhatTheBrokerClosed(t *testing.T) {
	t.Parallel()
	res := runScenario(t, "passive-close", 4*testIdle)
	if res.CloseWaitFinal == 0 {
		t.Errorf("no CLOSE_WAIT at the end: %v", res.CloseWaitFinalByRemote)
	}
	// Toward brokers it connected to, and no more than the broker closed.
	accepted := map[string]int{}
	for _, b := range res.Broker.Brokers {
		accepted[b.Addr] = b.Accepted
	}
	for addr, n := range res.CloseWaitFinalByRemote {
		if accepted[addr] < n {
			t.Errorf("%d CLOSE_WAIT toward %s, which accepted %d connections", n, addr, accepted[addr])
		}
	}
	if res.CloseWaitFinal > res.Broker.ClosedIdle {
		t.Errorf("%d CLOSE_WAIT at the end, the broker closed %d for idleness", res.CloseWaitFinal, res.Broker.ClosedIdle)
	}
	// Held: from the first sample that shows CLOSE_WAIT on, every sample
	// does.
	seen := false
	for _, s := range res.Series {
		seen = seen || s.CloseWait > 0
		if seen && s.CloseWait == 0 {
			t.Errorf("at %v no CLOSE_WAIT: it was not held", s.Elapsed)
			break
		}
	}
	if !res.AsExpected {
		t.Errorf("not as expected: %s", res.Verdict)
	}
}

func TestLeakGrowsWithProducers(t *testing.T) {
	t.Parallel()
	res := runScenario(t, "leak", 4*testIdle)
	// Every message is a new producer that connects and is never closed.
	if res.Client.ConnectionsOpened < res.Client.RecordsSent || res.Client.RecordsSent < 3 {
		t.Errorf("%d connections for %d messages: want at least one per producer", res.Client.ConnectionsOpened, res.Client.RecordsSent)
	}
	n := len(res.Series)
	mid, end := res.Series[n/2], res.Series[n-1]
	if end.CloseWait <= mid.CloseWait || end.Established+end.CloseWait <= mid.Established+mid.CloseWait {
		t.Errorf("no growth from the middle (%+v) to the end (%+v)", mid, end)
	}
	if !res.AsExpected {
		t.Errorf("not as expected: %s", res.Verdict)
	}
}

// TestStalledCallbackLeavesCloseWaitWhileBlocked: the run releases the
// callbacks only once it has seen every connection in CLOSE_WAIT, and ends
// once none is left, so the outcome does not depend on when the broker's
// reaper runs.
func TestStalledCallbackLeavesCloseWaitWhileBlocked(t *testing.T) {
	t.Parallel()
	res := runScenario(t, "stalled-callback", 4*testIdle)
	if res.CallbacksReleasedMS == 0 {
		t.Fatalf("the callbacks were never released: %q", res.Notes)
	}
	var before, after []Sample
	for _, s := range res.Series {
		if s.ElapsedMS < res.CallbacksReleasedMS {
			before = append(before, s)
		} else {
			after = append(after, s)
		}
	}
	if last := before[len(before)-1]; last.Established != 0 || last.CloseWait == 0 {
		t.Errorf("at the release %+v: want every connection in CLOSE_WAIT", last)
	}
	if res.CloseWaitFinal != 0 || len(after) == 0 {
		t.Errorf("CLOSE_WAIT %d at the end, %d samples after the release: want it gone once the callback returned", res.CloseWaitFinal, len(after))
	}
	// The stalled client closed those sockets on the FINs it had read.
	if res.Client.PeerCloses < int64(res.CloseWaitPeak) {
		t.Errorf("client peer closes %d for %d sockets in CLOSE_WAIT", res.Client.PeerCloses, res.CloseWaitPeak)
	}
	if !strings.HasPrefix(res.Verdict, "CLOSE_WAIT came and went: up to ") || !res.AsExpected {
		t.Errorf("verdict %q, as expected %v: want CLOSE_WAIT that came and went", res.Verdict, res.AsExpected)
	}
}

// TestExternalCluster runs a scenario against a cluster kdiag did not start
// (--bootstrap-server with --broker-idle): here a broker the test starts, as
// a user would start `kdiag broker` or point at a test cluster.
func TestExternalCluster(t *testing.T) {
	t.Parallel()
	c, err := broker.Start(context.Background(), broker.Config{Ports: []int{0, 0, 0}, Idle: testIdle, Topics: []string{DefaultTopic}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, _ := Lookup("passive-close")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, sc, Options{Executable: kdiagBin, Bootstrap: c.BootstrapServers(), BrokerIdle: testIdle,
		Duration: 4 * testIdle, SampleInterval: 150 * time.Millisecond, Sockets: testSockets}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("external: peak %d final %d; verdict %q; notes %q", res.CloseWaitPeak, res.CloseWaitFinal, res.Verdict, res.Notes)
	if res.Embedded || res.Broker != nil || res.Bootstrap != c.BootstrapServers() {
		t.Errorf("embedded %v, broker stats %v, bootstrap %q: want the given cluster and no broker stats", res.Embedded, res.Broker, res.Bootstrap)
	}
	if res.CloseWaitFinal == 0 || !res.AsExpected {
		t.Errorf("CLOSE_WAIT final %d, as expected %v: want it held", res.CloseWaitFinal, res.AsExpected)
	}
	if s := c.Stats(); s.ClosedIdle == 0 {
		t.Errorf("the cluster closed no idle connection: %+v", s.Counts)
	}
}

// TestVerboseRelaysProducerLines: with the producer's log on (kdiag repro
// --verbose), each of its lines is logged as its own record, with its own
// level and message and the scenario beside them, not nested whole inside
// a message of kdiag repro's (msg="time=... level=DEBUG msg=\"...\"").
func TestVerboseRelaysProducerLines(t *testing.T) {
	t.Parallel()
	sc, _ := Lookup("passive-close")
	var logs testio.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := Run(ctx, sc, Options{
		Executable: kdiagBin, BrokerIdle: testIdle, Duration: time.Second, SampleInterval: 150 * time.Millisecond,
		Sockets: testSockets, ChildLogLevel: "debug",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var relayed int
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="time=`) || strings.Contains(line, `msg="{`) {
			t.Errorf("a producer line nested in a message: %s", line)
		}
		if strings.Contains(line, "level=DEBUG") && strings.Contains(line, `msg="Initiating connection to node`) &&
			strings.Contains(line, "scenario=passive-close source=producer") {
			relayed++
		}
	}
	if relayed == 0 {
		t.Errorf("no producer line relayed as its own DEBUG record:\n%s", logs.String())
	}
}
