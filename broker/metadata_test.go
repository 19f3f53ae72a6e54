package broker

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// roundTrip sends req on conn at its version and decodes the response.
func roundTrip(t *testing.T, conn net.Conn, req kmsg.Request) kmsg.Response {
	t.Helper()
	if _, err := conn.Write(request(req)); err != nil {
		t.Fatalf("write %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatalf("read %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatalf("read %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	r := kbin.Reader{Src: body[4:]} // after the correlation id
	if resp.IsFlexible() && req.Key() != apiKeyApiVersions {
		kmsg.SkipTags(&r)
	}
	if err := resp.ReadFrom(r.Src); err != nil {
		t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// metadataTopics returns the topics a Metadata response names, with their
// error codes.
func metadataTopics(resp kmsg.Response) map[string]int16 {
	out := make(map[string]int16)
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.Topic != nil {
			out[*t.Topic] = t.ErrorCode
		}
	}
	return out
}

// TestLegacyMetadataMeansWhatKafkaSays: Metadata v0-3 have no
// AllowAutoTopicCreation field and Kafka reads its absence as true, so a
// broker with auto.create.topics.enable creates the topics they name; v0's
// empty topic list asks for every topic, v1's for none.
func TestLegacyMetadataMeansWhatKafkaSays(t *testing.T) {
	c, _ := startTest(t, Config{})
	conn := dialBroker(t, c.Addrs()[0])

	var created []string
	for v := int16(0); v <= 3; v++ {
		topic := "legacy-v" + string(rune('0'+v))
		got := metadataTopics(roundTrip(t, conn, metadataRequest(v, topic)))
		if code, ok := got[topic]; !ok || code != 0 {
			t.Errorf("Metadata v%d naming %s: topics %v, want it created (error 0)", v, topic, got)
		}
		created = append(created, topic)
	}

	// v4 says no: the topic is not created.
	noAuto := metadataRequest(4, "v4-no-auto")
	noAuto.AllowAutoTopicCreation = false
	if got := metadataTopics(roundTrip(t, conn, noAuto)); got["v4-no-auto"] != 3 {
		t.Errorf("Metadata v4 without auto-creation: topics %v, want UNKNOWN_TOPIC_OR_PARTITION (3)", got)
	}

	// v0 with no topic: every topic, and nothing more created.
	all := metadataTopics(roundTrip(t, conn, metadataRequest(0)))
	var names []string
	for n := range all {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, created) {
		t.Errorf("Metadata v0 with an empty topic list: %v, want every topic %v", names, created)
	}
	// v1 with an empty list: no topic.
	v1 := metadataRequest(1)
	v1.Topics = []kmsg.MetadataRequestTopic{}
	if got := metadataTopics(roundTrip(t, conn, v1)); len(got) != 0 {
		t.Errorf("Metadata v1 with an empty topic list: %v, want none", got)
	}
	if n := c.legacyMetadata.Load(); n != 6 {
		t.Errorf("%d Metadata v0-3 requests seen, want 6", n)
	}
}

// kafkaPythonScript produces one record to a topic that does not exist with
// kafka-python's KafkaProducer, bounded in time, and prints where it went.
const kafkaPythonScript = `
import sys
from kafka import KafkaProducer
p = KafkaProducer(bootstrap_servers=sys.argv[1], max_block_ms=20000, request_timeout_ms=10000, retries=0)
md = p.send(sys.argv[2], b"hello from kafka-python").get(timeout=20)
p.close(timeout=5)
print("delivered", md.topic, md.partition, md.offset)
`

// TestKafkaPythonProducesToNewTopic runs kafka-python 2.0.2 (Debian's
// python3-kafka), which sends Metadata v1, against the broker: as against a
// real broker with auto.create.topics.enable=true, the topic is created and
// the record stored.
func TestKafkaPythonProducesToNewTopic(t *testing.T) {
	// Debian's package installs for the system python, not a pyenv one
	// that may come first on PATH.
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3 (Debian's python3; .ci/run installs python3-kafka): skipping the kafka-python client test")
	}
	if out, err := exec.Command(python, "-c", "import kafka; print(kafka.__version__)").CombinedOutput(); err != nil {
		t.Skipf("kafka-python not installed for %s (Debian package python3-kafka; .ci/run installs it): %v: %s", python, err, out)
	} else {
		t.Logf("kafka-python %s", strings.TrimSpace(string(out)))
	}
	c, _ := startTest(t, Config{})
	addr := c.Addrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-c", kafkaPythonScript, addr, "kafka-python-new").CombinedOutput()
	if err != nil {
		t.Fatalf("kafka-python producer: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "delivered kafka-python-new 0 0") {
		t.Fatalf("kafka-python printed %q, want the record delivered at kafka-python-new/0 offset 0", out)
	}
	if c.legacyMetadata.Load() == 0 {
		t.Error("kafka-python sent no Metadata v0-3 request: the test no longer checks what it says")
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("kafka-python-new"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	for len(got) < 1 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, []string{"hello from kafka-python"}) {
		t.Fatalf("consumed %q", got)
	}
}
