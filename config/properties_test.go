package config

import (
	"errors"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func ent(key, value string, kl, kc, vl, vc int) Entry {
	return Entry{Key: key, RawKey: key, Value: value, KeyPos: posAt(kl, kc), ValuePos: posAt(vl, vc)}
}

func TestParseProperties(t *testing.T) {
	tests := []struct {
		name         string
		in           string
		want         []Entry
		wantComments []Comment
		wantProblems []string // "line:col: message prefix"
	}{
		{
			name: "separators and positions",
			in:   "a=1\nb : 2\n  c  3\nd\t=\t4\n",
			want: []Entry{ent("a", "1", 1, 1, 1, 3), ent("b", "2", 2, 1, 2, 5), ent("c", "3", 3, 3, 3, 6), ent("d", "4", 4, 1, 4, 5)},
		},
		{
			name: "only one separator is skipped",
			in:   "a==b\nc :=d\n",
			want: []Entry{ent("a", "=b", 1, 1, 1, 3), ent("c", "=d", 2, 1, 2, 4)},
		},
		{
			name: "empty values point past the line",
			in:   "a\nb=\nc :  \n",
			want: []Entry{ent("a", "", 1, 1, 1, 2), ent("b", "", 2, 1, 2, 3), ent("c", "", 3, 1, 3, 6)},
		},
		{
			name: "escapes in keys",
			in:   "a\\=b=c\nd\\ e f\n",
			want: []Entry{ent("a=b", "c", 1, 1, 1, 6), ent("d e", "f", 2, 1, 2, 6)},
		},
		{
			name: "escapes in values",
			in:   "k=\\t\\n\\r\\f\\x\\\\\\u0041\n",
			want: []Entry{ent("k", "\t\n\r\fx\\A", 1, 1, 1, 3)},
		},
		{
			name: "continuation drops leading blanks and points at the first line",
			in:   "list=a,\\\n     b,\\\n\t c\n",
			want: []Entry{ent("list", "a,b,c", 1, 1, 1, 6)},
		},
		{
			name: "value starting on a continuation line",
			in:   "key=\\\n    value\n",
			want: []Entry{ent("key", "value", 1, 1, 2, 5)},
		},
		{
			name: "even number of backslashes does not continue",
			in:   "a=x\\\\\nb=y\n",
			want: []Entry{ent("a", "x\\", 1, 1, 1, 3), ent("b", "y", 2, 1, 2, 3)},
		},
		{
			name: "a comment marker on a continuation line is text",
			in:   "a=x\\\n  # y\n",
			want: []Entry{ent("a", "x# y", 1, 1, 1, 3)},
		},
		{
			name:         "comments, with the marker and blanks removed",
			in:           "# kdiag:ignore KD101 reason\n  ! bang\nk=v # not a comment\n",
			want:         []Entry{ent("k", "v # not a comment", 3, 1, 3, 3)},
			wantComments: []Comment{{Text: "kdiag:ignore KD101 reason", Pos: Pos{1, 1}}, {Text: "bang", Pos: Pos{2, 3}}},
		},
		{
			name:         "a comment does not continue",
			in:           "# c \\\nk=v\n",
			want:         []Entry{ent("k", "v", 2, 1, 2, 3)},
			wantComments: []Comment{{Text: "c \\", Pos: Pos{1, 1}}},
		},
		{
			name: "CRLF and CR line ends",
			in:   "a=1\r\nb=2\\\r\n 3\rc=4",
			want: []Entry{ent("a", "1", 1, 1, 1, 3), ent("b", "23", 2, 1, 2, 3), ent("c", "4", 4, 1, 4, 3)},
		},
		{
			name: "columns count runes",
			in:   "é=ü\nkey=☕x\n",
			want: []Entry{ent("é", "ü", 1, 1, 1, 3), ent("key", "☕x", 2, 1, 2, 5)},
		},
		{
			name: "surrogate pair escapes make one character",
			in:   "e=\\uD83D\\uDE00\n",
			want: []Entry{ent("e", "😀", 1, 1, 1, 3)},
		},
		{
			name:         "lone surrogate",
			in:           "e=\\uD83Dx\n",
			want:         []Entry{ent("e", "\uFFFDx", 1, 1, 1, 3)},
			wantProblems: []string{"1:3: a \\u escape here is half of a UTF-16 surrogate pair"},
		},
		{
			name:         "malformed unicode escape is kept and reported",
			in:           "a=\\u12g4b\nc=d\n",
			want:         []Entry{ent("a", "\\u12g4b", 1, 1, 1, 3), ent("c", "d", 2, 1, 2, 3)},
			wantProblems: []string{"1:3: malformed \\uxxxx escape"},
		},
		{
			name:         "unicode escape cut by the end of file",
			in:           "a=\\u12",
			want:         []Entry{ent("a", "\\u12", 1, 1, 1, 3)},
			wantProblems: []string{"1:3: malformed \\uxxxx escape"},
		},
		{
			name:         "continuation at end of file",
			in:           "a=b\\",
			want:         []Entry{ent("a", "b", 1, 1, 1, 3)},
			wantProblems: []string{"1:4: line continuation (\\) at end of file"},
		},
		{
			// Properties.load(InputStream), which Kafka's Utils.loadProps
			// calls, reads ISO-8859-1: \xE9 is é, and no problem.
			name: "not UTF-8: read as ISO-8859-1, as Properties.load(InputStream)",
			in:   "client.id=caf\xe9\nb=\xff\xc3\xa9\n",
			want: []Entry{ent("client.id", "café", 1, 1, 1, 11), ent("b", "ÿÃ©", 2, 1, 2, 3)},
		},
		{
			name: "valid UTF-8 is read as UTF-8, columns in characters",
			in:   "client.id=café\nb=x\n",
			want: []Entry{ent("client.id", "café", 1, 1, 1, 11), ent("b", "x", 2, 1, 2, 3)},
		},
		{
			name:         "byte order mark stays in the key, as in Java",
			in:           "\uFEFFa=b\n",
			want:         []Entry{ent("\uFEFFa", "b", 1, 1, 1, 4)},
			wantProblems: []string{"1:1: file starts with a UTF-8 byte order mark"},
		},
		{
			name: "a line that is only a backslash joins the next as a new line",
			in:   "\\\nk=v\n",
			want: []Entry{ent("k", "v", 2, 1, 2, 3)},
		},
		{
			name: "duplicates are all kept, in order",
			in:   "a=1\na=2\n",
			want: []Entry{ent("a", "1", 1, 1, 1, 3), ent("a", "2", 2, 1, 2, 3)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseProperties("t.properties", strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, f.Entries); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantComments, f.Comments); diff != "" {
				t.Errorf("comments (-want +got):\n%s", diff)
			}
			var got []string
			for i, p := range f.Problems {
				prefix := ""
				if i < len(tc.wantProblems) {
					prefix = tc.wantProblems[i]
				}
				s := p.Pos.String() + ": " + p.Msg
				if prefix != "" && strings.HasPrefix(s, prefix) {
					s = prefix
				}
				got = append(got, s)
			}
			if diff := cmp.Diff(tc.wantProblems, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePropertiesReadError(t *testing.T) {
	boom := errors.New("disk on fire")
	_, err := ParseProperties("x.properties", iotest.ErrReader(boom))
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "x.properties") {
		t.Fatalf("got %v, want the read error wrapped with the file name", err)
	}
}

func TestEffectiveAndDuplicates(t *testing.T) {
	f := &File{Entries: []Entry{
		{Key: "acks", Value: "1", Rank: RankSpringProducer, KeyPos: Pos{1, 1}},
		{Key: "acks", Value: "all", Rank: RankSpringProperties, KeyPos: Pos{2, 1}},
		{Key: "linger.ms", Value: "5", KeyPos: Pos{3, 1}},
		{Key: "linger.ms", Value: "10", KeyPos: Pos{4, 1}},
		{Key: "linger.ms", Value: "20", Doc: 1, KeyPos: Pos{6, 1}},
		{Key: "retries", Value: "3", KeyPos: Pos{7, 1}},
	}}
	wantMap := map[string]string{"acks": "1", "linger.ms": "20", "retries": "3"}
	if diff := cmp.Diff(wantMap, f.Map()); diff != "" {
		t.Errorf("Map (-want +got):\n%s", diff)
	}
	wantDup := map[string][]Entry{"linger.ms": {f.Entries[2], f.Entries[3]}}
	if diff := cmp.Diff(wantDup, f.Duplicates()); diff != "" {
		t.Errorf("Duplicates (-want +got):\n%s", diff)
	}
	if e := f.Effective()["acks"]; e.KeyPos != (Pos{1, 1}) {
		t.Errorf("Effective acks at %v, want the higher-ranked entry at 1:1", e.KeyPos)
	}
}

func TestEscapeRoundTrip(t *testing.T) {
	for _, s := range []string{"", " lead", "a=b:c", "#x", "!y", "tab\tnl\ncr\rff\f", "back\\slash", "ü ☕ 😀", "\x00\x1f\x7f", "\uFEFFbom", "trail "} {
		in := EscapeKey(s) + "=" + EscapeValue(s) + "\n"
		f, err := ParseProperties("rt", strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{s, s}
		var got []string
		if len(f.Entries) == 1 {
			got = []string{f.Entries[0].Key, f.Entries[0].Value}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("round trip of %q through %q (-want +got):\n%s", s, in, diff)
		}
	}
}

func TestParseProducerLog(t *testing.T) {
	log := "2026-12-01 10:16:40.118  INFO 1 --- [main] o.a.k.c.p.ProducerConfig : ProducerConfig values: \r\n" +
		"\tacks = -1\r\n" +
		"\tbootstrap.servers = [b1:9092, b2:9092]\r\n" +
		"\tkey.serializer = class org.apache.kafka.common.serialization.StringSerializer\r\n" +
		"\tssl.key.password = [hidden]\r\n" +
		"\ttransactional.id = null\r\n" +
		"\tclient.id = café\r\n" +
		"\r\n" +
		"2026-12-01 10:16:40.201  INFO 1 --- [main] o.a.k.c.u.AppInfoParser : Kafka version: 3.9.0\r\n" +
		"[x] INFO ConsumerConfig values: \n\tgroup.id = g\n" +
		"[y] INFO ProducerConfig values: \n\tlinger.ms = 5\n"
	if !IsProducerLog(log) {
		t.Fatal("IsProducerLog = false")
	}
	files := ParseProducerLog("app.log", log)
	if len(files) != 2 {
		t.Fatalf("%d blocks, want 2", len(files))
	}
	want := []Entry{
		{Key: "acks", RawKey: "acks", Value: "-1", KeyPos: Pos{2, 2}, ValuePos: Pos{2, 9}},
		{Key: "bootstrap.servers", RawKey: "bootstrap.servers", Value: "b1:9092,b2:9092", RawValue: "[b1:9092, b2:9092]", KeyPos: Pos{3, 2}, ValuePos: Pos{3, 22}},
		{Key: "key.serializer", RawKey: "key.serializer", Value: "org.apache.kafka.common.serialization.StringSerializer",
			RawValue: "class org.apache.kafka.common.serialization.StringSerializer", KeyPos: Pos{4, 2}, ValuePos: Pos{4, 19}},
		{Key: "ssl.key.password", RawKey: "ssl.key.password", Value: "[hidden]", KeyPos: Pos{5, 2}, ValuePos: Pos{5, 21}},
		{Key: "client.id", RawKey: "client.id", Value: "café", KeyPos: Pos{7, 2}, ValuePos: Pos{7, 14}},
	}
	if diff := cmp.Diff(want, files[0].Entries); diff != "" {
		t.Errorf("first block (-want +got):\n%s", diff)
	}
	if f := files[0]; f.Source != SourceLog || f.Dialect != Java || f.Origin != (Pos{1, 71}) || f.KafkaVersion != "3.9.0" {
		t.Errorf("first block: source %q dialect %v origin %v version %q", f.Source, f.Dialect, f.Origin, f.KafkaVersion)
	}
	if f := files[1]; len(f.Entries) != 1 || f.Entries[0].Key != "linger.ms" || f.Origin != (Pos{12, 10}) || f.KafkaVersion != "" {
		t.Errorf("second block: %+v", f)
	}
	if IsProducerLog("a=b\n# ProducerConfig values: in a comment, not at a line's end\n") {
		t.Error("IsProducerLog took a comment for a block")
	}
}

func TestParseConnectorJSON(t *testing.T) {
	src := "{\n  \"name\": \"s3\",\n  \"config\": {\n    \"connector.class\": \"X\",\n    \"tasks.max\": 2,\n" +
		"    \"producer.override.linger.ms\":\"5\",\n    \"nested\": {\"producer.override.acks\": \"0\"},\n" +
		"    \"producer.override.client.id\": \"café\"\n  }\n}\n"
	f, err := ParseConnectorJSON("c.json", src)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Key: "linger.ms", RawKey: "producer.override.linger.ms", Value: "5", KeyPos: Pos{6, 5}, ValuePos: Pos{6, 35}, Rank: RankPrefixed},
		{Key: "client.id", RawKey: "producer.override.client.id", Value: "café", KeyPos: Pos{8, 5}, ValuePos: Pos{8, 36}, Rank: RankPrefixed},
	}
	if diff := cmp.Diff(want, f.Entries); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if f.Source != SourceConnector || !f.Partial {
		t.Errorf("source %q partial %v", f.Source, f.Partial)
	}
	// The config object alone (PUT /connectors/NAME/config).
	f, err = ParseConnectorJSON("c.json", `{"connector.class": "X", "producer.override.acks": "1"}`)
	if err != nil || len(f.Entries) != 1 || f.Entries[0].Key != "acks" || f.Entries[0].ValuePos != (Pos{1, 52}) {
		t.Errorf("flat config: %v %+v", err, f)
	}
	if _, err := ParseConnectorJSON("bad.json", "{\n  \"a\": \n}"); err == nil || !strings.Contains(err.Error(), "bad.json:3:") {
		t.Errorf("syntax error = %v, want one at bad.json:3", err)
	}
}

func TestComposeAndEnvFile(t *testing.T) {
	src := "services:\n  broker:\n    environment:\n      KAFKA_CONNECTIONS_MAX_IDLE_MS: 300000\n" +
		"  connect:\n    environment:\n      - CONNECT_PRODUCER_LINGER_MS=5\n      - \"CONNECT_PRODUCER_WITH__UNDER___DASH=x\"\n" +
		"      - CONNECT_BOOTSTRAP_SERVERS=b:9092\n"
	files, err := ParseCompose("docker-compose.yml", src)
	if err != nil || len(files) != 1 {
		t.Fatalf("ParseCompose: %v, %d files", err, len(files))
	}
	f := files[0]
	want := []Entry{
		{Key: "linger.ms", RawKey: "CONNECT_PRODUCER_LINGER_MS", Value: "5", KeyPos: Pos{7, 9}, ValuePos: Pos{7, 36}, Rank: RankPrefixed},
		{Key: "with_under-dash", RawKey: "CONNECT_PRODUCER_WITH__UNDER___DASH", Value: "x", KeyPos: Pos{8, 10}, ValuePos: Pos{8, 46}, Rank: RankPrefixed},
		{Key: "bootstrap.servers", RawKey: "CONNECT_BOOTSTRAP_SERVERS", Value: "b:9092", KeyPos: Pos{9, 9}, ValuePos: Pos{9, 35}},
	}
	if diff := cmp.Diff(want, f.Entries); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if f.BrokerIdleMS != 300000 || f.Origin != (Pos{5, 3}) || f.Source != SourceCompose {
		t.Errorf("broker idle %d, origin %v, source %q", f.BrokerIdleMS, f.Origin, f.Source)
	}
	env := ParseEnvFile("c.env", "# c\nexport A=1\nB = \"x\\ny\" \nC='q r'\nD=v # comment\nBAD\n")
	wantEnv := []Entry{
		{Key: "A", RawKey: "A", Value: "1", KeyPos: Pos{2, 8}, ValuePos: Pos{2, 10}},
		{Key: "B", RawKey: "B", Value: "x\ny", RawValue: "\"x\\ny\" ", KeyPos: Pos{3, 1}, ValuePos: Pos{3, 5}},
		{Key: "C", RawKey: "C", Value: "q r", RawValue: "'q r'", KeyPos: Pos{4, 1}, ValuePos: Pos{4, 3}},
		{Key: "D", RawKey: "D", Value: "v", RawValue: "v # comment", KeyPos: Pos{5, 1}, ValuePos: Pos{5, 3}},
	}
	if diff := cmp.Diff(wantEnv, env.Entries); diff != "" {
		t.Errorf("env entries (-want +got):\n%s", diff)
	}
	if len(env.Problems) != 1 || env.Problems[0].Pos != (Pos{6, 1}) {
		t.Errorf("env problems %+v", env.Problems)
	}
	if got, _, _ := ComposeExpand("${A:-d}/${B-e}/${C}/$$D", map[string]string{"C": "c"}); got != "d/e/c/$D" {
		t.Errorf("ComposeExpand = %q", got)
	}
}

func TestParseEmbedded(t *testing.T) {
	src := "kind: ConfigMap\ndata:\n  producer.properties: |\n    a=1\n\n      b = 2\n  other.txt: |\n    c=3\n" +
		"---\nkind: ConfigMap\ndata:\n  q.properties: \"d=4\\n\"\n"
	files, err := ParseEmbedded("cm.yaml", src, SourceConfigMap)
	if err != nil || len(files) != 2 {
		t.Fatalf("ParseEmbedded: %v, %d files", err, len(files))
	}
	want := []Entry{
		{Key: "a", RawKey: "a", Value: "1", KeyPos: Pos{4, 5}, ValuePos: Pos{4, 7}},
		{Key: "b", RawKey: "b", Value: "2", KeyPos: Pos{6, 7}, ValuePos: Pos{6, 11}},
	}
	if diff := cmp.Diff(want, files[0].Entries); diff != "" {
		t.Errorf("literal block (-want +got):\n%s", diff)
	}
	if files[0].Origin != (Pos{3, 3}) || files[0].Path != "cm.yaml" || files[0].Source != SourceConfigMap {
		t.Errorf("origin %v path %q source %q", files[0].Origin, files[0].Path, files[0].Source)
	}
	// A quoted value: positions at its start, and a note that says so.
	q := files[1]
	if len(q.Entries) != 1 || q.Entries[0].KeyPos != (Pos{12, 17}) || len(q.Problems) != 1 || !q.Problems[0].Note {
		t.Errorf("quoted block: %+v", q)
	}
}

// TestBinaryInputRefused: an executable copied to x.properties is refused as
// a whole (issue 30: a kdiag binary gave 238,229 findings), and so is UTF-16
// text, said as such; text with bytes that are not UTF-8 (ISO-8859-1) is
// still read.
func TestBinaryInputRefused(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // "" for no error
	}{
		{"ELF", "\x7fELF\x02\x01\x01\x00\x00\x00linger.ms=5\n", "binary file, not a configuration (a NUL byte at offset 7)"},
		{"UTF-16LE", "\xff\xfel\x00i\x00n\x00", "UTF-16 text"},
		{"ISO-8859-1 text", "client.id=caf\xe9\n", ""},
		{"NUL past the window", "a=1\n" + strings.Repeat("#", binaryWindow) + "\x00", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, err := ParseAll("x.properties", tt.in, Unknown)
			if tt.want == "" {
				if err != nil || len(fs) != 1 {
					t.Fatalf("ParseAll: %d files, %v", len(fs), err)
				}
				return
			}
			var be *BinaryError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseAll error %v, want a *BinaryError saying %q", err, tt.want)
			}
		})
	}
}

// TestDetectScalaProducer: apache/kafka's config/producer.properties of
// 0.8.2.2, written for the Scala producer, is a Java client's file (the
// Java producer is what reads it since 2.0), not librdkafka's, though
// librdkafka has its metadata.broker.list and compression.codec (issue 30).
func TestDetectScalaProducer(t *testing.T) {
	data, err := os.ReadFile("testdata/kafka-0.8.2.2-producer.properties")
	if err != nil {
		t.Fatal(err)
	}
	if d := Detect("producer.properties", data); d != Java {
		t.Errorf("Detect = %v, want java", d)
	}
	if d := Detect("p.properties", []byte("metadata.broker.list=a:9092\ncompression.codec=none\n")); d != Librdkafka {
		t.Errorf("without a Scala-only key: Detect = %v, want librdkafka", d)
	}
}
