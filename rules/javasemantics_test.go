package rules

import (
	"strings"
	"testing"

	"github.com/kdiag/kdiag/config"
)

// TestJavaSemanticsMessages holds the messages of issue 27's "Java semantics
// that lint misses" list: what each finding says, and its severity, for the
// inputs the Java differential found wrong (rules/testdata/javadiff holds
// them as corpus files, checked against the real jars).
func TestJavaSemanticsMessages(t *testing.T) {
	tests := []struct {
		name, in string
		version  string
		rule     string
		sev      Severity
		want     []string // substrings of the message
		notWant  []string
	}{
		{"linger.ms capped", "linger.ms=9223372036854775807\n", "3.9", "KD301", Warning,
			[]string{"(9223372036854775807 + 30000, which the producer caps at 2147483647)"}, []string{"2147483647 + 30000"}},
		{"BOM outside the key", "\ufeffbootstrap.servers=127.0.0.1:9092\n", "3.9", "KD404", Warning,
			[]string{"bootstrap.servers, with the file's UTF-8 byte order mark before it"}, []string{"\ufeff"}},
		{"continuation at EOF", "bootstrap.servers=127.0.0.1:9092\nlinger.ms=5\\", "3.9", "KD903", Warning,
			[]string{"java.util.Properties drops it"}, nil},
		{"class without package", "key.serializer=StringSerializer\n", "3.9", "KD401", Error,
			[]string{"Class StringSerializer could not be found", "org.apache.kafka.common.serialization.StringSerializer"}, nil},
		{"idle overflow", "connections.max.idle.ms=9223372036854775807\n", "3.9", "KD103", Error,
			[]string{"= -1000000 ns", "closes it at the next poll"}, nil},
		{"setup timeout -1", "socket.connection.setup.timeout.max.ms=-1\n", "3.9", "KD108", Warning,
			[]string{"applies -1 ms as a static connection setup timeout and logs a WARN"}, nil},
		{"retry backoff 3.9", "retry.backoff.ms=2000\nretry.backoff.max.ms=500\n", "3.9", "KD108", Warning,
			[]string{"applies 500 ms as a static backoff and logs a WARN"}, nil},
		{"reconnect 2.8 keeps the base", "reconnect.backoff.ms=500\nreconnect.backoff.max.ms=100\n", "2.8", "KD108", Warning,
			[]string{"applies 500 ms as a static reconnect backoff, silently"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := config.Parse("p.properties", []byte(tt.in), config.Java)
			if err != nil {
				t.Fatal(err)
			}
			opts := DefaultOptions()
			opts.KafkaVersion = tt.version
			var got []string
			found := false
			for _, fd := range LintFile(f, opts) {
				got = append(got, fd.RuleID+" "+fd.Severity.String()+" "+fd.Message)
				if fd.RuleID != tt.rule {
					continue
				}
				found = true
				if fd.Severity != tt.sev {
					t.Errorf("%s severity %s, want %s", fd.RuleID, fd.Severity, tt.sev)
				}
				for _, w := range tt.want {
					if !strings.Contains(fd.Message, w) {
						t.Errorf("%s message %q lacks %q", fd.RuleID, fd.Message, w)
					}
				}
				for _, w := range tt.notWant {
					if strings.Contains(fd.Message, w) {
						t.Errorf("%s message %q has %q", fd.RuleID, fd.Message, w)
					}
				}
			}
			if !found {
				t.Errorf("no %s among:\n%s", tt.rule, strings.Join(got, "\n"))
			}
		})
	}
}

// TestKD102SaysTheCost: KD102 says what the broker's idle close costs the
// client the file is for (issue 27, measured with kafka-clients 2.1.1 and
// 3.9.0): reconnects for the Java client and librdkafka, which read the FIN
// at once; CLOSE_WAIT only for a client that does not (Options.HoldsFIN).
func TestKD102SaysTheCost(t *testing.T) {
	tests := []struct {
		name     string
		dialect  config.Dialect
		in       string
		holdsFIN bool
		want     []string
		notWant  []string
	}{
		{"java", config.Java, "connections.max.idle.ms=600000\n", false,
			[]string{"no CLOSE_WAIT while its network thread polls", "a reconnect per connection each idle period and an INFO line \"Node N disconnected.\"", "waits for a new connection"},
			[]string{"passive close on the client"}},
		{"librdkafka", config.Librdkafka, "connections.max.idle.ms=600000\n", false,
			[]string{"librdkafka sees the close at once and reconnects (no CLOSE_WAIT)"}, nil},
		{"a client that holds the FIN", config.Java, "connections.max.idle.ms=600000\n", true,
			[]string{"stays in CLOSE_WAIT"}, []string{"no CLOSE_WAIT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := config.Parse("p.properties", []byte(tt.in), tt.dialect)
			if err != nil {
				t.Fatal(err)
			}
			opts := DefaultOptions()
			opts.HoldsFIN = tt.holdsFIN
			var msg string
			for _, fd := range LintFile(f, opts) {
				if fd.RuleID == "KD102" {
					msg = fd.Message
				}
			}
			if msg == "" {
				t.Fatal("no KD102")
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("KD102 %q lacks %q", msg, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(msg, w) {
					t.Errorf("KD102 %q has %q", msg, w)
				}
			}
		})
	}
}
