package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// addFixtureSeeds adds every fixture matching the patterns to f's corpus.
func addFixtureSeeds(f *testing.F, patterns ...string) {
	for _, pat := range patterns {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// lineLengths returns the length of each line in characters as
// ParseProperties counts lines (\n, \r and \r\n end a line) and characters
// (runes, or bytes in a file that is not UTF-8, read as ISO-8859-1).
func lineLengths(data []byte) []int {
	var out []int
	n := 0
	latin1 := !utf8.Valid(data)
	for i := 0; i < len(data); {
		c, size := utf8.DecodeRune(data[i:])
		if latin1 {
			c, size = rune(data[i]), 1
		}
		i += size
		switch {
		case c == '\n':
			out, n = append(out, n), 0
		case c == '\r':
			if i < len(data) && data[i] == '\n' {
				// \r\n: the \r takes a column, the \n ends the line.
				n++
				continue
			}
			out, n = append(out, n), 0
		default:
			n++
		}
	}
	return append(out, n)
}

// checkPos fails unless p is on a line of the input, at a column no
// further than just past its last character.
func checkPos(t *testing.T, what string, p Pos, lines []int) {
	t.Helper()
	if p.Line < 1 || int(p.Line) > len(lines) || p.Col < 1 || int(p.Col) > lines[p.Line-1]+1 {
		t.Fatalf("%s position %v outside the input (%d lines)", what, p, len(lines))
	}
}

// FuzzParseProperties: no panic; every position inside the input; and
// writing the entries back with EscapeKey/EscapeValue reads back as the
// same keys and values.
func FuzzParseProperties(f *testing.F) {
	for _, tc := range trickyProperties {
		f.Add([]byte(tc.in))
	}
	addFixtureSeeds(f, "testdata/*.properties", "testdata/*.conf", "testdata/broken/*.properties")
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseProperties("fuzz", strings.NewReader(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		_ = Detect("fuzz", data)
		lines := lineLengths(data)
		for _, e := range file.Entries {
			checkPos(t, "key", e.KeyPos, lines)
			checkPos(t, "value", e.ValuePos, lines)
			if e.ValuePos.Line < e.KeyPos.Line || (e.ValuePos.Line == e.KeyPos.Line && e.ValuePos.Col < e.KeyPos.Col) {
				t.Fatalf("value at %v before its key at %v", e.ValuePos, e.KeyPos)
			}
		}
		for _, c := range file.Comments {
			checkPos(t, "comment", c.Pos, lines)
		}
		for _, p := range file.Problems {
			checkPos(t, "problem", p.Pos, lines)
		}
		var b strings.Builder
		for _, e := range file.Entries {
			b.WriteString(EscapeKey(e.Key) + "=" + EscapeValue(e.Value) + "\n")
		}
		again, err := ParseProperties("again", strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Entries) != len(file.Entries) {
			t.Fatalf("round trip: %d entries, then %d from %q", len(file.Entries), len(again.Entries), b.String())
		}
		for i, e := range file.Entries {
			a := again.Entries[i]
			if a.Key != e.Key || a.Value != e.Value {
				t.Fatalf("round trip of entry %d: %q=%q became %q=%q (written %q)", i, e.Key, e.Value, a.Key, a.Value, b.String())
			}
		}
		if len(again.Problems) != 0 {
			t.Fatalf("escaped output has problems: %v (written %q)", again.Problems, b.String())
		}
	})
}

// FuzzParseSpringYAML: no panic, whatever the YAML; positions are 1-based.
func FuzzParseSpringYAML(f *testing.F) {
	addFixtureSeeds(f, "testdata/*.yml", "testdata/broken/*.yml")
	f.Add([]byte("a: &a [x, x]\nb: &b [*a, *a]\nspring.kafka.properties.c: [*b, *b]\n"))
	f.Add([]byte("spring:\n  kafka:\n    producer:\n      <<: *missing\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseSpringYAML("fuzz.yml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yml:") {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		for _, e := range file.Entries {
			if e.KeyPos.Line < 1 || e.KeyPos.Col < 1 || e.ValuePos.Line < 1 || e.ValuePos.Col < 1 {
				t.Fatalf("entry %+v has a position below 1:1", e)
			}
		}
	})
}

// FuzzParseSpringProperties: no panic; every entry's positions inside the
// input (the Spring mapping keeps the properties parser's positions).
func FuzzParseSpringProperties(f *testing.F) {
	addFixtureSeeds(f, "testdata/application*.properties")
	f.Add([]byte("spring.kafka.bootstrap-servers[1]=b\nspring.kafka.bootstrap-servers[0]=a\nspring.kafka.properties[x.y]=1\n"))
	f.Add([]byte("spring.kafka.producer.batch-size=99999999999TB\nspring.kafka.producer.properties.=x\nspring.kafka.[a]=b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseSpringProperties("application.properties", strings.NewReader(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		lines := lineLengths(data)
		for _, e := range file.Entries {
			checkPos(t, "key", e.KeyPos, lines)
			checkPos(t, "value", e.ValuePos, lines)
			if e.Key == "" {
				t.Fatalf("entry without a key: %+v", e)
			}
		}
	})
}

// FuzzParseAll feeds every kind of input ParseAll reads (an application
// log, a connector's JSON, a compose file, an env file, a ConfigMap, a Helm
// values file, a Streams or Connect properties file) one text: no panic,
// and every position on a line of the input.
func FuzzParseAll(f *testing.F) {
	names := []string{"app.log", "connector.json", "docker-compose.yml", "connect.env", "cm.yaml", "values.yaml", "streams.properties"}
	seeds := []string{
		"x INFO ProducerConfig values: \n\tacks = -1\n\tbootstrap.servers = [a:1, b:2]\n\nKafka version: 3.9.0\n",
		`{"name":"c","config":{"connector.class":"X","producer.override.linger.ms":"5"}}`,
		"services:\n  c:\n    environment:\n      - CONNECT_PRODUCER_LINGER_MS=5\n      CONNECT_X: 1\n",
		"export CONNECT_PRODUCER_ACKS='1'\nCONNECT_BOOTSTRAP_SERVERS=\"a:1\"\n",
		"kind: ConfigMap\ndata:\n  p.properties: |\n    a=1\n    b\\\n      =2\n",
		"k:\n  c: |\n    bootstrap.servers=a:1\n",
		"application.id=x\nproducer.linger.ms=5\n",
	}
	for i, s := range seeds {
		f.Add(uint8(i), s)
	}
	f.Fuzz(func(t *testing.T, which uint8, data string) {
		name := names[int(which)%len(names)]
		files, err := ParseAll(name, data, Unknown)
		if err != nil {
			return
		}
		lines := lineLengths([]byte(data))
		for _, file := range files {
			for _, e := range file.Entries {
				if e.KeyPos.Line < 1 || int(e.KeyPos.Line) > len(lines) || e.ValuePos.Line < 1 || int(e.ValuePos.Line) > len(lines) {
					t.Fatalf("%s: entry %+v outside the input's %d lines", name, e, len(lines))
				}
			}
		}
	})
}

// FuzzProfileCondition feeds spring.config.activate.on-profile values to
// Spring's profile expression parser: no panic, a condition that parses
// names only profiles written in it, and one without ! or a comma list
// matches when every profile it names is active.
func FuzzProfileCondition(f *testing.F) {
	for _, s := range []string{"prod", "prod & eu", "!dev", "(a & b) | c", "a,b", "a & b | c", "((", "!", "a,,b"} {
		f.Add(s, "prod,eu")
	}
	f.Fuzz(func(t *testing.T, expr, active string) {
		c, err := parseProfileCondition(expr)
		if err != nil {
			return
		}
		for _, n := range c.names() {
			if !strings.Contains(expr, n) {
				t.Fatalf("%q: name %q is not in the expression", expr, n)
			}
		}
		c.match(SplitProfiles(active))
		if !strings.Contains(expr, "!") && len(c.names()) > 0 && !c.match(c.names()) {
			// & and | alone are monotone: all of their names active
			// satisfies them.
			t.Fatalf("%q: not met with all of its profiles %q active", expr, c.names())
		}
	})
}
