package config

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sEnt is the part of a Spring entry the table tests check.
type sEnt struct {
	Key, RawKey, Value, RawValue string
	KeyPos, ValuePos             Pos
	Rank, Doc                    int32
}

func springView(f *File) []sEnt {
	var out []sEnt
	for _, e := range f.Entries {
		out = append(out, sEnt{e.Key, e.RawKey, e.Value, e.RawValue, e.KeyPos, e.ValuePos, e.Rank, e.Doc})
	}
	return out
}

func TestParseSpringProperties(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []sEnt
	}{
		{
			name: "typed settings with relaxed names",
			in:   "spring.kafka.producer.batch-size=16384\nspring.kafka.producer.batchSize=1KB\nspring.kafka.producer.buffer_memory=32MB\nspring.kafka.producer.ACKS=all\n",
			want: []sEnt{
				{"batch.size", "spring.kafka.producer.batch-size", "16384", "", Pos{1, 1}, Pos{1, 34}, RankSpringProducer, 0},
				{"batch.size", "spring.kafka.producer.batchSize", "1024", "1KB", Pos{2, 1}, Pos{2, 33}, RankSpringProducer, 0},
				{"buffer.memory", "spring.kafka.producer.buffer_memory", "33554432", "32MB", Pos{3, 1}, Pos{3, 37}, RankSpringProducer, 0},
				{"acks", "spring.kafka.producer.ACKS", "all", "", Pos{4, 1}, Pos{4, 28}, RankSpringProducer, 0},
			},
		},
		{
			name: "bootstrap servers, shared and the producer's",
			in:   "spring.kafka.bootstrap-servers=a:9092,b:9092\nspring.kafka.producer.bootstrap-servers=c:9092\n",
			want: []sEnt{
				{"bootstrap.servers", "spring.kafka.bootstrap-servers", "a:9092,b:9092", "", Pos{1, 1}, Pos{1, 32}, RankSpringCommon, 0},
				{"bootstrap.servers", "spring.kafka.producer.bootstrap-servers", "c:9092", "", Pos{2, 1}, Pos{2, 41}, RankSpringProducer, 0},
			},
		},
		{
			name: "indexed list joins at its first item",
			in:   "spring.kafka.bootstrap-servers[1]=b:9092\nspring.kafka.bootstrap-servers[0]=a:9092\n",
			want: []sEnt{
				{"bootstrap.servers", "spring.kafka.bootstrap-servers[0]", "a:9092,b:9092", "", Pos{2, 1}, Pos{2, 35}, RankSpringCommon, 0},
			},
		},
		{
			name: "name[]=a,b list shortcut",
			in:   "spring.kafka.bootstrap-servers[]=a:9092,b:9092\n",
			want: []sEnt{
				{"bootstrap.servers", "spring.kafka.bootstrap-servers[]", "a:9092,b:9092", "", Pos{1, 1}, Pos{1, 34}, RankSpringCommon, 0},
			},
		},
		{
			name: "properties maps, dotted and bracketed",
			in: "spring.kafka.properties.connections.max.idle.ms=-1\n" +
				"spring.kafka.properties[sasl.jaas.config]=x\n" +
				"spring.kafka.producer.properties.[linger.ms]=5\n" +
				"spring.kafka.producer.properties.max_block/ms=9\n",
			want: []sEnt{
				{"connections.max.idle.ms", "spring.kafka.properties.connections.max.idle.ms", "-1", "", Pos{1, 1}, Pos{1, 49}, RankSpringProperties, 0},
				{"sasl.jaas.config", "spring.kafka.properties[sasl.jaas.config]", "x", "", Pos{2, 1}, Pos{2, 43}, RankSpringProperties, 0},
				{"linger.ms", "spring.kafka.producer.properties.[linger.ms]", "5", "", Pos{3, 1}, Pos{3, 46}, RankSpringProducerProperties, 0},
				{"maxblockms", "spring.kafka.producer.properties.max_block/ms", "9", "", Pos{4, 1}, Pos{4, 47}, RankSpringProducerProperties, 0},
			},
		},
		{
			name: "ssl and security, shared and the producer's",
			in:   "spring.kafka.ssl.key-store-password=p\nspring.kafka.producer.ssl.trust-store-type=PKCS12\nspring.kafka.security.protocol=SSL\nspring.kafka.producer.security.protocol=SASL_SSL\nspring.kafka.ssl.bundle=b\n",
			want: []sEnt{
				{"ssl.keystore.password", "spring.kafka.ssl.key-store-password", "p", "", Pos{1, 1}, Pos{1, 37}, RankSpringCommon, 0},
				{"ssl.truststore.type", "spring.kafka.producer.ssl.trust-store-type", "PKCS12", "", Pos{2, 1}, Pos{2, 44}, RankSpringProducer, 0},
				{"security.protocol", "spring.kafka.security.protocol", "SSL", "", Pos{3, 1}, Pos{3, 32}, RankSpringCommon, 0},
				{"security.protocol", "spring.kafka.producer.security.protocol", "SASL_SSL", "", Pos{4, 1}, Pos{4, 41}, RankSpringProducer, 0},
			},
		},
		{
			name: "other clients and other settings make no entry",
			in:   "spring.kafka.consumer.group-id=g\nspring.kafka.listener.concurrency=3\nspring.kafka.admin.fail-fast=true\nspring.kafka.streams.application-id=s\nspring.kafka.jaas.enabled=true\nserver.port=8080\nkafka.bootstrap-servers=x:1\n",
		},
		{
			name: "unknown producer and spring.kafka keys keep their raw key",
			in:   "spring.kafka.producer.linger-ms=5\nspring.kafka.bootstrap-server=x:9092\nspring.kafka.producer.acks.x=1\n",
			want: []sEnt{
				{"spring.kafka.producer.linger-ms", "spring.kafka.producer.linger-ms", "5", "", Pos{1, 1}, Pos{1, 33}, RankSpringProducer, 0},
				{"spring.kafka.bootstrap-server", "spring.kafka.bootstrap-server", "x:9092", "", Pos{2, 1}, Pos{2, 31}, RankSpringCommon, 0},
				{"spring.kafka.producer.acks.x", "spring.kafka.producer.acks.x", "1", "", Pos{3, 1}, Pos{3, 30}, RankSpringProducer, 0},
			},
		},
		{
			name: "transaction id prefix sets transactional.id",
			in:   "spring.kafka.producer.transaction-id-prefix=tx-\n",
			want: []sEnt{{"transactional.id", "spring.kafka.producer.transaction-id-prefix", "tx-", "", Pos{1, 1}, Pos{1, 45}, RankSpringProducer, 0}},
		},
		{
			name: "#--- starts a document",
			in:   "spring.kafka.producer.acks=1\n#---\nspring.kafka.producer.acks=all\n",
			want: []sEnt{
				{"acks", "spring.kafka.producer.acks", "1", "", Pos{1, 1}, Pos{1, 28}, RankSpringProducer, 0},
				{"acks", "spring.kafka.producer.acks", "all", "", Pos{3, 1}, Pos{3, 28}, RankSpringProducer, 1},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseSpringProperties("application.properties", strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, springView(f)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestSpringPrecedence checks the Rank order against what
// KafkaProperties.buildProducerProperties() yields.
func TestSpringPrecedence(t *testing.T) {
	in := "spring.kafka.properties.acks=0\n" +
		"spring.kafka.producer.acks=1\n" + // typed producer beats spring.kafka.properties
		"spring.kafka.client-id=shared\n" +
		"spring.kafka.properties.client.id=props\n" + // shared map beats shared typed
		"spring.kafka.producer.properties.linger.ms=7\n" +
		"spring.kafka.properties.linger.ms=3\n" + // producer map beats shared map
		"spring.kafka.producer.properties.retries=9\n" +
		"spring.kafka.producer.retries=2\n" // producer map beats typed producer
	f, err := ParseSpringProperties("application.properties", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"acks": "1", "client.id": "props", "linger.ms": "7", "retries": "9"}
	if diff := cmp.Diff(want, f.Map()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if d := f.Duplicates(); len(d) != 0 {
		t.Errorf("entries at different ranks reported as duplicates: %v", d)
	}
}

func TestParseSpringYAML(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []sEnt
	}{
		{
			name: "nested, dotted and bracket keys",
			in: `spring:
  kafka:
    producer:
      acks: all
    properties:
      "[connections.max.idle.ms]": 300000
      sasl.mechanism: PLAIN
      security:
        protocol: SASL_SSL
spring.kafka.producer.batch-size: 32KB
`,
			want: []sEnt{
				{"acks", "spring.kafka.producer.acks", "all", "", Pos{4, 7}, Pos{4, 13}, RankSpringProducer, 0},
				{"connections.max.idle.ms", "spring.kafka.properties[connections.max.idle.ms]", "300000", "", Pos{6, 7}, Pos{6, 36}, RankSpringProperties, 0},
				{"sasl.mechanism", "spring.kafka.properties.sasl.mechanism", "PLAIN", "", Pos{7, 7}, Pos{7, 23}, RankSpringProperties, 0},
				{"security.protocol", "spring.kafka.properties.security.protocol", "SASL_SSL", "", Pos{9, 9}, Pos{9, 19}, RankSpringProperties, 0},
				{"batch.size", "spring.kafka.producer.batch-size", "32768", "32KB", Pos{10, 1}, Pos{10, 35}, RankSpringProducer, 0},
			},
		},
		{
			name: "list of bootstrap servers",
			in:   "spring:\n  kafka:\n    bootstrap-servers:\n      - a:9092\n      - b:9092\n    producer:\n      bootstrap-servers: [c:9092, d:9092]\n",
			want: []sEnt{
				{"bootstrap.servers", "spring.kafka.bootstrap-servers", "a:9092,b:9092", "", Pos{3, 5}, Pos{4, 9}, RankSpringCommon, 0},
				{"bootstrap.servers", "spring.kafka.producer.bootstrap-servers", "c:9092,d:9092", "", Pos{7, 7}, Pos{7, 27}, RankSpringProducer, 0},
			},
		},
		{
			name: "YAML 1.1 scalars as SnakeYAML reads them",
			in:   "spring.kafka.producer.properties:\n  enable.idempotence: yes\n  linger.ms: 0x10\n  retries: 1_000\n  client.id:\n  quoted: 'yes'\n",
			want: []sEnt{
				{"enable.idempotence", "spring.kafka.producer.properties.enable.idempotence", "true", "yes", Pos{2, 3}, Pos{2, 23}, RankSpringProducerProperties, 0},
				{"linger.ms", "spring.kafka.producer.properties.linger.ms", "16", "0x10", Pos{3, 3}, Pos{3, 14}, RankSpringProducerProperties, 0},
				{"retries", "spring.kafka.producer.properties.retries", "1000", "1_000", Pos{4, 3}, Pos{4, 12}, RankSpringProducerProperties, 0},
				{"client.id", "spring.kafka.producer.properties.client.id", "", "", Pos{5, 3}, Pos{5, 13}, RankSpringProducerProperties, 0},
				{"quoted", "spring.kafka.producer.properties.quoted", "yes", "", Pos{6, 3}, Pos{6, 11}, RankSpringProducerProperties, 0},
			},
		},
		{
			name: "documents and anchors",
			in:   "base: &b\n  acks: all\n---\nspring:\n  kafka:\n    producer:\n      <<: *b\n      retries: 1\n",
			want: []sEnt{
				{"acks", "spring.kafka.producer.acks", "all", "", Pos{2, 3}, Pos{2, 9}, RankSpringProducer, 1},
				{"retries", "spring.kafka.producer.retries", "1", "", Pos{8, 7}, Pos{8, 16}, RankSpringProducer, 1},
			},
		},
		{
			name: "other clients make no entry",
			in:   "spring:\n  kafka:\n    consumer:\n      group-id: g\n    listener:\n      concurrency: 3\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseSpringYAML("application.yml", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, springView(f)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSpringYAMLErrors(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
	}{
		{"tab indentation", "spring:\n  kafka:\n\tproducer:\n", "application.yml:3:1: found character that cannot start any token"},
		{"unclosed flow sequence", "a: 1\nb:\n  c: [x\n", "application.yml:3:3: did not find expected ',' or ']'"},
		{"bad indentation", "a:\n  b: 1\n c: 2\n", "application.yml:3:2: did not find expected key"},
		{"unknown anchor", "a: 1\nb: *nope\n", "application.yml:2:4: unknown anchor 'nope' referenced"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpringYAML("application.yml", []byte(tc.in))
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestYAMLComments(t *testing.T) {
	in := "# head\nspring:\n  kafka: # kdiag:ignore KD101 why\n    x: 'a # b' # tail\n"
	f, err := ParseSpringYAML("application.yml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Comment{{"head", Pos{1, 1}}, {"kdiag:ignore KD101 why", Pos{3, 10}}, {"tail", Pos{4, 16}}}
	if diff := cmp.Diff(want, f.Comments); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name, file, in string
		want           Dialect
	}{
		{"spring properties by name", "config/application-prod.properties", "a=b\n", Spring},
		{"yaml by name", "values.yaml", "a: b\n", Spring},
		{"librdkafka by name", "/etc/librdkafka.conf", "bootstrap.servers=x\n", Librdkafka},
		{"rdkafka by name", "rdkafka.properties", "a=b\n", Librdkafka},
		{"spring by content", "kafka.conf", "spring.kafka.producer.acks=all\n", Spring},
		{"spring yaml on stdin", "-", "spring:\n  kafka:\n    producer:\n      acks: all\n", Spring},
		{"librdkafka by content", "client.conf", "bootstrap.servers=x\nqueue.buffering.max.ms=5\n", Librdkafka},
		{"java with broker-ish keys", "producer.properties", "bootstrap.servers=x\nsocket.send.buffer.bytes=1\nmessage.max.bytes=1\n", Java},
		{"java by default", "producer.properties", "bootstrap.servers=x\nacks=all\n", Java},
		// By the weight of the keys: one librdkafka key among Java-only
		// ones is a Java file with a key the Java client does not have.
		{"java with one librdkafka key", "producer.properties",
			"bootstrap.servers=x\nkey.serializer=org.apache.kafka.common.serialization.StringSerializer\n" +
				"value.serializer=org.apache.kafka.common.serialization.StringSerializer\nqueue.buffering.max.ms=5\n", Java},
		{"librdkafka outweighs java", "client.conf",
			"bootstrap.servers=x\nqueue.buffering.max.ms=5\nsocket.keepalive.enable=true\nbuffer.memory=1\n", Librdkafka},
		{"empty", "x", "", Java},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Detect(tc.file, []byte(tc.in)); got != tc.want {
				t.Errorf("Detect(%q) = %v, want %v", tc.file, got, tc.want)
			}
		})
	}
}

func TestParseDispatch(t *testing.T) {
	yml := []byte("spring:\n  kafka:\n    producer:\n      acks: all\n")
	f, err := Parse("-", yml, Unknown)
	if err != nil {
		t.Fatal(err)
	}
	if f.Dialect != Spring || f.Map()["acks"] != "all" {
		t.Errorf("stdin YAML: dialect %v, map %v", f.Dialect, f.Map())
	}
	f, err = Parse("x.conf", []byte("metadata.broker.list=a:1\n"), Unknown)
	if err != nil || f.Dialect != Librdkafka {
		t.Errorf("librdkafka: %v, %v", f, err)
	}
	f, err = Parse("x.properties", []byte("spring.kafka.producer.acks=1\n"), Java)
	if err != nil || f.Dialect != Java || f.Map()["spring.kafka.producer.acks"] != "1" {
		t.Errorf("forced Java dialect: %+v, %v", f, err)
	}
}

// TestLibrdkafkaOnlyKeysMatchReference checks LibrdkafkaOnlyKeys against
// the reference tables it was derived from, when they are at hand.
func TestLibrdkafkaOnlyKeysMatchReference(t *testing.T) {
	names := func(path string) map[string]bool {
		fh, err := os.Open(path)
		if err != nil {
			t.Skipf("reference table not available: %v", err)
		}
		defer fh.Close()
		m := map[string]bool{}
		sc := bufio.NewScanner(fh)
		sc.Scan() // header
		for sc.Scan() {
			if k, _, _ := strings.Cut(sc.Text(), "\t"); k != "" {
				m[k] = true
			}
		}
		return m
	}
	rd := names("../../shared/reference/librdkafka-producer-configs.tsv")
	jv := names("../../shared/reference/java-producer-configs.tsv")
	brokerToo := map[string]bool{"message.max.bytes": true, "socket.send.buffer.bytes": true, "socket.receive.buffer.bytes": true}
	var want []string
	for k := range rd {
		if !jv[k] && !brokerToo[k] {
			want = append(want, k)
		}
	}
	want = append(want, "debug")
	sort.Strings(want)
	got := append([]string(nil), LibrdkafkaOnlyKeys...)
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LibrdkafkaOnlyKeys vs the reference tables (-want +got):\n%s", diff)
	}
}

// TestYAMLAliasBomb: a document whose aliases expand exponentially is cut,
// quickly, with a Problem.
func TestYAMLAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x]\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d]\n", i, i, i-1, i-1)
	}
	b.WriteString("spring.kafka.properties.bomb: *a29\n")
	f, err := ParseSpringYAML("bomb.yml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Problems) != 1 || !strings.Contains(f.Problems[0].Msg, "aliases expand to more than") {
		t.Fatalf("problems %v, want the alias expansion limit", f.Problems)
	}
}

// TestYAMLDuplicateKeys: Spring's YAML loader rejects a key repeated in one
// mapping; the same key in another document or mapping is fine.
func TestYAMLDuplicateKeys(t *testing.T) {
	in := "spring:\n  kafka:\n    producer:\n      acks: 1\n      acks: all\n---\nspring.kafka.producer.acks: 0\n"
	f, err := ParseSpringYAML("application.yml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range f.Problems {
		got = append(got, p.Pos.String()+" "+p.Msg[:strings.Index(p.Msg, ":")])
	}
	want := []string{`5:7 duplicate key "acks" in one YAML mapping`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if d := f.Duplicates()["acks"]; len(d) != 2 || d[0].Doc != 0 || d[1].Doc != 0 {
		t.Errorf("Duplicates()[acks] = %+v, want the two entries of document 0", d)
	}
}

// TestJavaOnlyKeysMatchReference checks JavaOnlyKeys against the reference
// tables it was derived from, when they are at hand.
func TestJavaOnlyKeysMatchReference(t *testing.T) {
	names := func(path string) []string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Skipf("reference table not available: %v", err)
		}
		var out []string
		for i, l := range strings.Split(string(b), "\n") {
			if k, _, _ := strings.Cut(l, "\t"); i > 0 && k != "" {
				out = append(out, k)
			}
		}
		return out
	}
	rd := map[string]bool{}
	for _, k := range names("../../shared/reference/librdkafka-producer-configs.tsv") {
		rd[k] = true
	}
	sharedName := func(k string) bool {
		return strings.HasPrefix(k, "sasl.oauthbearer.") || strings.HasPrefix(k, "sasl.kerberos.") ||
			k == "ssl.cipher.suites" || k == "ssl.endpoint.identification.algorithm" ||
			k == "enable.metrics.push" || k == "client.rack"
	}
	var want []string
	for _, k := range names("../../shared/reference/java-producer-configs.tsv") {
		if !rd[k] && !sharedName(k) {
			want = append(want, k)
		}
	}
	sort.Strings(want)
	got := append([]string(nil), JavaOnlyKeys...)
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JavaOnlyKeys vs the reference tables (-want +got):\n%s", diff)
	}
}

// TestYAMLInvalidUTF8Position: a byte that is not UTF-8 is reported where
// it is (issue 30: at 1:1 when it was on line 4), in a Spring file, a
// ConfigMap and a compose file alike.
func TestYAMLInvalidUTF8Position(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"application.yml", "spring:\n  kafka:\n    producer:\n      acks: \"\xff\"\n", "application.yml:4:14: invalid UTF-8 (byte 0xff)"},
		{"cm.yaml", "kind: ConfigMap\ndata:\n  p.properties: |\n    acks=caf\xe9\n", "cm.yaml:4:13: invalid UTF-8 (byte 0xe9)"},
		{"docker-compose.yml", "services:\n  c:\n    image: x\n    environment:\n      CONNECT_X: \"é\xc3\"\n", "docker-compose.yml:5:20: invalid UTF-8 (byte 0xc3)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseAll(tt.name, tt.in, Unknown)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}
