package rules

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kdiag/kdiag/config"
)

var update = flag.Bool("update", false, "rewrite testdata/javadiff/expected.txt from the real kafka-clients jars")

// The Java differential: every file of testdata/javadiff is a producer
// configuration; testdata/javadiff/expected.txt says what the real Java
// client does with it, per version: whether new KafkaProducer(props) throws
// (and what), and the lines it logs about its configuration.
// TestJavaDifferentialJar makes those expectations by running the
// kafka-clients 3.9.0 and 2.1.1 jars (-update rewrites the file from them,
// without it they must match it); TestJavaDifferential holds lint to them,
// and runs without a JDK.

const javaDiffDir = "testdata/javadiff"

// javaDiffVersions are the jars, and the --kafka-version lint checks each
// with.
var javaDiffVersions = []struct{ jar, lint string }{{"3.9.0", "3.9"}, {"2.1.1", "2.1"}}

// javaOutcome is what one jar did with one file.
type javaOutcome struct {
	// result is "ok" or "throws <exception>: <message>".
	result string
	// logs are the client's lines about its configuration: "WARN
	// CommonClientConfigs: ...".
	logs []string
}

// javaDiffHarness makes a KafkaProducer from each properties file named on
// its command line (serializers passed as objects when the file names
// none, as an application does) and closes it at once; it prints RESULT ok
// or RESULT throws with the innermost exception, then every line the
// client logged meanwhile (slf4j-simple writes to System.err, caught per
// file). bootstrap.servers in the corpus is 127.0.0.1:9, where nothing
// listens: the producer's network thread tries it once before close.
const javaDiffHarness = `
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serializer;

public class JavaDiff {
    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        PrintStream err = System.err;
        for (String path : args) {
            byte[] data = Files.readAllBytes(Paths.get(path));
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            System.setErr(new PrintStream(buf, true, "UTF-8"));
            String result = "ok";
            KafkaProducer<byte[], byte[]> producer = null;
            try {
                // As kdiag reads a file: UTF-8 when it is, else ISO-8859-1.
                Properties p = new Properties();
                boolean utf8 = true;
                try {
                    StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(data));
                } catch (CharacterCodingException e) {
                    utf8 = false;
                }
                if (utf8) p.load(new InputStreamReader(new ByteArrayInputStream(data), StandardCharsets.UTF_8));
                else p.load(new ByteArrayInputStream(data));
                Serializer<byte[]> ks = p.containsKey("key.serializer") ? null : new ByteArraySerializer();
                Serializer<byte[]> vs = p.containsKey("value.serializer") ? null : new ByteArraySerializer();
                producer = new KafkaProducer<>(p, ks, vs);
            } catch (Throwable t) {
                Throwable c = t;
                while (c.getCause() != null && c.getCause() != c) c = c.getCause();
                result = "throws " + c.getClass().getSimpleName() + ": " + c.getMessage();
            } finally {
                if (producer != null) close(producer);
                System.setErr(err);
            }
            out.println("FILE " + Paths.get(path).getFileName());
            out.println("RESULT " + result.replace('\n', ' '));
            for (String line : buf.toString("UTF-8").split("\n")) out.println("LOG " + line);
        }
    }

    // close(Duration) is 2.2 and later; close(long, TimeUnit) is gone in 3.0.
    static void close(KafkaProducer<?, ?> p) {
        try {
            Class<?> d = Class.forName("java.time.Duration");
            KafkaProducer.class.getMethod("close", d).invoke(p, d.getField("ZERO").get(null));
        } catch (Exception e) {
            try {
                KafkaProducer.class.getMethod("close", long.class, TimeUnit.class).invoke(p, 0L, TimeUnit.MILLISECONDS);
            } catch (Exception e2) {
                throw new RuntimeException(e2);
            }
        }
    }
}
`

// javaLogRE picks the client's lines about its configuration out of
// slf4j-simple's output: the main thread's, from the classes that read and
// check the configuration.
var javaLogRE = regexp.MustCompile(`^\[main\] (WARN|INFO) org\.apache\.kafka\.clients\.(CommonClientConfigs|producer\.ProducerConfig|producer\.KafkaProducer|ClientUtils) - (?:\[Producer clientId=[^\]]*\] )?(.*)$`)

// keepJavaLog says whether a configuration line is worth recording: not
// the "ProducerConfig values:" dump, nor KafkaProducer's routine INFO
// (version, closing), but its overrides.
func keepJavaLog(level, class, msg string) bool {
	switch {
	case strings.HasPrefix(msg, "ProducerConfig values:"):
		return false
	case class == "producer.KafkaProducer" && level == "INFO":
		return strings.Contains(msg, "Overriding")
	}
	return true
}

// runJavaDiff runs the harness against one jar on every corpus file.
func runJavaDiff(t *testing.T, jar string, files []string) map[string]javaOutcome {
	t.Helper()
	javac, err1 := exec.LookPath("javac")
	java, err2 := exec.LookPath("java")
	if err1 != nil || err2 != nil {
		t.Skip("javac/java not on PATH: apt-get install default-jdk-headless")
	}
	share := "/usr/share/java"
	deps := []string{"slf4j-api.jar", "slf4j-simple.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar"}
	if strings.HasPrefix(filepath.Base(jar), "kafka-clients-3.") {
		deps = append(deps, "protobuf.jar") // KIP-714 telemetry
	}
	cp := []string{jar}
	for _, d := range deps {
		p := filepath.Join(share, d)
		if _, err := os.Stat(p); err != nil {
			t.Skipf("no %s: apt-get install libslf4j-java liblz4-java libsnappy-java libzstd-jni-java libprotobuf-java", p)
		}
		cp = append(cp, p)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "JavaDiff.java"), []byte(javaDiffHarness), 0o644); err != nil {
		t.Fatal(err)
	}
	classpath := strings.Join(cp, string(os.PathListSeparator))
	if out, err := exec.Command(javac, "-nowarn", "-cp", classpath, "-d", dir, filepath.Join(dir, "JavaDiff.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	args := []string{"-cp", dir + string(os.PathListSeparator) + classpath,
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.producer.ProducerConfig=info",
		"-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.producer.KafkaProducer=info",
		"JavaDiff"}
	for _, f := range files {
		args = append(args, filepath.Join(javaDiffDir, f))
	}
	var stderr bytes.Buffer
	cmd := exec.Command(java, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java JavaDiff: %v\n%s", err, stderr.String())
	}
	res := map[string]javaOutcome{}
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "FILE "):
			cur = strings.TrimPrefix(line, "FILE ")
		case strings.HasPrefix(line, "RESULT "):
			res[cur] = javaOutcome{result: strings.TrimPrefix(line, "RESULT ")}
		case strings.HasPrefix(line, "LOG "):
			m := javaLogRE.FindStringSubmatch(strings.TrimSuffix(strings.TrimPrefix(line, "LOG "), "\r"))
			if m != nil && keepJavaLog(m[1], m[2], m[3]) {
				o := res[cur]
				o.logs = append(o.logs, m[1]+" "+m[2][strings.LastIndex(m[2], ".")+1:]+": "+m[3])
				res[cur] = o
			}
		}
	}
	return res
}

// javaDiffFiles lists the corpus, sorted.
func javaDiffFiles(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(javaDiffDir, "*.properties"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no corpus in %s: %v", javaDiffDir, err)
	}
	var out []string
	for _, p := range m {
		out = append(out, filepath.Base(p))
	}
	sort.Strings(out)
	return out
}

const expectedHeader = `# What the real Java producer does with each file of this folder: new
# KafkaProducer(props), as rules/javadiff_test.go's harness makes it, with
# kafka-clients 3.9.0 and 2.1.1 (../shared/java-clients): "ok" or the
# exception it throws, and the lines it logs about its configuration.
# Written from the jars by: go test ./rules/ -run TestJavaDifferentialJar -update
`

// formatExpected writes expected.txt.
func formatExpected(files []string, runs map[string]map[string]javaOutcome) string {
	var b strings.Builder
	b.WriteString(expectedHeader)
	for _, f := range files {
		fmt.Fprintf(&b, "== %s\n", f)
		for _, v := range javaDiffVersions {
			o := runs[v.jar][f]
			fmt.Fprintf(&b, "%s: %s\n", v.jar, o.result)
			for _, l := range o.logs {
				fmt.Fprintf(&b, "%s log: %s\n", v.jar, l)
			}
		}
	}
	return b.String()
}

// readExpected reads expected.txt: by file, by jar version.
func readExpected(t *testing.T) map[string]map[string]javaOutcome {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(javaDiffDir, "expected.txt"))
	if err != nil {
		t.Fatalf("%v (make it with -run TestJavaDifferentialJar -update)", err)
	}
	out := map[string]map[string]javaOutcome{}
	var cur string
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if f, ok := strings.CutPrefix(line, "== "); ok {
			cur = f
			out[cur] = map[string]javaOutcome{}
			continue
		}
		head, rest, ok := strings.Cut(line, ": ")
		if !ok || cur == "" {
			t.Fatalf("expected.txt:%d: cannot read %q", i+1, line)
		}
		if v, ok := strings.CutSuffix(head, " log"); ok {
			o := out[cur][v]
			o.logs = append(o.logs, rest)
			out[cur][v] = o
			continue
		}
		o := out[cur][head]
		o.result = rest
		out[cur][head] = o
	}
	return out
}

// TestJavaDifferentialJar runs the real jars on the corpus and requires
// expected.txt to say what they do (-update writes it).
func TestJavaDifferentialJar(t *testing.T) {
	files := javaDiffFiles(t)
	runs := map[string]map[string]javaOutcome{}
	for _, v := range javaDiffVersions {
		jar := filepath.Join(javaClientsDir(), "kafka-clients-"+v.jar+".jar")
		if _, err := os.Stat(jar); errors.Is(err, fs.ErrNotExist) {
			t.Skipf("%s not present", jar)
		}
		runs[v.jar] = runJavaDiff(t, jar, files)
		if len(runs[v.jar]) != len(files) {
			t.Fatalf("kafka-clients %s answered for %d of %d files", v.jar, len(runs[v.jar]), len(files))
		}
	}
	got := formatExpected(files, runs)
	path := filepath.Join(javaDiffDir, "expected.txt")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s is not what the jars do (-file +jars); review, then rewrite it with -update:\n%s", path, diff)
	}
}

// refusalRules are the rules whose error findings say the Java producer
// does not start (ConfigException or IllegalArgumentException when it is
// made). Other errors are of a producer that starts and then fails or
// exposes something (KD103, KD307, KD501, KD502).
var refusalRules = []string{"KD201", "KD202", "KD301", "KD302", "KD303", "KD304", "KD305", "KD306", "KD308",
	"KD401", "KD402", "KD403", "KD407", "KD410", "KD903"}

// lintRefuses says whether lint's findings say the producer does not start.
func lintRefuses(v *fileView, fs []Finding) (bool, []string) {
	var why []string
	for _, fd := range fs {
		if fd.Severity != Error || !slices.Contains(refusalRules, fd.RuleID) {
			continue
		}
		switch {
		case fd.RuleID == "KD202" && (strings.Contains(fd.Message, "the client accepts it") || strings.Contains(fd.Message, "the client takes it")):
			continue // an address the client takes and cannot reach
		case fd.RuleID == "KD410" && !checkable(v, fd.Key):
			continue // the text as written is a valid string value
		}
		why = append(why, fd.RuleID+" "+fd.Message)
	}
	return len(why) > 0, why
}

// unusedKeysRE reads the keys the client says it does not use: 3.x's one
// INFO line, 2.x's WARN per key.
var (
	unusedListRE = regexp.MustCompile(`^INFO ProducerConfig: These configurations '\[(.*)\]' were supplied but are not used yet\.$`)
	unknownKeyRE = regexp.MustCompile(`^WARN ProducerConfig: The configuration '(.*)' was supplied but isn't a known config\.$`)
)

// keyRules are the rules that say a key does nothing in the producer.
var keyRules = []string{"KD404", "KD405", "KD406", "KD408", "KD412"}

// logFindings maps what the client logs about its configuration to the
// rule that must say the same, and the severity it says it with.
var logFindings = []struct {
	re   *regexp.Regexp
	rule string
	// both says the rule's finding must come with the log line too (at
	// versions whose lint message claims the line).
	both bool
}{
	{regexp.MustCompile(`Disabling exponential reconnect backoff`), "KD105", false},
	{regexp.MustCompile(`is greater than configuration .* will be applied`), "KD108", true},
	{regexp.MustCompile(`should be equal to or larger than .* Setting it to`), "KD301", true},
	{regexp.MustCompile(`Idempotence will be disabled because (acks|retries|max\.in\.flight)`), "KD30[234]", true},
}

// javaDiffCheck compares lint's findings on one file, at one version, with
// what the jar did; it returns the disagreements.
func javaDiffCheck(t *testing.T, file string, o javaOutcome, version string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(javaDiffDir, file))
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.Parse(file, data, config.Java)
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.KafkaVersion = version
	fs := LintFile(f, opts)
	v := newView(f, opts)
	var bad []string
	refuses, why := lintRefuses(v, fs)
	throws := strings.HasPrefix(o.result, "throws ")
	if refuses != throws {
		bad = append(bad, fmt.Sprintf("Java: %s; lint says the producer does not start: %v %q", o.result, refuses, why))
	}
	has := func(rule string, warnOnly bool) bool {
		re := regexp.MustCompile("^" + rule + "$")
		for _, fd := range fs {
			if re.MatchString(fd.RuleID) && (!warnOnly || fd.Severity == Warning) {
				return true
			}
		}
		return false
	}
	// The client's log lines about its configuration, and the findings
	// that say it does so.
	for _, lf := range logFindings {
		logged := slices.ContainsFunc(o.logs, lf.re.MatchString)
		found := has(lf.rule, true)
		if lf.rule == "KD108" && found {
			// KD108 claims the WARN only where it says so.
			found = slices.ContainsFunc(fs, func(fd Finding) bool {
				return fd.RuleID == "KD108" && strings.Contains(fd.Message, "logs a WARN")
			})
		}
		switch {
		case logged && !found && !throws:
			bad = append(bad, fmt.Sprintf("Java logs %q; lint has no %s warning", lf.re, lf.rule))
		case found && !logged && lf.both && !throws:
			bad = append(bad, fmt.Sprintf("lint's %s says what Java does not log (%q)", lf.rule, lf.re))
		}
	}
	// Keys: every key lint calls dead, the client says it does not use;
	// and a 2.x client's unknown keys are ones lint reports (or passes
	// to serializers and interceptors on purpose).
	if throws {
		return bad
	}
	var unused []string
	for _, l := range o.logs {
		if m := unusedListRE.FindStringSubmatch(l); m != nil {
			unused = append(unused, strings.Split(m[1], ", ")...)
		}
		if m := unknownKeyRE.FindStringSubmatch(l); m != nil {
			unused = append(unused, m[1])
		}
	}
	var dead []string
	for _, fd := range fs {
		if slices.Contains(keyRules, fd.RuleID) && fd.Key != "" {
			dead = append(dead, fd.Key)
			if !slices.Contains(unused, fd.Key) {
				bad = append(bad, fmt.Sprintf("lint's %s says %s does nothing; the client uses it (unused: %q)", fd.RuleID, fd.Key, unused))
			}
		}
	}
	if strings.HasPrefix(version, "2.") {
		for _, k := range unused {
			if !slices.Contains(dead, k) && !hasAnyPrefix(k, passThroughPrefixes) && !isKdiagKey(k) {
				bad = append(bad, fmt.Sprintf("the client does not know %s; lint says nothing of it", k))
			}
		}
	}
	return bad
}

// TestJavaDifferential holds lint to expected.txt: for every corpus file,
// at 3.9 and 2.1, lint says the producer does not start exactly when the
// real client throws, reports the overrides the client logs, and calls no
// key dead that the client uses.
func TestJavaDifferential(t *testing.T) {
	files := javaDiffFiles(t)
	exp := readExpected(t)
	agree := 0
	for _, file := range files {
		e, ok := exp[file]
		if !ok {
			t.Errorf("%s: not in expected.txt (run -run TestJavaDifferentialJar -update)", file)
			continue
		}
		var bad []string
		for _, v := range javaDiffVersions {
			for _, b := range javaDiffCheck(t, file, e[v.jar], v.lint) {
				bad = append(bad, v.jar+": "+b)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s:\n  %s", file, strings.Join(bad, "\n  "))
			continue
		}
		agree++
	}
	t.Logf("%d of %d files agree with kafka-clients 3.9.0 and 2.1.1", agree, len(files))
}
