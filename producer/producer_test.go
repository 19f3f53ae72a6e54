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

// TestLifecycleOrder checks each model's start against a 3-broker
// cluster, as kafka-clients did against kdiag's broker
// (../shared/java-clients/README.md): 3.9.0 connects at creation to one
// bootstrap server, for METADATA (topics=[]) and INIT_PRODUCER_ID, and to
// at most one broker (for its telemetry request); 2.1.1 connects to
// nothing until the first send. Then both connect only where they must:
// the leader of the partition sent to and the least loaded broker for the
// topic's metadata (2.1.1: at most two of the three brokers).
func TestLifecycleOrder(t *testing.T) {
	for _, model := range []string{"java-3.9", "java-2.1"} {
		t.Run(model, func(t *testing.T) {
			c := newCluster(t, 3, kfake.SeedTopics(1, "t"))
			p, logs := newProducer(t, c, map[string]string{KeyModel: model})
			if model == "java-3.9" {
				waitFor(t, "the producer ID", func() bool { return logs.index("ProducerId set to") >= 0 })
				// One bootstrap server, and at most one broker: the one
				// the telemetry request goes to (TelemetrySender).
				ids := initiated(logs)
				var boot, brokers []int
				for _, id := range ids {
					if id < 0 {
						boot = append(boot, id)
					} else {
						brokers = append(brokers, id)
					}
				}
				if len(boot) != 1 || len(brokers) > 1 {
					t.Fatalf("connections at creation to nodes %v, want one bootstrap server and at most one broker", ids)
				}
				i := logs.index("Sending metadata request MetadataRequestData(topics=[], allowAutoTopicCreation=true")
				if i < 0 || !strings.Contains(logs.lines()[i], fmt.Sprintf("(id: %d rack: null)", boot[0])) {
					t.Errorf("no METADATA (topics=[]) to the bootstrap node %v", ids)
				}
			} else {
				// Nothing to wait for: nothing should happen. This gives a
				// wrong producer time to connect.
				time.Sleep(500 * time.Millisecond)
				if st := p.Stats(); st.ConnectionsOpened != 0 || len(initiated(logs)) != 0 {
					t.Errorf("2.1.1 connected before any send: %+v", st)
				}
			}
			md, err := produceSync(t, p, Record{Topic: "t", Value: []byte("v")})
			if err != nil {
				t.Fatal(err)
			}
			brokers := map[int]bool{}
			for _, id := range initiated(logs) {
				if id >= 0 {
					brokers[id] = true
				}
			}
			if len(brokers) == 0 || len(brokers) > 3-1 && model == "java-2.1" {
				t.Errorf("connected to brokers %v after a send to %s-%d: want its leader and at most one for metadata", brokers, md.Topic, md.Partition)
			}
			if model == "java-2.1" && logs.index("Sending metadata request (type=MetadataRequest, topics=t) to node") < 0 {
				logs.dump(t)
				t.Error("no METADATA in 2.1.1's words")
			}
		})
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
