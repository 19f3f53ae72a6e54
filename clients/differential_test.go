package clients_test

// The differential test: the same scenarios run against the real Java
// producer (kafka-clients 2.1.1 and 3.9.0, the driver of java_test.go) and
// against kdiag's reference producer (package producer, the model `kdiag
// produce --model java-2.1|java-3.9` runs), each on one broker of kdiag's,
// and what the broker saw is compared as a sequence, not in time: the
// connections in the order they were made, the client's node id of each
// (from NetworkClient's "Initiating connection to node ... (id: N ...)"
// line, which the model writes in the same words), the requests each
// carried, who closed it, and whether CLOSE_WAIT appeared and ended. The
// broker's idle close is driven (Cluster.CloseIdleConn), and each phase
// waits for the state it causes, with a bound, never for a pause that a
// loaded machine could outlast.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/internal/testio"
	"github.com/kdiag/kdiag/netstat"
	"github.com/kdiag/kdiag/producer"
)

// connRecord is one connection as the broker saw it.
type connRecord struct {
	Node     int32    // the client's node id for it
	Requests []string // "Metadata v12", in order
	Closed   string   // "broker (idle)", "client", "open"
}

func (c connRecord) String() string {
	return fmt.Sprintf("node %d: %s; closed by %s", c.Node, strings.Join(c.Requests, ", "), c.Closed)
}

// recorder is a broker logger that keeps, per connection (the broker's
// connection id: a client may reconnect from the port it just closed), its
// requests and close, in accept order.
type recorder struct {
	mu      sync.Mutex
	order   []string               // connection ids
	conns   map[string]*connRecord // by connection id
	remotes map[string]string      // connection id to client address
	latest  map[string]string      // client address to its newest connection id
	lastReq time.Time              // the last request's, or the recorder's start
}

func newRecorder() *recorder {
	return &recorder{conns: map[string]*connRecord{}, remotes: map[string]string{}, latest: map[string]string{}, lastReq: time.Now()}
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	at := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool { at[a.Key] = a.Value.String(); return true })
	r.mu.Lock()
	defer r.mu.Unlock()
	id := at["connection"]
	switch rec.Message {
	case "accepted connection":
		r.order = append(r.order, id)
		r.conns[id] = &connRecord{Node: -99, Closed: "open"}
		r.remotes[id], r.latest[at["remote"]] = at["remote"], id
	case "request":
		c := r.conns[id]
		if c == nil {
			return nil
		}
		// "Metadata (key 3) v12" -> "Metadata v12"
		api := at["api"]
		if i, j := strings.Index(api, " (key "), strings.LastIndex(api, ") "); i > 0 && j > i {
			api = api[:i] + api[j+1:]
		}
		c.Requests = append(c.Requests, api)
		r.lastReq = time.Now()
	case "closed connection":
		c := r.conns[id]
		if c == nil {
			return nil
		}
		switch broker.Reason(at["reason"]) {
		case broker.ReasonIdle:
			c.Closed = "broker (idle)"
		case broker.ReasonClientClosed, broker.ReasonClientReset:
			c.Closed = "client"
		default:
			c.Closed = at["reason"]
		}
	}
	return nil
}

// sequence returns the connections in accept order, each given the node
// id of the client's initiations in order (nodes: what the client logged).
func (r *recorder) sequence(t *testing.T, nodes []int32) []connRecord {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(nodes) != len(r.order) {
		t.Errorf("the client logged %d connection initiations (%v), the broker accepted %d", len(nodes), nodes, len(r.order))
	}
	var out []connRecord
	for i, a := range r.order {
		c := *r.conns[a]
		if i < len(nodes) {
			c.Node = nodes[i]
		}
		// Which requests a connection carried, not in which order: when
		// 3.9.0's telemetry request goes out beside a PRODUCE depends on
		// its timers.
		c.Requests = append([]string(nil), c.Requests...)
		slices.Sort(c.Requests)
		out = append(out, c)
	}
	return out
}

// quiet waits until the broker has had no request for settle (at most
// 60 s): what the client does by itself after a step (3.9.0's start-up
// requests, the reconnect after a close) is over before the next step.
func (r *recorder) quiet(t *testing.T, settle time.Duration) { r.quietSince(t, settle, time.Time{}) }

// quietSince is quiet counting from from at the earliest: at a client's
// start, the settle runs from when it was created.
func (r *recorder) quietSince(t *testing.T, settle time.Duration, from time.Time) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r.mu.Lock()
		last := r.lastReq
		r.mu.Unlock()
		if from.After(last) {
			last = from
		}
		if time.Since(last) >= settle {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the client kept sending requests for 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// requests counts the requests of api ("Metadata") the broker has read.
func (r *recorder) requests(api string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.conns {
		for _, q := range c.Requests {
			if strings.HasPrefix(q, api+" ") {
				n++
			}
		}
	}
	return n
}

// open returns the client addresses of the connections open now, in the
// order the broker accepted them.
func (r *recorder) open() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, id := range r.order {
		if r.conns[id].Closed == "open" {
			out = append(out, r.remotes[id])
		}
	}
	return out
}

// isOpen says whether the connection of client address remote is open.
func (r *recorder) isOpen(remote string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.conns[r.latest[remote]]
	return c != nil && c.Closed == "open"
}

// awaitRequests waits, for at most 60 s, until the broker has read n
// requests of api, and says whether it did. It is not fatal: a client that
// does not send them is what the comparison then shows.
func (r *recorder) awaitRequests(t *testing.T, api string, n int) bool {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for r.requests(api) < n {
		if time.Now().After(deadline) {
			t.Logf("no %s request #%d within 60s", api, n)
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

var initiating = regexp.MustCompile(`Initiating connection to node \S+ \(id: (-?\d+) rack`)

// initiatedNodes reads the node ids of "Initiating connection" lines.
func initiatedNodes(log string) []int32 {
	var out []int32
	for _, m := range initiating.FindAllStringSubmatch(log, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, int32(n))
	}
	return out
}

// diffClient is what a scenario drives: the Java driver or the model.
type diffClient interface {
	send()                  // send one record; wait until it is acked
	sendBlock()             // send one whose callback blocks; wait until it blocks
	release()               // let the callback return; wait until it did
	close()                 // close the producer
	pid() int               // the process holding its sockets
	log() string            // its NetworkClient-style log
	owns(local string) bool // whether a local address is one of its sockets
	version() string        // the kafka-clients version it is or models
}

// diffResult is what a scenario saw.
type diffResult struct {
	// AtCreation is how many connections the client made before its
	// first send.
	AtCreation int
	Conns      []connRecord
	// CloseWait: whether the sockets the broker closed were seen in
	// CLOSE_WAIT, and whether that ended (each was closed).
	CloseWaitSeen, CloseWaitEnded bool
	// Telemetry counts the telemetry requests once placeTelemetry has
	// taken them off their connections.
	Telemetry int
}

const settle = 1500 * time.Millisecond

// startUp waits for what the client does by itself at creation, so that
// the first send never races it, and returns how many connections it
// made. 3.9.0 (real or model) fetches metadata, then its producer ID and
// its telemetry subscriptions (KIP-714), each awaited in turn with a
// bound rather than guessed from a pause (a JVM on a loaded machine may
// pause for longer than any settle); 2.1.1 does nothing at creation, and
// the settle from its creation gives one that would time to show it.
func startUp(t *testing.T, rec *recorder, c *broker.Cluster, cl diffClient) int {
	t.Helper()
	if cl.version() == "3.9.0" {
		testio.WaitFor(t, 60*time.Second, "the producer ID (3.9.0's start)", func() bool { return strings.Contains(cl.log(), "ProducerId set to") })
		rec.awaitRequests(t, "GetTelemetrySubscriptions", 1)
	}
	rec.quietSince(t, settle, time.Now())
	return c.Stats().Accepted
}

// scenarioPolling: start, send, the broker closes each idle connection,
// the client reconnects, close. The connections are closed one at a time,
// in the order they were made, and each close's consequence (the metadata
// request both versions make after a disconnect, on a connection still
// open or a new one) is awaited before the next: were they closed at once,
// how far the client had got with the first when the second came would
// decide where its metadata request went.
func scenarioPolling(t *testing.T, rec *recorder, c *broker.Cluster, cl diffClient) diffResult {
	res := diffResult{AtCreation: startUp(t, rec, c, cl), CloseWaitEnded: true}
	cl.send()
	rec.quiet(t, settle)
	for _, remote := range rec.open() {
		md := rec.requests("Metadata")
		closeIdle(t, c, rec, remote)
		seen, ended := watchCloseWait(t, c, cl, []string{remote}, nil)
		res.CloseWaitSeen = res.CloseWaitSeen || seen
		res.CloseWaitEnded = res.CloseWaitEnded && ended
		rec.awaitRequests(t, "Metadata", md+1)
		rec.quiet(t, settle)
	}
	cl.close()
	closedAll(t, rec)
	res.Conns = rec.sequence(t, initiatedNodes(cl.log()))
	return res
}

// scenarioBlocked: start, send, a callback blocks the network thread, the
// broker closes every idle connection, the test releases the callback,
// the client closes them and reconnects, close.
func scenarioBlocked(t *testing.T, rec *recorder, c *broker.Cluster, cl diffClient) diffResult {
	res := diffResult{AtCreation: startUp(t, rec, c, cl)}
	cl.send()
	rec.quiet(t, settle)
	cl.sendBlock()
	// The blocked client cannot react between the closes: all at once.
	closed := rec.open()
	for _, remote := range closed {
		closeIdle(t, c, rec, remote)
	}
	md := rec.requests("Metadata")
	res.CloseWaitSeen, res.CloseWaitEnded = watchCloseWait(t, c, cl, closed, cl.release)
	rec.awaitRequests(t, "Metadata", md+1)
	rec.quiet(t, settle)
	cl.close()
	closedAll(t, rec)
	res.Conns = rec.sequence(t, initiatedNodes(cl.log()))
	return res
}

// closedAll waits until the broker has logged the close of every
// connection (at most 30 s): its counts drop before it logs, so an Open of
// 0 can come before the log says who closed the last one.
func closedAll(t *testing.T, rec *recorder) {
	t.Helper()
	testio.WaitFor(t, 30*time.Second, "every connection's close logged", func() bool { return len(rec.open()) == 0 })
}

// closeIdle drives the broker's idle close of the connection of client
// address remote, and only that one (Cluster.CloseIdleConn), waiting for
// it to be idle (at most 20 s); one the client closed meanwhile is left.
func closeIdle(t *testing.T, c *broker.Cluster, rec *recorder, remote string) {
	t.Helper()
	testio.WaitFor(t, 20*time.Second, "the broker closes "+remote, func() bool {
		return c.CloseIdleConn(remote) || !rec.isOpen(remote)
	})
}

// watchCloseWait follows the sockets the broker closed. Without release
// (the network thread polls), seen is whether any was still in CLOSE_WAIT
// when 30 s had passed, and ended whether the client closed them all by
// itself. With release (a callback blocks the thread), seen is whether
// they all reached CLOSE_WAIT, and ended whether, once released, the
// client closed them all.
func watchCloseWait(t *testing.T, c *broker.Cluster, cl diffClient, closed []string, release func()) (seen, ended bool) {
	t.Helper()
	state := func() (cw, gone int) {
		now := sockets(t, cl.pid(), c)
		for _, l := range closed {
			switch st, ok := now[l]; {
			case !ok:
				gone++
			case st == netstat.CloseWait:
				cw++
			}
		}
		return cw, gone
	}
	until := func(cond func(cw, gone int) bool) bool {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if cond(state()) {
				return true
			}
			time.Sleep(50 * time.Millisecond)
		}
		return false
	}
	allGone := func(_, gone int) bool { return gone == len(closed) }
	if release == nil {
		ended = until(allGone)
		return !ended, ended
	}
	seen = until(func(cw, _ int) bool { return cw == len(closed) })
	release()
	return seen, until(allGone)
}

// javaClient adapts the driver.
type javaClient struct {
	j    *javaProducer
	sent int
	vers string // its kafka-clients version
}

func (c *javaClient) send() {
	c.j.do("send 1")
	c.j.waitLine(fmt.Sprintf("acked %d", c.sent))
	c.sent++
}
func (c *javaClient) sendBlock() {
	c.j.do("send-block 1")
	c.j.waitLine(fmt.Sprintf("blocking %d", c.sent))
}
func (c *javaClient) release() {
	c.j.do("release")
	c.j.waitLine(fmt.Sprintf("acked %d", c.sent))
	c.sent++
}
func (c *javaClient) version() string { return c.vers }
func (c *javaClient) close()          { c.j.do("close"); c.j.waitLine("closed") }
func (c *javaClient) pid() int        { return c.j.pid }
func (c *javaClient) log() string     { return c.j.stderr() }
func (c *javaClient) owns(local string) bool {
	return true // checked against its sockets by the broker's log and sockets()
}

// modelClient adapts the reference producer, run in the test process.
type modelClient struct {
	t     *testing.T
	p     *producer.Producer
	logs  *lineLog
	gate  chan struct{}
	acked chan error
	// vers is the kafka-clients version the model follows.
	vers string
}

func (c *modelClient) send() {
	c.t.Helper()
	if err := c.p.Send(context.Background(), producer.Record{Topic: "live", Value: []byte("m")}, func(_ producer.RecordMetadata, err error) {
		c.acked <- err
	}); err != nil {
		c.t.Fatal(err)
	}
	c.wait()
}
func (c *modelClient) wait() {
	c.t.Helper()
	select {
	case err := <-c.acked:
		if err != nil {
			c.t.Fatalf("model: record failed: %v", err)
		}
	case <-time.After(60 * time.Second):
		c.t.Fatal("model: no ack within 60s")
	}
}
func (c *modelClient) sendBlock() {
	c.t.Helper()
	blocking := make(chan struct{})
	if err := c.p.Send(context.Background(), producer.Record{Topic: "live", Value: []byte("m")}, func(_ producer.RecordMetadata, err error) {
		close(blocking)
		<-c.gate
		c.acked <- err
	}); err != nil {
		c.t.Fatal(err)
	}
	select {
	case <-blocking:
	case <-time.After(60 * time.Second):
		c.t.Fatal("model: the callback did not run within 60s")
	}
}
func (c *modelClient) version() string { return c.vers }
func (c *modelClient) release()        { close(c.gate); c.wait() }
func (c *modelClient) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.p.Close(ctx); err != nil {
		c.t.Errorf("model: close: %v", err)
	}
}
func (c *modelClient) pid() int               { return osGetpid() }
func (c *modelClient) log() string            { return c.logs.String() }
func (c *modelClient) owns(local string) bool { return true }

// lineLog is a slog handler writing "LEVEL message" lines.
type lineLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lineLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *lineLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *lineLog) WithGroup(string) slog.Handler            { return l }
func (l *lineLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, "%s %s\n", r.Level, r.Message)
	return nil
}
func (l *lineLog) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// startRecordedBroker starts one broker whose log the recorder keeps.
func startRecordedBroker(t *testing.T) (*broker.Cluster, *recorder) {
	t.Helper()
	rec := newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := broker.Start(ctx, broker.Config{Brokers: 1, Ports: []int{0}, Topics: []string{"live"}, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, rec
}

// telemetryRequest is 3.9.0's KIP-714 request at start-up.
const telemetryRequest = "GetTelemetrySubscriptions v0"

// placeTelemetry takes out where the telemetry request went, which the real
// 3.9.0 client does not decide the same way from run to run: its
// ClientTelemetryReporter sends to NetworkClient.leastLoadedNode, which is
// the bootstrap connection when nothing is in flight on it at that moment
// and otherwise a new connection to a broker of the metadata (most runs
// here; once in a full run the bootstrap connection, with no second
// connection at creation). The request is counted in Telemetry instead of
// on its connection, and a connection opened at creation for it is not
// counted at creation: the first send opens that one when telemetry did
// not.
func placeTelemetry(r diffResult) diffResult {
	out := r
	out.Conns = nil
	for i, c := range r.Conns {
		c.Requests = slices.DeleteFunc(slices.Clone(c.Requests), func(req string) bool { return req == telemetryRequest })
		if n := len(r.Conns[i].Requests) - len(c.Requests); n > 0 {
			out.Telemetry += n
			if i > 0 {
				out.AtCreation--
			}
		}
		out.Conns = append(out.Conns, c)
	}
	return out
}

// TestDifferentialJavaModel runs each scenario against the real client and
// the model, per version, and compares what the broker saw.
func TestDifferentialJavaModel(t *testing.T) {
	scenarios := []struct {
		name string
		run  func(*testing.T, *recorder, *broker.Cluster, diffClient) diffResult
	}{
		{"polling", scenarioPolling},
		{"blocked-callback", scenarioBlocked},
	}
	for _, v := range []struct{ version, model string }{{"2.1.1", "java-2.1"}, {"3.9.0", "java-3.9"}} {
		for _, sc := range scenarios {
			t.Run(v.version+"/"+sc.name, func(t *testing.T) {
				c, rec := startRecordedBroker(t)
				j := startJava(t, v.version, c.BootstrapServers(), 1)
				real := sc.run(t, rec, c, &javaClient{j: j, vers: v.version})
				t.Logf("kafka-clients %s:\n%s", v.version, describe(real))

				c2, rec2 := startRecordedBroker(t)
				model := startModel(t, v.model, v.version, c2.BootstrapServers())
				got := sc.run(t, rec2, c2, model)
				t.Logf("model %s:\n%s", v.model, describe(got))
				if diff := cmp.Diff(placeTelemetry(real), placeTelemetry(got)); diff != "" {
					t.Errorf("the model %s does not do what kafka-clients %s does (-real +model):\n%s", v.model, v.version, diff)
				}
			})
		}
	}
}

func describe(r diffResult) string {
	var b strings.Builder
	for _, c := range r.Conns {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	fmt.Fprintf(&b, "  %d connections at creation; CLOSE_WAIT seen %v, ended %v", r.AtCreation, r.CloseWaitSeen, r.CloseWaitEnded)
	return b.String()
}

func osGetpid() int { return os.Getpid() }

// startModel starts the reference producer as `kdiag produce --model`
// does, logging NetworkClient's lines at DEBUG.
func startModel(t *testing.T, model, version, bootstrap string) *modelClient {
	t.Helper()
	cfg, err := producer.ParseConfig(map[string]string{"bootstrap.servers": bootstrap, producer.KeyModel: model})
	if err != nil {
		t.Fatal(err)
	}
	logs := &lineLog{}
	p, err := producer.New(cfg, producer.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return &modelClient{t: t, p: p, logs: logs, gate: make(chan struct{}), acked: make(chan error, 4), vers: version}
}
