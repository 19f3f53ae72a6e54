package config

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// trickyProperties are inputs that exercise the corners of
// Properties.load; the differential tests run them, the fixtures and the
// fuzz corpus through this parser and the references.
var trickyProperties = []struct{ name, in string }{
	{"separators", "a=1\nb:2\nc 3\nd\t4\ne\f5\nf = 6\ng : 7\nh   =   8\ni = = 9\nj :=10\nk=:11\nl  :  : 12\n"},
	{"no value", "a\nb=\nc:\nd \ne   \n"},
	{"empty key", "=v\n:w\n = x\n"},
	{"escaped separators in key", "a\\=b=c\nd\\:e:f\ng\\ h i\nj\\\\=k\n"},
	{"escapes", "t=a\\tb\\nc\\rd\\fe\nx=\\x\\y\\z\\\"\\'\nb=\\b\\a\\0\n"},
	{"unicode", "u=\\u0041\\u00e9\\u20AC\nk\\u0020k=v\nutf8=héllo wörld ✓\nraw=😀\n"},
	{"surrogate pair", "emoji=\\uD83D\\uDE00\n"},
	{"lone surrogate", "a=\\uD800x\nb=\\uDC00\nc=\\uDE00\\uD83D\n"},
	{"malformed unicode", "a=\\u12\n"},
	{"malformed unicode hex", "a=\\uzzzz\nb=ok\n"},
	{"unicode at eof", "a=\\u12"},
	{"continuation", "a=one\\\n   two\\\n\tthree\nb=x\n"},
	{"even backslashes", "a=x\\\\\nb=y\\\\\\\nc=z\n"},
	{"continuation blank line", "a=x\\\n\nb=y\n"},
	{"continuation onto comment marker", "a=x\\\n# not a comment\nb=y\n"},
	{"continuation of key", "ke\\\n  y=v\n"},
	{"continuation before separator", "key\\\n  =v\n"},
	{"backslash only line", "\\\n#c\nk=v\n"},
	{"backslash only line then key", "\\\nk=v\n"},
	{"backslash at eof", "a=b\\"},
	{"backslash newline at eof", "a=b\\\n"},
	{"lone backslash at eof", "\\"},
	{"lone backslash newline at eof", "\\\n"},
	{"comments", "# one\n! two\n  # three\n\t! four\na=b # not a comment\nc=d ! neither\n#\n!\n"},
	{"comment continuation ignored", "# comment \\\na=b\n"},
	{"crlf", "a=1\r\nb=2\\\r\n  3\r\nc=4\r\n"},
	{"cr only", "a=1\rb=2\\\r  3\rc=4\r"},
	{"mixed line ends", "a=1\n\rb=2\r\n\nc=3"},
	{"blank lines", "\n\n   \n\t\n\f\na=b\n\n"},
	{"leading whitespace", "   a=b\n\t\tc=d\n\f e=f\n"},
	{"trailing whitespace kept", "a=b   \nc=d\t\n"},
	{"duplicate keys", "a=1\nb=2\na=3\n"},
	{"expansion syntax untouched", "a=${b}\nb=${a}\nc=${undefined}\n"},
	{"no trailing newline", "a=b"},
	{"only comment", "# x"},
	{"empty", ""},
	{"key with colon and equals", "url=http://host:8080/a=b\n"},
	{"escaped newline value", "a=line1\\nline2\n"},
	{"tab separated", "a\tb\tc\n"},
	{"backslash space value", "a=\\ leading\n"},
	{"jaas", "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n    username=\"u\" \\\n    password=\"p\";\n"},
	{"nul and control", "a=x\x00y\nb=\x01\x7f\n"},
	{"invalid utf8", "a=\xff\xfe\nb=ok\xc3\n"},
	{"truncated utf8 sequence", "a=\xe2\x82\nb=c\n"},
	{"bom", "\ufeffa=b\n"},
	{"form feed key end", "a\fb\n"},
	{"separator after escaped blank", "a\\ =b\n"},
	{"many backslashes", "a=\\\\\\\\\\\\\n"},
	{"unicode escape of separator", "a\\u003db=c\n"},
	{"unicode escape of backslash", "a=\\u005cn\n"},
}

// corpusInputs returns every input the differential tests use: the tricky
// cases, the .properties fixtures and the fuzz seed corpus.
func corpusInputs(t *testing.T) []struct{ name, in string } {
	t.Helper()
	out := append([]struct{ name, in string }(nil), trickyProperties...)
	files, _ := filepath.Glob("testdata/*.properties")
	more, _ := filepath.Glob("testdata/*.conf")
	broken, _ := filepath.Glob("testdata/broken/*.properties")
	files = append(append(files, more...), broken...)
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, struct{ name, in string }{p, string(b)})
	}
	fuzz, _ := filepath.Glob("testdata/fuzz/FuzzParseProperties/*")
	sort.Strings(fuzz)
	for _, p := range fuzz {
		s, ok := readFuzzString(t, p)
		if ok {
			out = append(out, struct{ name, in string }{p, s})
		}
	}
	return out
}

// readFuzzString reads a "go test fuzz v1" corpus file holding one string
// (or []byte) argument.
func readFuzzString(t *testing.T, path string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(b), "\n", 2)
	if len(lines) < 2 || lines[0] != "go test fuzz v1" {
		return "", false
	}
	arg := strings.TrimSpace(lines[1])
	for _, prefix := range []string{"string(", "[]byte("} {
		if strings.HasPrefix(arg, prefix) && strings.HasSuffix(arg, ")") {
			s, err := strconv.Unquote(arg[len(prefix) : len(arg)-1])
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return s, true
		}
	}
	return "", false
}
