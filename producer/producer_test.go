package producer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/netstat"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

// TestLifecycleOrder checks the Java producer's order of connection events:
// every bootstrap server first (nodes -1..-3, each with ApiVersions), then
// METADATA to one of them, then the brokers it learned (nodes 0..2).
func TestLifecycleOrder(t *testing.T) {
	c := newCluster(t, 3, kfake.SeedTopics(3, "t"))
	p, logs := newProducer(t, c, nil)
	waitFor(t, "6 connections (3 bootstrap, 3 brokers)", func() bool { return p.Stats().ConnectionsOpened >= 6 })

	addrs := c.ListenAddrs()
	firstMeta := logs.index("Sending metadata request MetadataRequestData(topics=[], allowAutoTopicCreation=true")
	if firstMeta < 0 {
		t.Fatal("no metadata request logged")
	}
	for i, a := range addrs {
		id := -1 - i
		init := logs.index(fmt.Sprintf("Initiating connection to node %s (id: %d rack: null) using address /127.0.0.1", a, id))
		if init < 0 || init > firstMeta {
			t.Errorf("bootstrap node %d: connection initiated at log line %d, metadata at %d", id, init, firstMeta)
		}
		if logs.index(fmt.Sprintf("Completed connection to node %d. Fetching API versions.", id)) < 0 {
			t.Errorf("bootstrap node %d: no completed connection", id)
		}
	}
	// The metadata went to a bootstrap node.
	if line := logs.lines()[firstMeta]; !strings.Contains(line, "to node 127.0.0.1:") || !strings.Contains(line, "(id: -") {
		t.Errorf("first metadata request not to a bootstrap node: %s", line)
	}
	brokerConns := 0
	for id := 0; id < 3; id++ {
		i := logs.index(fmt.Sprintf("(id: %d rack: krack) using address", id)) // kfake sets rack "krack"
		if i < 0 {
			continue
		}
		brokerConns++
		if i < firstMeta {
			t.Errorf("broker %d connected before the first metadata request", id)
		}
	}
	if brokerConns != 3 {
		t.Errorf("connected to %d of 3 brokers after metadata", brokerConns)
	}
	st := p.Stats()
	if st.MetadataRequests < 1 || st.ConnectionsOpened != 6 || st.ConnectionsOpen != 6 {
		t.Errorf("stats after start: %+v", st)
	}
}

// TestRecordsReadBack produces keyed, keyless and headered records and reads
// them back with a franz-go consumer: same bytes, same order per partition,
// and keyed records on the partition the Java partitioner (murmur2) picks.
func TestRecordsReadBack(t *testing.T) {
	c := newCluster(t, 3, kfake.SeedTopics(3, "readback"))
	p, _ := newProducer(t, c, map[string]string{"linger.ms": "5", "batch.size": "300"})

	type rec struct {
		Partition int32
		Key       string
		NilKey    bool
		Value     string
		Headers   []Header
	}
	var sent []rec
	errs := make(chan error, 100)
	for i := 0; i < 60; i++ {
		r := Record{Topic: "readback", Value: []byte(fmt.Sprintf("value-%03d-%s", i, strings.Repeat("x", i)))}
		if i%3 != 0 {
			r.Key = []byte(fmt.Sprintf("key-%d", i%7))
		}
		if i%4 == 0 {
			r.Headers = []Header{{Key: "h1", Value: []byte(fmt.Sprint(i))}, {Key: "empty", Value: []byte{}}}
		}
		if err := p.Send(context.Background(), r, func(md RecordMetadata, err error) {
			if err != nil {
				errs <- err
				return
			}
			rc := rec{Partition: md.Partition, Key: string(r.Key), NilKey: r.Key == nil, Value: string(r.Value), Headers: r.Headers}
			sent = append(sent, rc) // callbacks run one at a time on the network goroutine
		}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(sent) != 60 {
		t.Fatalf("%d callbacks, want 60", len(sent))
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("readback"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []rec
	for len(got) < len(sent) && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			rc := rec{Partition: r.Partition, Key: string(r.Key), NilKey: r.Key == nil, Value: string(r.Value)}
			for _, h := range r.Headers {
				rc.Headers = append(rc.Headers, Header{Key: h.Key, Value: h.Value})
			}
			got = append(got, rc)
		})
	}
	byPart := func(rs []rec) map[int32][]rec {
		m := map[int32][]rec{}
		for _, r := range rs {
			m[r.Partition] = append(m[r.Partition], r)
		}
		return m
	}
	if diff := cmp.Diff(byPart(sent), byPart(got)); diff != "" {
		t.Errorf("records read back differ (-sent +got):\n%s", diff)
	}
	// Keyed records land where kgo's Java-compatible partitioner puts them.
	part := kgo.StickyKeyPartitioner(nil).ForTopic("readback")
	for _, r := range sent {
		if r.NilKey {
			continue
		}
		if want := int32(part.Partition(&kgo.Record{Key: []byte(r.Key)}, 3)); r.Partition != want {
			t.Errorf("key %q on partition %d, Java partitioner says %d", r.Key, r.Partition, want)
		}
	}
	if st := p.Stats(); st.RecordsAcked != 60 || st.RecordsSent < 60 || st.RecordsFailed != 0 {
		t.Errorf("stats: %+v", st)
	}
}

// TestCloseLeavesNothing: after Close no goroutine of the producer runs and
// none of its sockets is ESTABLISHED or CLOSE_WAIT.
func TestCloseLeavesNothing(t *testing.T) {
	c := newCluster(t, 3, kfake.SeedTopics(1, "t"))
	ignore := goleak.IgnoreCurrent()
	cfg, err := ParseConfig(map[string]string{"bootstrap.servers": strings.Join(c.ListenAddrs(), ","), "linger.ms": "0"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := produceSync(t, p, Record{Topic: "t", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if n := countState(clientSockets(t, c), netstat.Established); n == 0 {
		t.Fatal("no established client socket before Close")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore)
	socks := clientSockets(t, c)
	if n := countState(socks, netstat.Established) + countState(socks, netstat.CloseWait); n != 0 {
		t.Errorf("%d sockets left open after Close: %s", n, describe(socks))
	}
	st := p.Stats()
	if st.ConnectionsOpen != 0 || st.ClosedOnClose != st.ConnectionsOpened {
		t.Errorf("stats after Close: %+v", st)
	}
	if err := p.Send(ctx, Record{Topic: "t"}, nil); err != ErrClosed {
		t.Errorf("Send after Close: %v, want ErrClosed", err)
	}
}
