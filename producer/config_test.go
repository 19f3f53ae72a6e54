package producer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kdiag/kdiag/config"
	"github.com/kdiag/kdiag/rules"
)

func TestParseConfig(t *testing.T) {
	def := DefaultConfig()
	tests := []struct {
		name    string
		props   map[string]string
		want    func(c *Config)
		wantErr string
	}{
		{name: "defaults", props: map[string]string{}, want: func(c *Config) {}},
		{
			name: "all keys",
			props: map[string]string{
				"bootstrap.servers": " a:9092, [::1]:9093 ", "client.id": "app", "acks": "1", "linger.ms": "20",
				"batch.size": "1000", "buffer.memory": "100000", "max.block.ms": "10", "max.request.size": "5000",
				"request.timeout.ms": "1000", "delivery.timeout.ms": "5000", "retries": "3", "retry.backoff.ms": "10",
				"retry.backoff.max.ms": "20", "max.in.flight.requests.per.connection": "1", "metadata.max.age.ms": "60000",
				"connections.max.idle.ms": "-1", "reconnect.backoff.ms": "5", "reconnect.backoff.max.ms": "50",
				"socket.connection.setup.timeout.ms": "300", "socket.connection.setup.timeout.max.ms": "900", "compression.type": "gzip", "enable.idempotence": "TRUE",
				"allow.auto.create.topics": "false", "security.protocol": "plaintext",
				"kdiag.reader": "on-demand", "kdiag.callback.delay.ms": "250",
			},
			want: func(c *Config) {
				c.BootstrapServers = []string{"a:9092", "[::1]:9093"}
				c.ClientID, c.Acks, c.Linger, c.BatchSize, c.BufferMemory = "app", 1, 20*time.Millisecond, 1000, 100000
				c.MaxBlock, c.MaxRequestSize, c.RequestTimeout, c.DeliveryTimeout = 10*time.Millisecond, 5000, time.Second, 5*time.Second
				c.Retries, c.RetryBackoff, c.RetryBackoffMax, c.MaxInFlight = 3, 10*time.Millisecond, 20*time.Millisecond, 1
				c.MetadataMaxAge, c.ConnectionsMaxIdle = time.Minute, -time.Millisecond
				c.ReconnectBackoff, c.ReconnectBackoffMax, c.SocketConnectionSetupTimeout = 5*time.Millisecond, 50*time.Millisecond, 300*time.Millisecond
				c.SocketConnectionSetupTimeoutMax = 900 * time.Millisecond
				c.CompressionType, c.EnableIdempotence, c.AllowAutoTopicCreation = "gzip", true, false
				c.Reader, c.CallbackDelay = ReaderOnDemand, 250*time.Millisecond
			},
		},
		{name: "acks all", props: map[string]string{"acks": "all"}, want: func(c *Config) { c.Acks = -1 }},
		{name: "acks 0", props: map[string]string{"acks": "0"}, want: func(c *Config) { c.Acks = 0 }},
		{
			// CommonClientConfigs.postValidateReconnectBackoffConfigs.
			name:  "reconnect backoff alone makes it static",
			props: map[string]string{"reconnect.backoff.ms": "200"},
			want: func(c *Config) {
				c.ReconnectBackoff, c.ReconnectBackoffMax = 200*time.Millisecond, 200*time.Millisecond
			},
		},
		{
			name:  "default delivery timeout raised to linger + request timeout",
			props: map[string]string{"request.timeout.ms": "200000"},
			want: func(c *Config) {
				c.RequestTimeout, c.DeliveryTimeout = 200*time.Second, 200*time.Second
			},
		},
		{name: "batch.size 0 is 1", props: map[string]string{"batch.size": "0"}, want: func(c *Config) { c.BatchSize = 1 }},
		{
			name:  "unknown keys ignored",
			props: map[string]string{"key.serializer": "x", "foo.bar": "1"},
			want:  func(c *Config) { c.Ignored = []string{"foo.bar", "key.serializer"} },
		},
		{name: "bad ms", props: map[string]string{"connections.max.idle.ms": "9m"}, wantErr: `connections.max.idle.ms: "9m" is not a number of milliseconds`},
		{name: "negative linger", props: map[string]string{"linger.ms": "-1"}, wantErr: `linger.ms: -1 is out of range: the Java client requires at least 0`},
		{name: "bad int", props: map[string]string{"batch.size": "16k"}, wantErr: `batch.size: "16k" is not a number of bytes`},
		{name: "in flight 0", props: map[string]string{"max.in.flight.requests.per.connection": "0"}, wantErr: "max.in.flight.requests.per.connection: 0 is out of range: the Java client requires at least 1"},
		{name: "bad acks", props: map[string]string{"acks": "2"}, wantErr: `acks: "2" is not one of all, -1, 0, 1: the producer throws ConfigException`},
		{name: "bad bool", props: map[string]string{"enable.idempotence": "yes"}, wantErr: `enable.idempotence: "yes" is not true or false`},
		{name: "bad compression", props: map[string]string{"compression.type": "brotli"}, wantErr: `compression.type: "brotli" is not one of none, gzip, snappy, lz4, zstd`},
		{name: "int too big", props: map[string]string{"batch.size": "3000000000"}, wantErr: `batch.size: "3000000000" does not fit a 32-bit integer`},
		{name: "long buffer.memory", props: map[string]string{"buffer.memory": "3000000000"}, want: func(c *Config) { c.BufferMemory = 3000000000 }},
		{
			// Java defines both with no validator (ProducerConfig,
			// CommonClientConfigs): a negative value is taken as it is.
			name:  "negative setup timeout, as Java takes it",
			props: map[string]string{"socket.connection.setup.timeout.ms": "-1", "socket.connection.setup.timeout.max.ms": "-5"},
			want: func(c *Config) {
				c.SocketConnectionSetupTimeout, c.SocketConnectionSetupTimeoutMax = -time.Millisecond, -5*time.Millisecond
			},
		},
		{name: "bad callback delay", props: map[string]string{"kdiag.callback.delay.ms": "1s"}, wantErr: `kdiag.callback.delay.ms: "1s" is not a number of milliseconds`},
		{name: "bad auto create", props: map[string]string{"allow.auto.create.topics": "no"}, wantErr: `allow.auto.create.topics: "no" is not true or false`},
		{name: "unknown protocol", props: map[string]string{"security.protocol": "TLS"}, wantErr: `security.protocol: "TLS" is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL`},
		{name: "two bad servers", props: map[string]string{"bootstrap.servers": "a,b"}, wantErr: `bootstrap.servers: "a": not host:port; bootstrap.servers: "b": not host:port`},
		{name: "bad reader", props: map[string]string{"kdiag.reader": "epoll"}, wantErr: `kdiag.reader: "epoll" is not a reader mode (want poll or on-demand)`},
		{name: "bad server", props: map[string]string{"bootstrap.servers": "localhost"}, wantErr: `bootstrap.servers: "localhost": not host:port`},
		{name: "bad port", props: map[string]string{"bootstrap.servers": "h:99999"}, wantErr: `bootstrap.servers: "h:99999": invalid port`},
		{name: "sasl", props: map[string]string{"security.protocol": "SASL_SSL"}, wantErr: `security.protocol: "SASL_SSL" is not implemented`},
		{
			name:    "explicit delivery timeout too small",
			props:   map[string]string{"delivery.timeout.ms": "1000", "request.timeout.ms": "2000"},
			wantErr: "delivery.timeout.ms: 1000 should be equal to or larger than linger.ms + request.timeout.ms (2000)",
		},
		{
			name:    "every bad value reported",
			props:   map[string]string{"linger.ms": "x", "acks": "y"},
			wantErr: `acks: "y" is not one of all, -1, 0, 1: the producer throws ConfigException; linger.ms: "x" is not a number of milliseconds`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig(tt.props)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := def
			tt.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConfigErrorsAreLintFindings: for a value kdiag lint rejects, the
// producer's error (from a file and from a map) is the lint finding's
// message, word for word, so that kdiag lint and kdiag produce never
// disagree about a value or describe it differently.
func TestConfigErrorsAreLintFindings(t *testing.T) {
	tests := []struct {
		line     string // key=value as written in the file
		wantRule string
	}{
		{"linger.ms=5s", "KD401"},
		{"linger.ms=5s  ", "KD401"}, // Properties keep trailing blanks; both quote them
		{"request.timeout.ms=30s", "KD401"},
		{"batch.size=16k", "KD401"},
		{"batch.size=3000000000", "KD401"},
		{"enable.idempotence=yes", "KD401"},
		{"linger.ms=-1", "KD402"},
		{"buffer.memory=-5", "KD402"},
		{"retries=-1", "KD402"},
		{"max.in.flight.requests.per.connection=0", "KD402"},
		{"compression.type=GZIP", "KD403"},
		{"compression.type=brotli", "KD403"},
		{"security.protocol=TLS", "KD403"},
		{"acks=2", "KD308"},
		{"acks=ALL", "KD308"},
	}
	dir := t.TempDir()
	for i, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			key, _, _ := strings.Cut(tt.line, "=")
			src := "bootstrap.servers=127.0.0.1:9092\n" + tt.line + "\n"
			path := filepath.Join(dir, fmt.Sprintf("p%d.properties", i))
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := config.Parse(path, []byte(src), config.Java)
			if err != nil {
				t.Fatal(err)
			}
			var lint []rules.Finding
			for _, x := range rules.LintFile(f, rules.DefaultOptions()) {
				if x.Key == key && x.Severity == rules.Error {
					lint = append(lint, x)
				}
			}
			if len(lint) != 1 || lint[0].RuleID != tt.wantRule {
				t.Fatalf("lint findings for %s: %+v, want one %s", key, lint, tt.wantRule)
			}
			msg := lint[0].Message

			_, err = LoadConfig(path)
			if got, want := errText(err), fmt.Sprintf("%s:%d: %s", path, lint[0].Pos.Line, msg); got != want {
				t.Errorf("LoadConfig error\n got %s\nwant %s", got, want)
			}
			_, err = ParseConfig(map[string]string{key: f.Map()[key]})
			if got := errText(err); got != msg {
				t.Errorf("ParseConfig error\n got %s\nwant %s", got, msg)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestKeysAreParsed: every key Keys lists is one ParseConfig uses.
func TestKeysAreParsed(t *testing.T) {
	for _, k := range Keys() {
		c, _ := ParseConfig(map[string]string{k: "x"})
		for _, ig := range c.Ignored {
			if ig == k {
				t.Errorf("Keys lists %s but ParseConfig ignores it", k)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err == nil || !strings.Contains(err.Error(), "bootstrap.servers: no server given") {
		t.Errorf("no bootstrap: %v", err)
	}
	c := DefaultConfig()
	c.BootstrapServers = []string{"127.0.0.1:9092"}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
	c.MaxInFlight = 0
	if err := c.Validate(); err == nil {
		t.Error("max.in.flight 0 accepted")
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.properties")
	os.WriteFile(good, []byte("# producer\nbootstrap.servers = 127.0.0.1:9092\\\n  ,127.0.0.1:9093\nconnections.max.idle.ms: -1\nlinger.ms=1\nlinger.ms=7\n"), 0o644)
	c, err := LoadConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"127.0.0.1:9092", "127.0.0.1:9093"}, c.BootstrapServers); diff != "" {
		t.Errorf("bootstrap.servers (continued line) (-want +got):\n%s", diff)
	}
	if c.ConnectionsMaxIdle >= 0 || c.Linger != 7*time.Millisecond {
		t.Errorf("idle %v linger %v (want negative and the later 7ms)", c.ConnectionsMaxIdle, c.Linger)
	}
	c, err = LoadConfigWith(good, map[string]string{"linger.ms": "9"})
	if err != nil || c.Linger != 9*time.Millisecond {
		t.Errorf("override: linger %v err %v", c.Linger, err)
	}

	bad := filepath.Join(dir, "bad.properties")
	os.WriteFile(bad, []byte("bootstrap.servers=127.0.0.1:9092\n\nconnections.max.idle.ms=9m\n"), 0o644)
	if _, err := LoadConfig(bad); err == nil || err.Error() != dir+`/bad.properties:3: connections.max.idle.ms: "9m" is not a number of milliseconds` {
		t.Errorf("err = %v", err)
	}
	if _, err := LoadConfigWith(good, map[string]string{"acks": "x"}); err == nil || !strings.HasPrefix(err.Error(), "override: acks:") {
		t.Errorf("override err = %v", err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
}

func TestParseOverrides(t *testing.T) {
	got, err := ParseOverrides([]string{"a=1", " b = x=y ", "a=2"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"a": "2", "b": "x=y"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := ParseOverrides([]string{"=1"}); err == nil {
		t.Error("empty key accepted")
	}
}
