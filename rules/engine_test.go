package rules

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kdiag/kdiag/config"
)

func parse(t testing.TB, name, src string, d config.Dialect) *config.File {
	t.Helper()
	f, err := config.Parse(name, []byte(src), d)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

// TestSecretsNeverEchoed lints files full of secrets, in places where rules
// quote values (duplicates, unknown keys, wrong dialect, jaas), and checks
// that no output record, in any encoding, carries a secret value.
func TestSecretsNeverEchoed(t *testing.T) {
	secrets := []string{"Sup3r-Key-Pass", "Older-Key-Pass", "jaas-Pa55word", "keystore-Pa55", "trust-Pa55",
		"rdk-sasl-pw-1", "custom-pw-value", "oauth-client-s3cret", "spring-key-pw", "PEM-private-key-body"}
	files := []*config.File{
		parse(t, "java.properties", `bootstrap.servers=b1:9092
security.protocol=SASL_SSL
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="jaas-Pa55word";
ssl.key.password=Older-Key-Pass
ssl.key.password=Sup3r-Key-Pass
ssl.keystore.password=keystore-Pa55
ssl.truststore.password = trust-Pa55
my.custom.password=custom-pw-value
sasl.oauthbearer.client.credentials.client.secret=oauth-client-s3cret
ssl.keystore.key=PEM-private-key-body
`, config.Java),
		parse(t, "rdkafka.properties", `bootstrap.servers=b1
security.protocol=sasl_ssl
sasl.username=alice
sasl.password=rdk-sasl-pw-1
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required password="jaas-Pa55word";
ssl.key.password=Sup3r-Key-Pass
ssl.truststore.password=trust-Pa55
`, config.Librdkafka),
		parse(t, "application.yml", `spring:
  kafka:
    ssl:
      key-password: spring-key-pw
    producer:
      properties:
        "[ssl.key.password]": Sup3r-Key-Pass
        "[sasl.jaas.config]": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="jaas-Pa55word";'
`, config.Spring),
	}
	fs := Lint(files, DefaultOptions())
	if len(fs) < 10 {
		t.Fatalf("%d findings, want the secrets reported", len(fs))
	}
	js, err := json.Marshal(fs)
	if err != nil {
		t.Fatal(err)
	}
	dump := string(js) + fmt.Sprintf("%+v %#v", fs, fs)
	for _, s := range secrets {
		if strings.Contains(dump, s) {
			t.Errorf("secret %q appears in the findings", s)
		}
	}
	// The secrets are reported, and the evidence shows the redaction.
	reported := map[string]int{}
	for _, fd := range fs {
		if fd.RuleID == "KD501" || fd.RuleID == "KD502" {
			reported[fd.Path]++
			if !strings.Contains(fd.Evidence, Redacted) || !strings.Contains(fd.Message, "hidden") {
				t.Errorf("%s: %s finding without redacted evidence: %+v", fd.Path, fd.RuleID, fd)
			}
		}
	}
	for _, f := range files {
		if reported[f.Path] == 0 {
			t.Errorf("%s: no secret reported", f.Path)
		}
	}
}

func TestSuppressions(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // "line:ID" of the remaining findings of KD101, KD103 and KD9xx
	}{
		{"line above", "# kdiag:ignore KD101 our broker never closes\nconnections.max.idle.ms=-1\n", nil},
		{"lower case id", "# kdiag:ignore kd101 our broker never closes\nconnections.max.idle.ms=-1\n", nil},
		{"two lines above", "# kdiag:ignore KD101 too far away\n\nconnections.max.idle.ms=-1\n", []string{"3:KD101"}},
		{"other rule", "# kdiag:ignore KD103 wrong rule\nconnections.max.idle.ms=-1\n", []string{"2:KD101"}},
		{"list", "# kdiag:ignore KD103, KD101 both fine here\nconnections.max.idle.ms=-1\n", nil},
		{"no reason", "# kdiag:ignore KD101\nconnections.max.idle.ms=-1\n", []string{"1:KD901", "2:KD101"}},
		{"no rule", "# kdiag:ignore\nconnections.max.idle.ms=-1\n", []string{"1:KD901", "2:KD101"}},
		{"unknown and known", "# kdiag:ignore KD777,KD101 reason\nconnections.max.idle.ms=-1\n", []string{"1:KD902"}},
		{"not a directive", "# see kdiag:ignore docs\nconnections.max.idle.ms=-1\n", []string{"2:KD101"}},
		{"KD9 not suppressible", "# kdiag:ignore KD901 hide the next one\n# kdiag:ignore KD101\nconnections.max.idle.ms=-1\n", []string{"2:KD901", "3:KD101"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := parse(t, "p.properties", "bootstrap.servers=b1:9092,b2:9092\n"+tt.src, config.Java)
			var got []string
			for _, fd := range LintFile(f, DefaultOptions()) {
				if fd.RuleID == "KD101" || fd.RuleID == "KD103" || strings.HasPrefix(fd.RuleID, "KD9") {
					got = append(got, fmt.Sprintf("%d:%s", fd.Pos.Line-1, fd.RuleID))
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// A trailing YAML comment suppresses on its own line.
	f := parse(t, "application.yml", "spring:\n  kafka:\n    properties:\n      \"[connections.max.idle.ms]\": -1 # kdiag:ignore KD101 lab broker\n", config.Spring)
	for _, fd := range LintFile(f, DefaultOptions()) {
		if fd.RuleID == "KD101" {
			t.Errorf("same-line YAML suppression did not apply: %+v", fd)
		}
	}
}

func TestLintOrderAndFields(t *testing.T) {
	a := parse(t, "b.properties", "connections.max.idle.ms=-1\nacks=2\n", config.Java)
	b := parse(t, "a.properties", "bootstrap.servers=b1:9092,b2:9092\nacks=2\nconnections.max.idle.ms=0\n", config.Java)
	fs := Lint([]*config.File{a, b}, DefaultOptions())
	var got []string
	for _, fd := range fs {
		got = append(got, fmt.Sprintf("%s:%d:%d:%s", fd.Path, fd.Pos.Line, fd.Pos.Col, fd.RuleID))
		if fd.Fix == "" || fd.Message == "" || fd.Severity == 0 {
			t.Errorf("finding without fix, message or severity: %+v", fd)
		}
		if r, ok := Lookup(fd.RuleID); !ok || (fd.Severity != r.Severity && r.ID != "KD102") {
			// Per-finding severities differ from the rule's only where
			// the rule says so (none of these).
			t.Errorf("%s: severity %v, rule says %v", fd.RuleID, fd.Severity, r.Severity)
		}
	}
	want := []string{
		"a.properties:2:6:KD308",
		"a.properties:3:25:KD103",
		"b.properties:1:1:KD201",
		"b.properties:1:25:KD101",
		"b.properties:2:6:KD308",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if LintFile(nil, DefaultOptions()) != nil {
		t.Error("LintFile(nil) returned findings")
	}
}

// TestVersionMatters: the same file is fine for one client and fatal for
// another.
func TestVersionMatters(t *testing.T) {
	src := "bootstrap.servers=b1:9092,b2:9092\nmax.in.flight.requests.per.connection=10\n"
	sev := map[string]Severity{}
	for _, v := range []string{"3.9", "4.1"} {
		f := parse(t, "p.properties", src, config.Java)
		for _, fd := range LintFile(f, Options{KafkaVersion: v, BrokerIdleMS: 600000}) {
			if fd.RuleID == "KD304" {
				sev[v] = fd.Severity
			}
		}
	}
	if diff := cmp.Diff(map[string]Severity{"3.9": Warning, "4.1": Error}, sev); diff != "" {
		t.Errorf("KD304 severity by version (-want +got):\n%s", diff)
	}
}

func TestParseJavaBootstrap(t *testing.T) {
	tests := []struct {
		in   string
		want []bootstrapEntry
	}{
		{"", nil},
		{"b1:9092", []bootstrapEntry{{text: "b1:9092", host: "b1", port: 9092}}},
		{" b1:9092 , b2:9093 ", []bootstrapEntry{{text: "b1:9092", host: "b1", port: 9092}, {text: "b2:9093", host: "b2", port: 9093}}},
		{"b1:9092,,b2:1", []bootstrapEntry{{text: "b1:9092", host: "b1", port: 9092}, {text: "b2:1", host: "b2", port: 1}}},
		{"SASL_SSL://b1:9092", []bootstrapEntry{{text: "SASL_SSL://b1:9092", host: "b1", port: 9092}}},
		{"[::1]:9092", []bootstrapEntry{{text: "[::1]:9092", host: "::1", port: 9092}}},
		{"b1", []bootstrapEntry{{text: "b1", bad: "Invalid url in bootstrap.servers: b1 (want host:port)"}}},
		{"b1:", []bootstrapEntry{{text: "b1:", bad: "Invalid url in bootstrap.servers: b1: (want host:port)"}}},
		{"b_1/x:9092", []bootstrapEntry{{text: "b_1/x:9092", bad: "Invalid url in bootstrap.servers: b_1/x:9092 (want host:port)"}}},
		{"b1:70000", []bootstrapEntry{{text: "b1:70000", host: "b1", port: 70000, bad: "Invalid port in bootstrap.servers: b1:70000 (ports are 1 to 65535)"}}},
		{"b1:99999999999", []bootstrapEntry{{text: "b1:99999999999", host: "b1", port: 99999999999, bad: "Invalid port in bootstrap.servers: b1:99999999999 (ports are 1 to 65535)"}}},
	}
	for _, tt := range tests {
		got := parseJavaBootstrap(tt.in)
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(bootstrapEntry{})); diff != "" {
			t.Errorf("parseJavaBootstrap(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestParseLibBootstrap(t *testing.T) {
	tests := []struct {
		in   string
		want []string // host:port or "bad"
	}{
		{"b1", []string{"b1:9092"}},
		{"b1:9093, b2", []string{"b1:9093", "b2:9092"}},
		{"ssl://b1:9094", []string{"b1:9094"}},
		{"[::1]:9093,[fe80::1%eth0]", []string{"::1:9093", "fe80::1%eth0:9092"}},
		{"[fe80::1]:9093", []string{"bad"}}, // no interface: connect() fails with EINVAL
		{"::1:9093", []string{"bad"}},
		{"b1:0", []string{"bad"}},
		{"b1:x", []string{"bad"}},
		{"b1:", []string{"bad"}},
		{"[::1", []string{"bad"}},
	}
	for _, tt := range tests {
		var got []string
		for _, be := range parseLibBootstrap(tt.in) {
			if be.bad != "" {
				got = append(got, "bad")
			} else {
				got = append(got, fmt.Sprintf("%s:%d", be.host, be.port))
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseLibBootstrap(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestSuggest(t *testing.T) {
	names := javaNames()
	tests := []struct{ in, want string }{
		{"connection.max.idle.ms", "connections.max.idle.ms"},
		{"linger.msec", "linger.ms"},
		{"Bootstrap.Servers", "bootstrap.servers"},
		{"bootstrap-servers", "bootstrap.servers"},
		{"request.timout.ms", "request.timeout.ms"},
		{"acsk", "acks"},
		{"foo.bar.baz", ""},
		{"linger", ""},
		{"batch.size", ""}, // itself
	}
	for _, tt := range tests {
		if got := suggest(tt.in, names); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if d := damerau("abcd", "acbd"); d != 1 {
		t.Errorf("damerau transposition = %d, want 1", d)
	}
	if d := damerau("", "abc"); d != 3 {
		t.Errorf("damerau empty = %d, want 3", d)
	}
}

// minSecretLen is the shortest secret value FuzzLintFile looks for in the
// findings: a shorter one turns up in ordinary text by chance.
const minSecretLen = 4

// FuzzLintFile lints arbitrary properties text in every dialect: it must not
// panic, findings must carry a rule and a position, and no value of a
// secret key (4 characters or more, found nowhere else in the file or the
// rules' text) may appear in a finding.
func FuzzLintFile(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "KD*", "*.properties"))
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err == nil {
			f.Add(string(b))
		}
	}
	f.Add("sasl.jaas.config=x required password=\"abcd1234\";\nssl.key.password=abcd1234\n")
	f.Fuzz(func(t *testing.T, src string) {
		for _, d := range []config.Dialect{config.Java, config.Librdkafka, config.Spring} {
			file, err := config.Parse("f.properties", []byte(src), d)
			if err != nil || file == nil {
				continue
			}
			// Text a finding may hold besides values: the file's keys,
			// its values that are not secret, comments, and the rules'
			// own words. A secret value that is also one of these may
			// turn up in a finding without having leaked.
			var other strings.Builder
			for _, e := range file.Entries {
				other.WriteString(e.Key + "\x00" + e.RawKey + "\x00")
				if !IsSecretKey(e.Key) && !IsSecretKey(e.RawKey) {
					other.WriteString(e.Value + "\x00")
				}
			}
			for _, c := range file.Comments {
				other.WriteString(c.Text + "\x00")
			}
			for _, p := range file.Problems {
				other.WriteString(p.Msg + "\x00")
			}
			for _, r := range All() {
				other.WriteString(r.Title + r.Rationale + r.Remediation + "\x00")
			}
			for _, fd := range LintFile(file, DefaultOptions()) {
				if fd.RuleID == "" || fd.Pos.Line < 1 {
					t.Fatalf("bad finding %+v", fd)
				}
				for _, e := range file.Entries {
					v := strings.TrimSpace(e.Value)
					if (IsSecretKey(e.Key) || IsSecretKey(e.RawKey)) && len(v) >= minSecretLen &&
						!strings.Contains(Redacted, v) && !strings.Contains(other.String(), v) &&
						strings.Contains(fd.Message+fd.Evidence+fd.Fix, v) {
						t.Fatalf("secret value %q of %s in finding %+v", v, e.Key, fd)
					}
				}
			}
		}
	})
}

// BenchmarkLintFile lints a typical producer file (go test -bench LintFile ./rules).
func BenchmarkLintFile(b *testing.B) {
	src := []byte(`bootstrap.servers=b1:9092,b2:9092,b3:9092
acks=all
linger.ms=20
batch.size=65536
compression.type=zstd
connections.max.idle.ms=300000
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="app" password="${env:KAFKA_PASSWORD}";
connection.max.idle.ms=1
`)
	f, err := config.Parse("producer.properties", src, config.Java)
	if err != nil {
		b.Fatal(err)
	}
	opts := DefaultOptions()
	b.ReportAllocs()
	for b.Loop() {
		LintFile(f, opts)
	}
}

// BenchmarkLintUnknownKeys lints 10,000 keys no client has, each one a KD404
// finding and a did-you-mean search over the catalog (go test -bench
// LintUnknownKeys ./rules).
func BenchmarkLintUnknownKeys(b *testing.B) {
	var src strings.Builder
	src.WriteString("bootstrap.servers=b1:9092,b2:9092\n")
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&src, "app.custom.setting.%d=value-%d\n", i, i)
	}
	f, err := config.Parse("producer.properties", []byte(src.String()), config.Java)
	if err != nil {
		b.Fatal(err)
	}
	opts := DefaultOptions()
	b.ReportAllocs()
	for b.Loop() {
		LintFile(f, opts)
	}
}
