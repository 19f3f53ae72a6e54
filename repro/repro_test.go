package repro

import (
	"context"
	"github.com/kdiag/kdiag/internal/testbin"
	"os"
	"testing"
	"time"

	"github.com/kdiag/kdiag/broker"
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
// the healthy client's 0.9x idle still 200ms ahead of the broker.
const testIdle = 2 * time.Second

// runScenario runs a catalog scenario against the embedded broker, sampling
// the child's sockets through netstat on its pid.
func runScenario(t *testing.T, name string, d time.Duration) *Result {
	t.Helper()
	sc, ok := Lookup(name)
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, sc, Options{
		Executable:     kdiagBin,
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
		t.Errorf("no client stats from the producer: %q", res.Notes)
	}
	if res.Broker == nil || res.Broker.Accepted == 0 {
		t.Fatalf("the producer never reached the broker: %+v", res.Broker)
	}
	return res
}

func TestHealthyEndsWithoutCloseWait(t *testing.T) {
	t.Parallel()
	res := runScenario(t, "healthy", 4*testIdle)
	if res.CloseWaitFinal != 0 || res.CloseWaitPeak != 0 {
		t.Errorf("CLOSE_WAIT peak %d final %d, want none: the client closes idle connections first", res.CloseWaitPeak, res.CloseWaitFinal)
	}
	if res.Client.ClosedIdle == 0 {
		t.Errorf("the client closed no idle connection: %+v", res.Client)
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

func TestPassiveCloseHoldsCloseWaitOnEveryBroker(t *testing.T) {
	t.Parallel()
	res := runScenario(t, "passive-close", 4*testIdle)
	// The client connected to every bootstrap server and never uses those
	// connections again: the broker closes each, and with the on-demand
	// reader each stays in CLOSE_WAIT.
	for _, addr := range brokerAddrs(res) {
		if res.CloseWaitFinalByRemote[addr] == 0 {
			t.Errorf("no CLOSE_WAIT to broker %s at the end: %v", addr, res.CloseWaitFinalByRemote)
		}
	}
	// Held: once the first idle close has happened (after one idle period
	// and a sample or two), no sample is without CLOSE_WAIT.
	for _, s := range res.Series {
		if s.Elapsed > 2*testIdle && s.CloseWait == 0 {
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

func TestStalledCallbackLeavesCloseWaitWhileBlocked(t *testing.T) {
	t.Parallel()
	res := runScenario(t, "stalled-callback", 4*testIdle)
	if res.CloseWaitPeak == 0 {
		t.Errorf("no CLOSE_WAIT while the callback blocked")
	}
	if !res.AsExpected {
		t.Errorf("not as expected: %s", res.Verdict)
	}
}

func brokerAddrs(res *Result) []string {
	var out []string
	for _, b := range res.Broker.Brokers {
		out = append(out, b.Addr)
	}
	return out
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
