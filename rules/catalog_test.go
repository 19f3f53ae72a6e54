package rules

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kdiag/kdiag/config"
)

// referenceDir is ../shared/reference seen from the module root, where the
// catalog's tables come from.
var referenceDir = filepath.Join("..", "..", "shared", "reference")

// TestEmbeddedCatalogMatchesReference fails when data/ and the reference
// tables drift apart: copy the reference again (cp ../../shared/reference/*.tsv
// data/) and review the rules that rest on the changed rows.
func TestEmbeddedCatalogMatchesReference(t *testing.T) {
	if _, err := os.Stat(referenceDir); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s not present: nothing to compare the embedded catalog with", referenceDir)
	}
	entries, err := dataFS.ReadDir("data")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 4 {
		t.Fatalf("data/ has %d files, want the three tables and SOURCES.md", len(entries))
	}
	for _, e := range entries {
		embedded, err := dataFS.ReadFile("data/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		ref, err := os.ReadFile(filepath.Join(referenceDir, e.Name()))
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
			continue
		}
		if !bytes.Equal(embedded, ref) {
			t.Errorf("data/%s differs from %s: copy it again and review the rules resting on it", e.Name(), filepath.Join(referenceDir, e.Name()))
		}
	}
	// And every reference table is embedded.
	refs, _ := filepath.Glob(filepath.Join(referenceDir, "*.tsv"))
	for _, r := range refs {
		if _, err := dataFS.ReadFile("data/" + filepath.Base(r)); err != nil {
			t.Errorf("%s is not embedded in data/", filepath.Base(r))
		}
	}
}

// settingView is the part of a Setting the table test compares.
type settingView struct {
	Type              string
	Def39, Def41      string
	HasDef39, HasDef4 bool
	HasMin, HasMax    bool
	Min, Max          float64
	Extra, Enum       []string
	EnumFold          bool
	NonEmpty          bool
	Password          bool
	AddedIn           string
	RemovedIn         string
	In39, In40, In41  bool
}

func viewOf(s Setting) settingView {
	v39, _ := ParseVersion("3.9")
	v40, _ := ParseVersion("4.0")
	v41, _ := ParseVersion("4.1")
	d39, ok39 := s.Default(v39)
	d41, ok41 := s.Default(v41)
	return settingView{Type: s.Type, Def39: d39, Def41: d41, HasDef39: ok39, HasDef4: ok41,
		HasMin: s.HasMin, HasMax: s.HasMax, Min: s.Min, Max: s.Max, Extra: s.Extra, Enum: s.Enum,
		EnumFold: s.EnumFold, NonEmpty: s.NonEmpty, Password: s.Password, AddedIn: s.AddedIn,
		RemovedIn: s.RemovedIn, In39: s.AvailableIn(v39), In40: s.AvailableIn(v40), In41: s.AvailableIn(v41)}
}

// TestJavaSetting checks the rows the rules rest on, as parsed.
func TestJavaSetting(t *testing.T) {
	tests := []struct {
		name string
		want settingView
	}{
		{"connections.max.idle.ms", settingView{Type: "LONG", Def39: "540000", Def41: "540000", HasDef39: true, HasDef4: true, In39: true, In40: true, In41: true}},
		{"linger.ms", settingView{Type: "LONG", Def39: "0", Def41: "5", HasDef39: true, HasDef4: true, HasMin: true, In39: true, In40: true, In41: true}},
		{"retries", settingView{Type: "INT", Def39: "2147483647", Def41: "2147483647", HasDef39: true, HasDef4: true, HasMin: true, HasMax: true, Max: 2147483647, In39: true, In40: true, In41: true}},
		{"compression.gzip.level", settingView{Type: "INT", Def39: "-1", Def41: "-1", HasDef39: true, HasDef4: true, HasMin: true, HasMax: true, Min: 1, Max: 9, Extra: []string{"-1"}, In39: true, In40: true, In41: true}},
		{"metadata.max.idle.ms", settingView{Type: "LONG", Def39: "300000", Def41: "300000", HasDef39: true, HasDef4: true, HasMin: true, Min: 5000, In39: true, In40: true, In41: true}},
		{"security.protocol", settingView{Type: "STRING", Def39: "PLAINTEXT", Def41: "PLAINTEXT", HasDef39: true, HasDef4: true, Enum: []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}, EnumFold: true, In39: true, In40: true, In41: true}},
		{"acks", settingView{Type: "STRING", Def39: "all", Def41: "all", HasDef39: true, HasDef4: true, Enum: []string{"all", "-1", "0", "1"}, In39: true, In40: true, In41: true}},
		{"transactional.id", settingView{Type: "STRING", NonEmpty: true, In39: true, In40: true, In41: true}},
		{"bootstrap.servers", settingView{Type: "LIST", HasDef39: true, In39: true, In40: true, In41: true}},
		{"ssl.key.password", settingView{Type: "PASSWORD", Password: true, In39: true, In40: true, In41: true}},
		{"auto.include.jmx.reporter", settingView{Type: "BOOLEAN", Def39: "true", HasDef39: true, RemovedIn: "4.0", In39: true}},
		{"metadata.recovery.rebootstrap.trigger.ms", settingView{Type: "LONG", Def41: "300000", HasDef4: true, HasMin: true, AddedIn: "4.0", In40: true, In41: true}},
		{"sasl.oauthbearer.scope", settingView{Type: "STRING", AddedIn: "4.1", In41: true}},
		{"enable.idempotence", settingView{Type: "BOOLEAN", Def39: "true", Def41: "true", HasDef39: true, HasDef4: true, In39: true, In40: true, In41: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := JavaSetting(tt.name)
			if !ok {
				t.Fatalf("JavaSetting(%q) not found", tt.name)
			}
			if diff := cmp.Diff(tt.want, viewOf(s)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, ok := JavaSetting("connection.max.idle.ms"); ok {
		t.Error("JavaSetting found a misspelt key")
	}
}

// TestJavaCatalogConsistent checks every row as ConfigDef would: each
// validator the table writes is understood, and each default passes its
// own type and validator (ConfigDef.ConfigKey validates defaults too).
func TestJavaCatalogConsistent(t *testing.T) {
	all := JavaSettings()
	if len(all) < 100 {
		t.Fatalf("%d Java settings, want the whole table", len(all))
	}
	types := map[string]bool{"INT": true, "LONG": true, "SHORT": true, "DOUBLE": true, "BOOLEAN": true,
		"STRING": true, "LIST": true, "CLASS": true, "PASSWORD": true}
	for i, s := range all {
		if i > 0 && all[i-1].Name >= s.Name {
			t.Errorf("JavaSettings not sorted at %s", s.Name)
		}
		if !types[s.Type] {
			t.Errorf("%s: unknown type %q", s.Name, s.Type)
		}
		v := s.Validator
		parsed := s.HasMin || s.HasMax || len(s.Enum) > 0 || s.NonEmpty
		if (strings.HasPrefix(v, "atLeast") || strings.HasPrefix(v, "between") || strings.Contains(v, "in(") ||
			strings.HasPrefix(v, "[")) && !parsed {
			t.Errorf("%s: validator %q not understood", s.Name, v)
		}
		for _, ver := range []string{"3.9", "4.1"} {
			vv, _ := ParseVersion(ver)
			d, ok := s.Default(vv)
			if !ok || !s.AvailableIn(vv) {
				continue
			}
			e := config.Entry{Key: s.Name, RawKey: s.Name, Value: d}
			if vp := checkJavaValue(e, s, false, vv); vp != nil && !(s.NonEmpty && d == "") {
				t.Errorf("%s: %s default %q fails its own checks: %s %s", s.Name, ver, d, vp.Rule, vp.Msg)
			}
		}
	}
}

func TestLibrdkafkaCatalogConsistent(t *testing.T) {
	all := LibrdkafkaSettings()
	if len(all) < 70 {
		t.Fatalf("%d librdkafka settings, want the whole table", len(all))
	}
	for _, s := range all {
		if s.Default == "" {
			continue
		}
		e := config.Entry{Key: s.Name, RawKey: s.Name, Value: s.Default}
		for _, vp := range checkLibValue(e, s) {
			t.Errorf("%s: default %q fails its own range: %s", s.Name, s.Default, vp.Msg)
		}
	}
	tests := []struct {
		name      string
		aliasOf   string
		sensitive bool
		enum      []string
	}{
		{"bootstrap.servers", "metadata.broker.list", false, nil},
		{"linger.ms", "queue.buffering.max.ms", false, nil},
		{"sasl.password", "", true, nil},
		{"connections.max.idle.ms", "", false, nil},
		{"security.protocol", "", false, []string{"plaintext", "ssl", "sasl_plaintext", "sasl_ssl"}},
		{"compression.codec", "", false, []string{"none", "gzip", "snappy", "lz4", "zstd", "inherit"}},
	}
	for _, tt := range tests {
		s, ok := LibrdkafkaSetting(tt.name)
		if !ok {
			t.Errorf("LibrdkafkaSetting(%q) not found", tt.name)
			continue
		}
		got := struct {
			AliasOf   string
			Sensitive bool
			Enum      []string
		}{s.AliasOf, s.Sensitive, s.Enum}
		want := struct {
			AliasOf   string
			Sensitive bool
			Enum      []string
		}{tt.aliasOf, tt.sensitive, tt.enum}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	c, ok := LibrdkafkaSetting("connections.max.idle.ms")
	if !ok || c.Default != "0" || !c.HasMin || c.Min != 0 || c.Max != 2147483647 {
		t.Errorf("connections.max.idle.ms = %+v, want 0 .. 2147483647, default 0", c)
	}
}

func TestKeyClasses(t *testing.T) {
	tests := []struct {
		key              string
		consumer, broker bool
	}{
		{"group.id", true, false},
		{"fetch.max.wait.ms", true, false},
		{"max.poll.records", true, false},
		{"isolation.level", true, false},
		{"value.deserializer", true, false},
		{"log.retention.hours", false, true},
		{"num.partitions", false, true},
		{"zookeeper.connect", false, true},
		{"advertised.listeners", false, true},
		{"linger.ms", false, false},
		{"connections.max.idle.ms", false, false},
	}
	for _, tt := range tests {
		if got := IsConsumerOnlyKey(tt.key); got != tt.consumer {
			t.Errorf("IsConsumerOnlyKey(%q) = %v, want %v", tt.key, got, tt.consumer)
		}
		if got := IsBrokerOnlyKey(tt.key); got != tt.broker {
			t.Errorf("IsBrokerOnlyKey(%q) = %v, want %v", tt.key, got, tt.broker)
		}
	}
	// No consumer-only or broker-only key is a producer config.
	for _, s := range JavaSettings() {
		if IsConsumerOnlyKey(s.Name) || IsBrokerOnlyKey(s.Name) {
			t.Errorf("%s is a producer config but classed as consumer or broker only", s.Name)
		}
	}
}

func TestIsSecretKeyAndRedact(t *testing.T) {
	tests := []struct {
		key, value string
		secret     bool
		want       string
	}{
		{"ssl.key.password", "hunter2", true, "******"},
		{"ssl.keystore.password", "x", true, "******"},
		{"ssl.truststore.password", "changeit", true, "******"},
		{"sasl.password", "pw", true, "******"},
		{"sasl.username", "alice", true, "******"}, // librdkafka redacts it
		{"ssl.key.pem", "-----BEGIN", true, "******"},
		{"spring.kafka.ssl.key-password", "pw", true, "******"},
		{"basic.auth.user.info", "u:p", true, "******"},
		{"ssl.key.password", "", true, ""},
		{"linger.ms", "5", false, "5"},
		{"bootstrap.servers", "b1:9092", false, "b1:9092"},
		{"sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cr3t";`, true,
			`org.apache.kafka.common.security.plain.PlainLoginModule required username="******" password="******";`},
		{"sasl.jaas.config", `org.apache.kafka.common.security.scram.ScramLoginModule required username=alice password=s3cr3t;`, true,
			`org.apache.kafka.common.security.scram.ScramLoginModule required username="******" password="******";`},
		{"sasl.jaas.config", `x required password="a \"quoted\" pw";`, true, `x required password="******";`},
	}
	for _, tt := range tests {
		if got := IsSecretKey(tt.key); got != tt.secret {
			t.Errorf("IsSecretKey(%q) = %v, want %v", tt.key, got, tt.secret)
		}
		if got := Redact(tt.key, tt.value); got != tt.want {
			t.Errorf("Redact(%q, %q) = %q, want %q", tt.key, tt.value, got, tt.want)
		}
	}
	// Every PASSWORD-type Java config is secret.
	for _, s := range JavaSettings() {
		if s.Password && !IsSecretKey(s.Name) {
			t.Errorf("%s is PASSWORD-typed but not secret", s.Name)
		}
	}
}

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in      string
		want    Version
		wantErr bool
	}{
		{"3.9", Version{3, 9}, false},
		{"3.9.1", Version{3, 9}, false},
		{"4.0", Version{4, 0}, false},
		{"4", Version{4, 0}, false},
		{"4.1", Version{4, 1}, false},
		{"4.x", Version{4, 1}, false},
		{"", Version{4, 1}, false},
		{"v3.9", Version{3, 9}, false},
		// Releases the catalog does not describe are refused, not checked
		// as another release.
		{"3.8", Version{}, true},
		{"3.7.1", Version{}, true},
		{"4.2", Version{}, true},
		{"1.1", Version{}, true},
		{"2.9", Version{}, true},
		// 2.0 to 2.8, from each release's source (issue 27).
		{"2.1", Version{2, 1}, false},
		{"2.1.1", Version{2, 1}, false},
		{"2.8", Version{2, 8}, false},
		{"2.0", Version{2, 0}, false},
		{"3.x", Version{}, true},
		{"four", Version{}, true},
		{"4.one", Version{}, true},
	}
	for _, tt := range tests {
		got, err := ParseVersion(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseVersion(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseVersion(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if err := (Options{KafkaVersion: "1.1"}).Validate(); err == nil {
		t.Error("Options{1.1}.Validate() = nil")
	}
	if _, err := ParseVersion("3.8"); err == nil || !strings.Contains(err.Error(), "2.0 to 2.8, 3.9, 4.0 and 4.1") {
		t.Errorf("ParseVersion(3.8) error %v, want the list of versions", err)
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Errorf("DefaultOptions().Validate() = %v", err)
	}
	if d := DefaultOptions(); d.KafkaVersion != "4.1" || d.BrokerIdleMS != 600000 {
		t.Errorf("DefaultOptions() = %+v", d)
	}
}

func TestBrokerIdleFromFile(t *testing.T) {
	tests := []struct {
		name, in string
		want     int64
		wantSet  bool
		wantErr  bool
	}{
		{"default", "broker.id=1\nlisteners=PLAINTEXT://:9092\n", 600000, false, false},
		{"set", "broker.id=1\nconnections.max.idle.ms = 300000\n", 300000, true, false},
		{"last wins", "connections.max.idle.ms=300000\nconnections.max.idle.ms=120000\n", 120000, true, false},
		{"negative", "connections.max.idle.ms=-1\n", -1, true, false},
		{"not a number", "connections.max.idle.ms=10m\n", 0, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, set, err := BrokerIdleFromFile("server.properties", strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				if !errors.Is(err, ErrNoBrokerIdle) || !strings.Contains(err.Error(), "server.properties:1") {
					t.Errorf("error %q does not say where, or is not ErrNoBrokerIdle", err)
				}
				return
			}
			if got != tt.want || set != tt.wantSet {
				t.Errorf("got %d (set %v), want %d (set %v)", got, set, tt.want, tt.wantSet)
			}
		})
	}
}

// TestCheckJavaValue: CheckJavaValue rejects what the value rules (and
// KD308) report, with the finding's rule and message, and accepts what they
// accept.
func TestCheckJavaValue(t *testing.T) {
	tests := []struct {
		key, value string
		wantRule   string // "" means valid
	}{
		{"linger.ms", "5s", "KD401"},
		{"batch.size", "3000000000", "KD401"},
		{"enable.idempotence", "yes", "KD401"},
		{"linger.ms", "-1", "KD402"},
		{"max.in.flight.requests.per.connection", "0", "KD402"},
		{"retries", "-3", "KD402"},
		{"compression.type", "GZIP", "KD403"},
		{"security.protocol", "TLS", "KD403"},
		{"acks", "2", "KD308"},
		{"acks", "ALL", "KD308"},
		{"linger.ms", " 20 ", ""},
		{"connections.max.idle.ms", "-1", ""},
		{"security.protocol", "plaintext", ""},
		{"acks", "all", ""},
		{"no.such.key", "x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			err := CheckJavaValue(tt.key, tt.value)
			f := parse(t, "p.properties", tt.key+"="+tt.value+"\n", config.Java)
			var lint []Finding
			for _, x := range LintFile(f, DefaultOptions()) {
				if x.Key == tt.key && (strings.HasPrefix(x.RuleID, "KD40") && x.RuleID != "KD404" || x.RuleID == "KD308") {
					lint = append(lint, x)
				}
			}
			if tt.wantRule == "" {
				if err != nil || len(lint) != 0 {
					t.Fatalf("CheckJavaValue = %v, lint %v; want both to accept", err, lint)
				}
				return
			}
			var ve *ValueError
			if !errors.As(err, &ve) {
				t.Fatalf("CheckJavaValue = %v, want a *ValueError", err)
			}
			if len(lint) != 1 {
				t.Fatalf("lint findings %v, want one %s", lint, tt.wantRule)
			}
			want := &ValueError{Rule: lint[0].RuleID, Msg: lint[0].Message}
			if diff := cmp.Diff(want, ve); diff != "" || ve.Rule != tt.wantRule {
				t.Errorf("CheckJavaValue vs lint (-want +got):\n%s (want rule %s)", diff, tt.wantRule)
			}
		})
	}
}
