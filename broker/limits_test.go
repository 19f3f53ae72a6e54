package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func createTopics(version int16, parts ...int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = version
	req.TimeoutMillis = 10000
	for i, p := range parts {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = "t" + string(rune('a'+i))
		t.NumPartitions = p
		t.ReplicationFactor = 1
		req.Topics = append(req.Topics, t)
	}
	return req
}

func TestCreateTopicsLimit(t *testing.T) {
	withConfigs := createTopics(4, 9997)
	withConfigs.Topics[0].Configs = make([]kmsg.CreateTopicsRequestTopicConfig, 3)
	assigned := createTopics(4, -1)
	assigned.Topics[0].ReplicaAssignment = make([]kmsg.CreateTopicsRequestTopicReplicaAssignment, 10000)
	tests := []struct {
		name    string
		req     *kmsg.CreateTopicsRequest
		refused bool
	}{
		{"9999 partitions: 10000 records", createTopics(4, 9999), false},
		{"10000 partitions: 10001 records", createTopics(4, 10000), true},
		{"issue 16's kind of frame: 2147483647 partitions", createTopics(4, 2147483647), true},
		{"two topics of 5000", createTopics(4, 5000, 5000), true},
		{"default partitions", createTopics(4, -1, -1), false},
		{"9997 partitions and 3 configs", withConfigs, true},
		{"a replica assignment of 10000 partitions", assigned, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, refused := createTopicsLimit(tt.req, 3)
			if refused != tt.refused {
				t.Fatalf("refused = %v, want %v", refused, tt.refused)
			}
			if !refused {
				return
			}
			r := resp.(*kmsg.CreateTopicsResponse)
			if len(r.Topics) != len(tt.req.Topics) {
				t.Fatalf("%d topics answered, want %d", len(r.Topics), len(tt.req.Topics))
			}
			for _, rt := range r.Topics {
				if rt.ErrorCode != 44 || rt.ErrorMessage == nil || *rt.ErrorMessage != excessiveBatch {
					t.Errorf("topic %s: error %d %v, want POLICY_VIOLATION (44) %q", rt.Topic, rt.ErrorCode, rt.ErrorMessage, excessiveBatch)
				}
			}
		})
	}
}

func TestCreatePartitionsLimit(t *testing.T) {
	have := map[string]int32{"one": 1, "many": 9000}
	count := func(topic string, upTo int32) int32 { return min(have[topic], upTo) }
	req := func(counts map[string]int32) *kmsg.CreatePartitionsRequest {
		r := kmsg.NewPtrCreatePartitionsRequest()
		for topic, n := range counts {
			t := kmsg.NewCreatePartitionsRequestTopic()
			t.Topic, t.Count = topic, n
			r.Topics = append(r.Topics, t)
		}
		return r
	}
	tests := []struct {
		name    string
		counts  map[string]int32
		refused bool
	}{
		{"one to 10001: 10000 new", map[string]int32{"one": 10001}, false},
		{"one to 10002: 10001 new", map[string]int32{"one": 10002}, true},
		{"one to 2147483647", map[string]int32{"one": 2147483647}, true},
		{"many to 19000: 10000 new", map[string]int32{"many": 19000}, false},
		{"both by 5001", map[string]int32{"one": 5002, "many": 14001}, true},
		{"an unknown topic", map[string]int32{"none": 5}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, refused := createPartitionsLimit(req(tt.counts), count)
			if refused != tt.refused {
				t.Fatalf("refused = %v, want %v", refused, tt.refused)
			}
		})
	}
}

// TestBrokerRefusesOversizedCreates sends the requests to the broker: an
// operation over the controller's cap is answered POLICY_VIOLATION and
// makes nothing, the broker's partition count from kfake is exact, and the
// broker goes on serving.
func TestBrokerRefusesOversizedCreates(t *testing.T) {
	c, logs := startTest(t, Config{Topics: []string{"grow"}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// 20000 partitions: unguarded, kfake makes them all (about 8 MB).
	resp, err := createTopics(5, 20000).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0].ErrorCode; got != 44 {
		t.Fatalf("CreateTopics of 20000 partitions: error %d, want POLICY_VIOLATION (44)", got)
	}
	if n := c.partitionCount("ta", 20000); n != 0 {
		t.Fatalf("the refused topic has %d partitions", n)
	}
	waitFor(t, 5*time.Second, "the refusal is logged", func() bool { return strings.Contains(logs.String(), "refused CreateTopics") })

	if n := c.partitionCount("grow", 100); n != 1 {
		t.Fatalf("partitionCount(grow) = %d, want 1", n)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 10000
	ct := kmsg.NewCreatePartitionsRequestTopic()
	ct.Topic, ct.Count = "grow", 20000
	cp.Topics = append(cp.Topics, ct)
	presp, err := cp.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := presp.Topics[0].ErrorCode; got != 44 {
		t.Fatalf("CreatePartitions to 20000: error %d, want POLICY_VIOLATION (44)", got)
	}
	cp.Topics[0].Count = 5
	if presp, err = cp.RequestWith(ctx, cl); err != nil || presp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreatePartitions to 5: %v %+v", err, presp)
	}
	if n := c.partitionCount("grow", 100); n != 5 {
		t.Fatalf("partitionCount(grow) after growing to 5 = %d", n)
	}

	// Still serving.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "grow", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce after the refusals: %v", err)
	}
}
