package producer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kdiag/kdiag/netstat"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClientIdleClose: with connections.max.idle.ms=300 the producer closes
// its idle connections itself, one per poll (Selector.maybeCloseOldest-
// Connection), whose timeout request.timeout.ms bounds: every one in the
// end, none left in CLOSE_WAIT; the next send reconnects.
func TestClientIdleClose(t *testing.T) {
	c := newCluster(t, 3, kfake.SeedTopics(1, "t"))
	p, logs := newProducer(t, c, map[string]string{"connections.max.idle.ms": "300", "request.timeout.ms": "400"})
	if _, err := produceSync(t, p, Record{Topic: "t", Value: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	// Every connection made until the record was acked is closed idle by
	// the client. Each idle close is followed by a metadata request, which
	// may open a new connection that is then closed idle in turn (the
	// reconnect churn of the real client): the test waits for the first
	// ones' closes, not for a moment with no connection open, which lasts
	// only from a close to the next dial.
	first := initiated(logs)
	waitFor(t, "the connections made until the ack closed idle by the client", func() bool {
		for _, id := range first {
			if logs.index(fmt.Sprintf("Idle connection to node %d disconnected.", id)) < 0 {
				return false
			}
		}
		return p.Stats().ClosedIdle >= 2
	})
	if n := countState(clientSockets(t, c), netstat.CloseWait); n != 0 {
		t.Errorf("%d CLOSE_WAIT sockets after client idle close", n)
	}
	if _, err := produceSync(t, p, Record{Topic: "t", Value: []byte("b")}); err != nil {
		t.Fatalf("send after idle close: %v", err)
	}
	st := p.Stats()
	if st.PeerCloses != 0 || st.Reconnects < 1 {
		t.Errorf("stats: %+v (want no peer close, at least one reconnect)", st)
	}
}

// initiated returns the node ids of the connections the producer started,
// in order, from its "Initiating connection to node" lines.
func initiated(logs *logCapture) []int {
	var ids []int
	re := regexp.MustCompile(`Initiating connection to node \S+ \(id: (-?\d+) rack`)
	for _, l := range logs.lines() {
		if m := re.FindStringSubmatch(l); m != nil {
			id, _ := strconv.Atoi(m[1])
			ids = append(ids, id)
		}
	}
	return ids
}

// TestBrokerIdleClosePoll: the broker closes the idle connections; with the
// poll reader the producer sees each FIN at once and closes, so no socket
// stays in CLOSE_WAIT. (2.1.1's model: no INIT_PRODUCER_ID or telemetry
// request may still be in flight when the broker closes.)
func TestBrokerIdleClosePoll(t *testing.T) {
	c, broker := newClosingCluster(t, 3, kfake.SeedTopics(1, "t"))
	p, logs := newProducer(t, c, map[string]string{"connections.max.idle.ms": "-1", KeyReader: "poll", KeyModel: "java-2.1"})
	if _, err := produceSync(t, p, Record{Topic: "t", Value: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, logs, initiated(logs)...)
	opened := p.Stats().ConnectionsOpened
	if n := broker.idleClose(); int64(n) != opened {
		t.Fatalf("the broker closed %d connections, want the %d the producer opened", n, opened)
	}
	waitFor(t, "peer closes of every connection", func() bool { return p.Stats().PeerCloses >= opened })
	// Once a socket's FIN was handled, no CLOSE_WAIT remains for it. New
	// connections (metadata after a disconnect) may be ESTABLISHED; none
	// may wait in CLOSE_WAIT for longer than the producer takes to react.
	waitFor(t, "no CLOSE_WAIT", func() bool { return countState(clientSockets(t, c), netstat.CloseWait) == 0 })
	if i := logs.index("reason=peer closed (EOF)"); i < 0 || !strings.HasPrefix(logs.lines()[i], "Connection with /127.0.0.1 (channel ") {
		t.Error("no 'Connection with ... disconnected' log with reason peer closed (EOF)")
	}
	if logs.index("Node 0 disconnected.") < 0 && logs.index("Node 1 disconnected.") < 0 && logs.index("Node 2 disconnected.") < 0 {
		t.Error("no 'Node N disconnected.' for a broker")
	}
	if _, err := produceSync(t, p, Record{Topic: "t", Value: []byte("b")}); err != nil {
		t.Fatalf("send after peer close: %v", err)
	}
	if st := p.Stats(); st.ClosedIdle != 0 || st.Reconnects < 1 {
		t.Errorf("stats: %+v", st)
	}
}

// TestBrokerIdleCloseOnDemand: with the on-demand reader nothing reads an
// idle connection, so the broker's FIN is not seen and the sockets stay in
// CLOSE_WAIT; the next send meets the closed peer on its leader's
// connection, closes it, reconnects and succeeds.
func TestBrokerIdleCloseOnDemand(t *testing.T) {
	c, broker := newClosingCluster(t, 3, kfake.SeedTopics(1, "t"))
	p, logs := newProducer(t, c, map[string]string{"connections.max.idle.ms": "-1", KeyReader: "on-demand", KeyModel: "java-2.1"})
	if _, err := produceSync(t, p, Record{Topic: "t", Value: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	// Each connection past its last response: nothing is read on any of
	// them from now on.
	waitReady(t, logs, initiated(logs)...)
	opened := p.Stats().ConnectionsOpened
	if n := broker.idleClose(); int64(n) != opened || opened < 2 {
		t.Fatalf("the broker closed %d connections, the producer opened %d: want all, at least a bootstrap and a leader", n, opened)
	}
	waitFor(t, "every connection in CLOSE_WAIT", func() bool {
		socks := clientSockets(t, c)
		n := int64(countState(socks, netstat.CloseWait))
		if n > opened {
			t.Fatalf("%d CLOSE_WAIT for %d connections: %s", n, opened, describe(socks))
		}
		return n == opened
	})
	// They stay: the producer has not noticed (no peer close counted) and
	// the sockets are still there a while later. (Nothing could close them:
	// this waits for no event, it only gives a wrong producer time to show.)
	time.Sleep(300 * time.Millisecond)
	socks := clientSockets(t, c)
	if n := int64(countState(socks, netstat.CloseWait)); n != opened {
		t.Fatalf("%d CLOSE_WAIT, want %d held: %s", n, opened, describe(socks))
	}
	if st := p.Stats(); st.PeerCloses != 0 {
		t.Fatalf("on-demand reader saw %d peer closes while idle", st.PeerCloses)
	}
	before := countState(socks, netstat.CloseWait)
	if _, err := produceSync(t, p, Record{Topic: "t", Value: []byte("b")}); err != nil {
		t.Fatalf("send on a CLOSE_WAIT connection did not recover: %v", err)
	}
	st := p.Stats()
	if st.PeerCloses < 1 || st.Reconnects < 1 || st.RecordsAcked != 2 {
		t.Errorf("stats after the send: %+v", st)
	}
	if after := countState(clientSockets(t, c), netstat.CloseWait); after >= before {
		t.Errorf("CLOSE_WAIT %d -> %d: the send did not close the leader's connection", before, after)
	}
}

// TestBlockedCallbackStallsClose: a callback that blocks holds the network
// goroutine, so even the poll reader's FIN is not processed and the socket
// stays in CLOSE_WAIT until the callback returns.
func TestBlockedCallbackStallsClose(t *testing.T) {
	c, broker := newClosingCluster(t, 1, kfake.SeedTopics(1, "t"))
	p, logs := newProducer(t, c, map[string]string{"connections.max.idle.ms": "-1", KeyReader: "poll"})
	if _, err := produceSync(t, p, Record{Topic: "t", Value: []byte("warm-up")}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, logs, -1, 0)
	release := make(chan struct{})
	entered := make(chan struct{})
	if err := p.Send(context.Background(), Record{Topic: "t", Value: []byte("slow")}, func(RecordMetadata, error) {
		close(entered)
		<-release
	}); err != nil {
		t.Fatal(err)
	}
	<-entered
	peerBefore := p.Stats().PeerCloses
	if n := broker.idleClose(); n != 2 {
		t.Fatalf("the broker closed %d connections, want 2 (bootstrap and broker 0)", n)
	}
	waitFor(t, "both connections in CLOSE_WAIT while the callback blocks", func() bool {
		return countState(clientSockets(t, c), netstat.CloseWait) == 2
	})
	if st := p.Stats(); st.PeerCloses != peerBefore {
		t.Fatalf("peer close processed while the callback blocked: %+v", st)
	}
	close(release)
	waitFor(t, "the FINs processed after the callback returns", func() bool { return p.Stats().PeerCloses >= peerBefore+2 })
	waitFor(t, "no CLOSE_WAIT", func() bool { return countState(clientSockets(t, c), netstat.CloseWait) == 0 })
}

// TestFINsReadDuringAStallAreHandledFirst: when a blocked callback returns,
// the FINs its connections got meanwhile are handled before the idle
// expiry that has come due in the same time, as Java's Selector handles
// ready channels before closing idle ones: they count as the broker's
// closes.
func TestFINsReadDuringAStallAreHandledFirst(t *testing.T) {
	c, broker := newClosingCluster(t, 1, kfake.SeedTopics(1, "t"))
	p, logs := newProducer(t, c, map[string]string{"connections.max.idle.ms": "100", KeyReader: "poll"})
	release := make(chan struct{})
	entered := make(chan struct{})
	if err := p.Send(context.Background(), Record{Topic: "t", Value: []byte("slow")}, func(RecordMetadata, error) {
		close(entered)
		<-release
	}); err != nil {
		t.Fatal(err)
	}
	<-entered
	waitReady(t, logs, -1, 0)
	// The network goroutine is blocked: these counts hold until release.
	// (The bootstrap connection may have been idle-closed before the
	// callback began; what is open now is what the broker closes.)
	before := p.Stats()
	open := int(before.ConnectionsOpen)
	broker.idleClose()
	waitFor(t, "the open connections in CLOSE_WAIT", func() bool { return countState(clientSockets(t, c), netstat.CloseWait) == open })
	stalled := []int{0} // the produce went to broker 0
	if open == 2 {
		stalled = append(stalled, -1)
	}
	// The client's idle deadline passes too while the callback blocks.
	time.Sleep(200 * time.Millisecond)
	from := len(logs.lines())
	close(release)
	waitFor(t, "the FINs handled", func() bool { return p.Stats().PeerCloses >= before.PeerCloses+int64(open) })
	// Each stalled connection's first close after the release is the
	// peer's. (Later ones are of the connections the producer opens again
	// and closes when idle.)
	lines := logs.lines()[from:]
	for _, id := range stalled {
		for _, l := range lines {
			if strings.HasPrefix(l, fmt.Sprintf("Idle connection to node %d disconnected.", id)) {
				t.Errorf("node %d: idle close before the FIN it had read: %s", id, l)
				break
			}
			if strings.Contains(l, fmt.Sprintf("(channel %d) disconnected reason=peer closed", id)) {
				break
			}
		}
	}
}

// TestCallbackDelay: kdiag.callback.delay.ms stalls the same way. The delay
// is far longer than the test, which ends it with Close (Close cuts the
// delay short), so the broker's close always lands inside it.
func TestCallbackDelay(t *testing.T) {
	c, broker := newClosingCluster(t, 1, kfake.SeedTopics(1, "t"))
	p, logs := newProducer(t, c, map[string]string{"connections.max.idle.ms": "-1", KeyCallbackDelay: "600000"})
	done := make(chan struct{})
	if err := p.Send(context.Background(), Record{Topic: "t", Value: []byte("v")}, func(RecordMetadata, error) { close(done) }); err != nil {
		t.Fatal(err)
	}
	// The record is counted acked when its completion begins, before the
	// delay: from then on the network goroutine sleeps.
	waitFor(t, "the record acked", func() bool { return p.Stats().RecordsAcked == 1 })
	waitReady(t, logs, -1, 0)
	if n := broker.idleClose(); n != 2 {
		t.Fatalf("the broker closed %d connections, want 2", n)
	}
	waitFor(t, "CLOSE_WAIT during the callback delay", func() bool {
		return countState(clientSockets(t, c), netstat.CloseWait) == 2
	})
	select {
	case <-done:
		t.Fatal("callback ran before its delay ended")
	default:
	}
	if st := p.Stats(); st.PeerCloses != 0 {
		t.Fatalf("peer close processed during the callback delay: %+v", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no flush: Close at once, which ends the delay
	if err := p.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close = %v, want the flush cut short", err)
	}
	select {
	case <-done:
	default:
		t.Error("Close returned before the delayed callback ran")
	}
	if n := countState(clientSockets(t, c), netstat.CloseWait); n != 0 {
		t.Errorf("%d CLOSE_WAIT after Close", n)
	}
}

// TestUnknownTopic: a record for a topic the metadata does not know waits,
// the producer asks for the topic again, and the record is delivered once
// the topic exists.
func TestUnknownTopic(t *testing.T) {
	c := newCluster(t, 1)
	p, logs := newProducer(t, c, map[string]string{"allow.auto.create.topics": "false", "retry.backoff.ms": "50"})
	res := make(chan error, 1)
	if err := p.Send(context.Background(), Record{Topic: "later", Value: []byte("v")}, func(_ RecordMetadata, err error) { res <- err }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two metadata requests naming the topic", func() bool {
		n := 0
		for _, l := range logs.lines() {
			if strings.Contains(l, "name='later')], allowAutoTopicCreation=false") {
				n++
			}
		}
		return n >= 2
	})
	if logs.index("later=UNKNOWN_TOPIC_OR_PARTITION") < 0 {
		t.Error("unknown topic not reported from metadata")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "later", 2, 1
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := req.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("record for the created topic: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("record not delivered after the topic was created")
	}
}

// TestUnknownTopicTimesOut: a topic that never appears fails the record
// after max.block.ms, in Java's words (KafkaProducer.waitOnMetadata, 2.1.1
// and 3.9.0), not after delivery.timeout.ms, which is for batches.
func TestUnknownTopicTimesOut(t *testing.T) {
	c := newCluster(t, 1)
	p, _ := newProducer(t, c, map[string]string{"allow.auto.create.topics": "false",
		"max.block.ms": "400", "delivery.timeout.ms": "60000", "request.timeout.ms": "500", "retry.backoff.ms": "50"})
	_, err := produceSync(t, p, Record{Topic: "never", Value: []byte("v")})
	var te *TimeoutError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "Topic never not present in metadata after 400 ms.") {
		t.Fatalf("err = %v, want the metadata timeout after max.block.ms", err)
	}
	// How many metadata requests fit in the 600 ms depends on the machine's
	// load, so only the first is certain; that the producer asks again for
	// an unknown topic is TestUnknownTopic's to show.
	if st := p.Stats(); st.RecordsFailed != 1 || st.MetadataRequests < 1 {
		t.Errorf("stats: %+v", st)
	}
}

// TestCloseFailsPending: records still waiting when Close's flush gives up
// fail with ErrClosed, and Close still stops everything.
func TestCloseFailsPending(t *testing.T) {
	c := newCluster(t, 1)
	p, _ := newProducer(t, c, map[string]string{"allow.auto.create.topics": "false"})
	res := make(chan error, 1)
	if err := p.Send(context.Background(), Record{Topic: "never", Value: []byte("v")}, func(_ RecordMetadata, err error) { res <- err }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the flush's deadline", err)
	}
	if err := <-res; !errors.Is(err, ErrClosed) {
		t.Errorf("pending record: %v, want ErrClosed", err)
	}
	if st := p.Stats(); st.ConnectionsOpen != 0 {
		t.Errorf("connections open after Close: %+v", st)
	}
}

// TestAcksZero: with acks=0 there is no response; records complete once
// written, with offset -1, and still reach the broker.
func TestAcksZero(t *testing.T) {
	c := newCluster(t, 1, kfake.SeedTopics(1, "t"))
	p, _ := newProducer(t, c, map[string]string{"acks": "0"})
	md, err := produceSync(t, p, Record{Topic: "t", Value: []byte("fire-and-forget")})
	if err != nil || md.Offset != -1 {
		t.Fatalf("md %+v err %v", md, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs := cl.PollFetches(ctx)
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "fire-and-forget" {
		t.Fatalf("read back %v (errors %v)", recs, fs.Errors())
	}
}

// TestLocalhostAndDeadBootstrap: a host name is resolved as Java describes
// it ("localhost/127.0.0.1", IPv4 first), and a bootstrap server that
// refuses connections is logged and skipped.
func TestLocalhostAndDeadBootstrap(t *testing.T) {
	c := newCluster(t, 1, kfake.SeedTopics(1, "t"))
	_, port, _ := strings.Cut(c.ListenAddrs()[0], ":")
	dead := newCluster(t, 1)
	deadAddr := dead.ListenAddrs()[0]
	dead.Close() // nothing listens there now
	p, logs := newProducer(t, c, map[string]string{"bootstrap.servers": deadAddr + ",localhost:" + port})
	if _, err := produceSync(t, p, Record{Topic: "t", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if logs.index(fmt.Sprintf("Initiating connection to node localhost:%s (id: -2 rack: null) using address localhost/127.0.0.1", port)) < 0 {
		logs.dump(t)
		t.Error("no Java-style address for localhost")
	}
	// 3.9.0 contacts one bootstrap server, the least loaded, picked at
	// random: the dead one may never be tried. When it was, it was
	// logged and skipped as Java does.
	if p.Stats().ConnectFailures >= 1 && (logs.index("Connection to node -1 (/127.0.0.1:") < 0 || logs.index("could not be established. Node may not be available.") < 0) {
		t.Error("connect failure not logged as Java does")
	}
}

// TestRequestTimeoutAndMidRequestClose: a PRODUCE left unanswered past
// request.timeout.ms disconnects the node (NetworkClient's wording) and is
// retried; so is one whose connection the broker closes while it waits.
func TestRequestTimeoutAndMidRequestClose(t *testing.T) {
	c := newCluster(t, 1, kfake.SeedTopics(1, "t"))
	p, logs := newProducer(t, c, map[string]string{"request.timeout.ms": "300", "delivery.timeout.ms": "20000"})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		return nil, nil, true // swallow it: no response
	})
	if _, err := produceSync(t, p, Record{Topic: "t", Value: []byte("late")}); err != nil {
		t.Fatalf("record after a request timeout: %v", err)
	}
	if logs.index("Disconnecting from node 0 due to request timeout.") < 0 {
		t.Error("request timeout not logged")
	}
	if st := p.Stats(); st.ClosedOnError < 1 || st.RecordsAcked != 1 {
		t.Errorf("stats after timeout: %+v", st)
	}

	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		return nil, errors.New("drop the connection"), true // kfake closes it
	})
	before := p.Stats().PeerCloses
	if _, err := produceSync(t, p, Record{Topic: "t", Value: []byte("again")}); err != nil {
		t.Fatalf("record after the broker closed mid-request: %v", err)
	}
	if st := p.Stats(); st.PeerCloses <= before || st.RecordsAcked != 2 {
		t.Errorf("stats after mid-request close: %+v", st)
	}
}

// TestIdempotence: 3.9.0's default, enable.idempotence=true, asks for a
// producer ID before the first PRODUCE, whose batch carries it with
// sequence 0, then 1...; 2.1.1's default sends no INIT_PRODUCER_ID.
func TestIdempotence(t *testing.T) {
	for _, tt := range []struct {
		model   string
		wantPID bool
	}{{"java-3.9", true}, {"java-2.1", false}} {
		t.Run(tt.model, func(t *testing.T) {
			c := newCluster(t, 1, kfake.SeedTopics(1, "t"))
			var pids []int64
			var seqs []int32
			var mu sync.Mutex
			c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				for _, tp := range r.(*kmsg.ProduceRequest).Topics {
					for _, pp := range tp.Partitions {
						var b kmsg.RecordBatch
						if err := b.ReadFrom(pp.Records); err == nil {
							mu.Lock()
							pids, seqs = append(pids, b.ProducerID), append(seqs, b.FirstSequence)
							mu.Unlock()
						}
					}
				}
				return nil, nil, false
			})
			p, logs := newProducer(t, c, map[string]string{KeyModel: tt.model, "foo.unknown": "1"})
			for _, v := range []string{"a", "b"} {
				if _, err := produceSync(t, p, Record{Topic: "t", Value: []byte(v)}); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if got := logs.index("ProducerId set to") >= 0; got != tt.wantPID {
				t.Errorf("producer ID asked: %v, want %v", got, tt.wantPID)
			}
			if len(pids) != 2 || (tt.wantPID && (pids[0] < 0 || seqs[0] != 0 || seqs[1] != 1)) || (!tt.wantPID && (pids[0] != -1 || seqs[0] != -1)) {
				t.Errorf("batches carried producer IDs %v, sequences %v", pids, seqs)
			}
			if logs.index("Ignoring config foo.unknown") < 0 {
				t.Error("unknown key not logged")
			}
		})
	}
}

// TestIPv6 produces over ::1.
func TestIPv6(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skip("no IPv6 loopback:", err)
	}
	ln.Close()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"),
		kfake.ListenFn(func(_, addr string) (net.Listener, error) {
			_, port, _ := net.SplitHostPort(addr)
			return net.Listen("tcp6", net.JoinHostPort("::1", port))
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !strings.HasPrefix(c.ListenAddrs()[0], "[::1]:") {
		t.Skipf("kfake does not advertise ::1 (%v)", c.ListenAddrs())
	}
	p, logs := newProducer(t, c, nil)
	if _, err := produceSync(t, p, Record{Topic: "t", Value: []byte("v6")}); err != nil {
		t.Fatal(err)
	}
	if logs.index("using address /::1") < 0 {
		t.Error("no connection over ::1 logged")
	}
}

// TestBufferMemory: while buffer.memory is full Send blocks, for at most
// max.block.ms or until its context ends.
func TestBufferMemory(t *testing.T) {
	c := newCluster(t, 1, kfake.SeedTopics(1, "t"))
	p, _ := newProducer(t, c, map[string]string{"buffer.memory": "1000", "max.block.ms": "200"})
	release := make(chan struct{})
	entered := make(chan struct{})
	if err := p.Send(context.Background(), Record{Topic: "t", Value: make([]byte, 600)}, func(RecordMetadata, error) {
		close(entered)
		<-release // hold the record, and its buffer space, in the callback
	}); err != nil {
		t.Fatal(err)
	}
	<-entered
	err := p.Send(context.Background(), Record{Topic: "t", Value: make([]byte, 600)}, nil)
	var te *TimeoutError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "max blocking time 200 ms") {
		t.Errorf("Send with a full buffer: %v, want a max.block.ms timeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Send(ctx, Record{Topic: "t", Value: make([]byte, 600)}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Send with a full buffer and a done context: %v", err)
	}
	close(release)
	if _, err := produceSync(t, p, Record{Topic: "t", Value: make([]byte, 600)}); err != nil {
		t.Errorf("Send once the buffer freed: %v", err)
	}
}
