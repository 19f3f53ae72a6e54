package config

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/magiconair/properties"
)

// hasMalformedEscape reports whether parsing recorded the problem for
// which Java's Properties.load throws instead.
func hasMalformedEscape(f *File) bool {
	for _, p := range f.Problems {
		if strings.HasPrefix(p.Msg, "malformed \\uxxxx") {
			return true
		}
	}
	return false
}

// magiconairDivergence says why github.com/magiconair/properties reads an
// input differently from java.util.Properties (and so from ParseProperties,
// which follows Java), or "" when both must agree. Each reason was found by
// this test, checked against the library's lex.go / load.go (v1.18.13), and
// Java's side confirmed by TestDifferentialJava on the same input.
func magiconairDivergence(in string, f *File) string {
	if containsSurrogateEscape(in) {
		// lex.go scanUnicodeLiteral appends each \uXXXX as a rune on its
		// own, so a UTF-16 pair written as two escapes becomes two U+FFFD;
		// Java joins the pair into one character.
		return "a surrogate pair written as two \\u escapes"
	}
	if strings.HasPrefix(in, "\ufeff") {
		// load.go loadBytes strips a leading UTF-8 BOM; Java keeps U+FEFF
		// as the first character of the first key.
		return "a leading byte order mark"
	}
	for _, p := range f.Problems {
		if strings.HasPrefix(p.Msg, "line continuation") {
			// lex.go scanEscapeSequence fails with "premature EOF" on a
			// backslash at the end of input; Java's LineReader drops it.
			return "a line continuation at end of input"
		}
	}
	for _, e := range f.Entries {
		if e.Key == "" {
			// The lexer requires a key before = or :, and fails on a line
			// such as "=v"; Java reads the key "" (and a line that is only
			// a backslash as the key "" too).
			return "an empty key"
		}
	}
	pr := newPropReader(&File{}, in)
	for {
		ln, ok := pr.readLine()
		if !ok {
			break
		}
		keyLen, _ := splitLine(ln.text)
		end := keyLen // the separator, or the end of the line
		if end == len(ln.text) {
			end--
		}
		if len(ln.text) > 0 && (ln.pos[0].Line != ln.start.Line || ln.pos[max(end, 0)].Line != ln.pos[0].Line) {
			// The lexer joins continuation lines only in values: a
			// continuation inside the key or before the separator (or
			// after a line that is only a backslash) keeps the escaped
			// newline in the key ("ke\\\n  y=v" is the key "ke\n"),
			// where Java's LineReader joins lines before it splits them.
			return "a line continuation before the separator"
		}
	}
	if crlfContinuation.MatchString(in) {
		// A backslash before \r\n escapes only the \r; the \n then ends
		// the line, so the next line is a key of its own. Java treats \r\n
		// as one line terminator.
		return "a line continuation before \\r\\n"
	}
	return ""
}

// crlfContinuation is an odd number of backslashes before \r\n.
var crlfContinuation = regexp.MustCompile(`(^|[^\\])(\\\\)*\\\r\n`)

func containsSurrogateEscape(in string) bool {
	for i := 0; i+6 <= len(in); i++ {
		if in[i] == '\\' && in[i+1] == 'u' {
			if v, err := strconv.ParseUint(in[i+2:i+6], 16, 16); err == nil && utf16.IsSurrogate(rune(v)) {
				return true
			}
		}
	}
	return false
}

// TestDifferentialMagiconair compares ParseProperties with
// github.com/magiconair/properties on the whole corpus: the same keys with
// the same values, and an error there exactly where Java throws.
func TestDifferentialMagiconair(t *testing.T) {
	for _, tc := range corpusInputs(t) {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseProperties(tc.name, strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if why := magiconairDivergence(tc.in, f); why != "" {
				t.Skipf("known divergence of magiconair/properties from java.util.Properties: %s", why)
			}
			// Loader, not LoadString: LoadString checks ${} expansions,
			// which Java does not have, and fails on ${undefined}.
			// ParseProperties reads a file that is not UTF-8 as ISO-8859-1.
			enc := properties.UTF8
			if !utf8.ValidString(tc.in) {
				enc = properties.ISO_8859_1
			}
			l := &properties.Loader{Encoding: enc, DisableExpansion: true}
			p, perr := l.LoadBytes([]byte(tc.in))
			if hasMalformedEscape(f) {
				if perr == nil {
					t.Errorf("magiconair accepted a malformed \\u escape that Java rejects")
				}
				return
			}
			if perr != nil {
				t.Fatalf("magiconair: %v; ours: %+v", perr, f.Entries)
			}
			want := map[string]string{}
			for _, k := range p.Keys() {
				v, _ := p.Get(k)
				want[k] = v
			}
			if diff := cmp.Diff(want, f.Map()); diff != "" {
				t.Errorf("magiconair vs ParseProperties (-magiconair +ours):\n%s", diff)
			}
		})
	}
}

// javaHarness is java.util.Properties.load as ParseProperties reads a file:
// on a UTF-8 reader for a file that is valid UTF-8, on the InputStream
// (ISO-8859-1, what Kafka's Utils.loadProps calls) for one that is not,
// printing for
// each file its entries (sorted by key) as hex UTF-16 code units, or the
// exception that stopped it.
const javaHarness = `
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;

public class PropsDump {
    static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) b.append(String.format("%04x", (int) s.charAt(i)));
        return b.toString();
    }
    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        for (String path : args) {
            out.println("FILE " + path);
            Properties p = new Properties();
            byte[] data = java.nio.file.Files.readAllBytes(java.nio.file.Paths.get(path));
            boolean utf8 = true;
            try {
                StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(data));
            } catch (java.nio.charset.CharacterCodingException e) {
                utf8 = false;
            }
            try {
                if (utf8) p.load(new InputStreamReader(new ByteArrayInputStream(data), StandardCharsets.UTF_8));
                else p.load(new ByteArrayInputStream(data));
            } catch (IllegalArgumentException e) {
                out.println("ERR " + e.getMessage());
                continue;
            }
            TreeSet<String> keys = new TreeSet<>(p.stringPropertyNames());
            for (String k : keys) out.println("KV " + hex(k) + " " + hex(p.getProperty(k)));
        }
    }
}
`

// javaResult is what the harness printed for one file.
type javaResult struct {
	err string
	m   map[string]string
}

// fromJavaHex decodes hex UTF-16 code units; a lone surrogate becomes
// U+FFFD, as it does in ParseProperties, since Go strings hold no
// surrogates.
func fromJavaHex(t *testing.T, s string) string {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
	}
	return string(utf16.Decode(u))
}

// TestDifferentialJava runs java.util.Properties itself (JDK on PATH) on
// the corpus and requires the same keys and values, and a Problem exactly
// where Java throws.
func TestDifferentialJava(t *testing.T) {
	javac, err1 := exec.LookPath("javac")
	java, err2 := exec.LookPath("java")
	if err1 != nil || err2 != nil {
		t.Skip("javac/java not on PATH: the java.util.Properties differential test needs a JDK")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "PropsDump.java"), []byte(javaHarness), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(javac, "-d", dir, filepath.Join(dir, "PropsDump.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	inputs := corpusInputs(t)
	args := []string{"-cp", dir, "PropsDump"}
	for i, tc := range inputs {
		p := filepath.Join(dir, fmt.Sprintf("in%03d.properties", i))
		if err := os.WriteFile(p, []byte(tc.in), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(java, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java: %v\n%s", err, stderr.String())
	}
	results := map[string]*javaResult{}
	var cur *javaResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "FILE "):
			cur = &javaResult{m: map[string]string{}}
			results[filepath.Base(strings.TrimPrefix(line, "FILE "))] = cur
		case strings.HasPrefix(line, "ERR "):
			cur.err = strings.TrimPrefix(line, "ERR ")
		case strings.HasPrefix(line, "KV "):
			// "KV <key> <value>", either possibly empty.
			f := strings.Split(line, " ")
			if len(f) != 3 {
				t.Fatalf("bad harness line %q", line)
			}
			cur.m[fromJavaHex(t, f[1])] = fromJavaHex(t, f[2])
		}
	}
	for i, tc := range inputs {
		t.Run(tc.name, func(t *testing.T) {
			jr := results[fmt.Sprintf("in%03d.properties", i)]
			if jr == nil {
				t.Fatal("no output from the Java harness")
			}
			f, err := ParseProperties(tc.name, strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if jr.err != "" || hasMalformedEscape(f) {
				if jr.err == "" || !hasMalformedEscape(f) {
					t.Errorf("Java error %q, our problems %+v", jr.err, f.Problems)
				}
				return
			}
			got, want := f.Map(), jr.m
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("java.util.Properties vs ParseProperties (-java +ours):\n%s", diff)
			}
		})
	}
}
