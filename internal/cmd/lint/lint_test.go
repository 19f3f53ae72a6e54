package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/rules"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// run runs kdiag lint through runLint with buffers, as the command would
// with the flags' defaults, changed by set.
func run(t *testing.T, stdin string, set func(*LintOptions), args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ios, in, out, errOut := cmdutil.Test()
	in.WriteString(stdin)
	def := rules.DefaultOptions()
	opts := &LintOptions{
		IO: ios, ReadFile: readRegular, ToolVersion: "v0.0.0-test",
		// The golden SARIF names %SRCROOT%: a fixed directory, not the
		// checkout's.
		Getwd: func() (string, error) { return "/src/kdiag/internal/cmd/lint", nil },
		Args:  args, StdinName: "<stdin>", KafkaVersion: def.KafkaVersion,
		BrokerIdleMS: def.BrokerIdleMS, FailOn: "warning", Format: "text",
	}
	if set != nil {
		set(opts)
	}
	err := runLint(opts)
	var ee *cmdutil.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("runLint returned %v, want nil or an *ExitError", err)
	}
	if ee != nil && ee.Err != nil {
		errOut.WriteString(ee.Err.Error() + "\n")
	}
	return cmdutil.ExitCode(err), out.String(), errOut.String()
}

func td(name string) string { return filepath.Join("testdata", name) }

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		failOn string
		want   int
	}{
		{"clean", []string{td("clean.properties")}, "warning", 0},
		{"info below warning", []string{td("info.properties")}, "warning", 0},
		{"info at info", []string{td("info.properties")}, "info", 1},
		{"error at warning", []string{td("error.properties")}, "warning", 1},
		{"error at error", []string{td("error.properties")}, "error", 1},
		{"warning below error", []string{td("tree/conf/producer.properties")}, "error", 0},
		{"warning at warning", []string{td("tree/conf/producer.properties")}, "warning", 1},
		{"none never fails", []string{td("error.properties")}, "none", 0},
		{"none with clean", []string{td("clean.properties")}, "none", 0},
		{"FAIL-ON in capitals", []string{td("error.properties")}, "ERROR", 1},
		{"missing file", []string{td("does-not-exist.properties")}, "warning", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, "", func(o *LintOptions) { o.FailOn = tt.failOn }, tt.args...)
			if code != tt.want {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.want, out, errOut)
			}
		})
	}
}

func TestCleanOutput(t *testing.T) {
	code, out, errOut := run(t, "", nil, td("clean.properties"))
	if code != 0 || out != "no findings in 1 file\n" || errOut != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	good := td("clean.properties")
	tests := []struct {
		name    string
		set     func(*LintOptions)
		args    []string
		wantErr string
	}{
		{"no input", nil, nil, "no input"},
		{"bad format", func(o *LintOptions) { o.Format = "xml" }, []string{good}, `unknown output format "xml"`},
		{"bad dialect", func(o *LintOptions) { o.Dialect = "python" }, []string{good}, "--dialect"},
		{"bad fail-on", func(o *LintOptions) { o.FailOn = "fatal" }, []string{good}, `--fail-on "fatal"`},
		{"bad kafka version", func(o *LintOptions) { o.KafkaVersion = "1.1" }, []string{good}, "--kafka-version"},
		{"kafka version the catalog lacks", func(o *LintOptions) { o.KafkaVersion = "3.8" }, []string{good}, "describes the Java client 2.0 to 2.8, 3.9, 4.0 and 4.1"},
		{"missing env file", func(o *LintOptions) { o.EnvFile = td("nope.env") }, []string{good}, "--env " + td("nope.env") + ": no such file"},
		{"both broker flags", func(o *LintOptions) {
			o.BrokerConfig, o.BrokerIdleSet, o.BrokerIdleMS = td("server.properties"), true, 1000
		}, []string{good}, "mutually exclusive"},
		{"negative broker idle", func(o *LintOptions) { o.BrokerIdleSet, o.BrokerIdleMS = true, -5 }, []string{good}, "--broker-idle-ms -5"},
		{"missing broker config", func(o *LintOptions) { o.BrokerConfig = td("nope.properties") }, []string{good}, "nope.properties: no such file"},
		{"broken broker config", func(o *LintOptions) { o.BrokerConfig = td("server_broken.properties") }, []string{good}, `"5m" is not a number`},
		{"unknown ignore", func(o *LintOptions) { o.Ignore = []string{"KD1011"} }, []string{good}, `unknown rule "KD1011", did you mean KD101?`},
		{"stdin twice", nil, []string{"-", td("missing.properties"), "-"}, "given 2 times"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, "", tt.set, tt.args...)
			if code != cmdutil.ExitUsage {
				t.Errorf("exit %d, want %d", code, cmdutil.ExitUsage)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr %q does not contain %q", errOut, tt.wantErr)
			}
			if out != "" {
				t.Errorf("a usage error wrote output: %q", out)
			}
		})
	}
}

func TestStdin(t *testing.T) {
	yml := "spring:\n  kafka:\n    bootstrap-servers: kafka-1:9092\n    producer:\n      acks: 2\n"
	// Named application.yml, standard input is read as Spring YAML: acks
	// (from spring.kafka.producer.acks) is checked, at its YAML line.
	code, out, _ := run(t, yml, func(o *LintOptions) { o.StdinName = "application.yml" }, "-")
	if code != 1 || !strings.Contains(out, "application.yml:5:") || !strings.Contains(out, "KD308") {
		t.Errorf("exit %d, stdout:\n%s\nwant KD308 at application.yml:5", code, out)
	}
	// Unnamed, a properties text on standard input is reported as <stdin>.
	code, out, _ = run(t, "acks=all\n", nil, "-")
	if code != 1 || !strings.HasPrefix(out, "<stdin>:1:1: error KD201") {
		t.Errorf("exit %d, stdout:\n%s\nwant <stdin>:1:1: error KD201 (no bootstrap.servers)", code, out)
	}
}

func TestDialectFlag(t *testing.T) {
	// Forced to librdkafka, a file without connections.max.idle.ms gets
	// librdkafka's idle-connection finding, which a Java file never does.
	_, java, _ := run(t, "", nil, td("clean.properties"))
	_, lib, _ := run(t, "", func(o *LintOptions) { o.Dialect = "librdkafka" }, td("clean.properties"))
	if strings.Contains(java, "KD104") || !strings.Contains(lib, "KD104") {
		t.Errorf("java:\n%s\nlibrdkafka:\n%s\nwant KD104 only with --dialect librdkafka", java, lib)
	}
}

// paths returns the paths of the findings in json output.
func paths(t *testing.T, out string) []string {
	t.Helper()
	var rep struct {
		Findings []struct{ Path string }
		Summary  struct{ Files int }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("json output: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	var ps []string
	for _, f := range rep.Findings {
		if !seen[f.Path] {
			seen[f.Path] = true
			ps = append(ps, filepath.ToSlash(f.Path))
		}
	}
	return ps
}

func TestDirectoryWalk(t *testing.T) {
	got := walk(td("tree"), func(p string, err error) { t.Errorf("walk reported %s: %v", p, err) },
		func(p, msg string) { t.Errorf("walk noted %s: %s", p, msg) })
	for i := range got {
		got[i] = filepath.ToSlash(got[i])
	}
	// Hidden directories, vendor and node_modules are skipped, and so is a
	// file whose name is not a configuration file's.
	want := []string{
		"testdata/tree/app/application.yml",
		"testdata/tree/conf/producer.properties",
		"testdata/tree/nested/deeper/rdkafka.conf",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("walk (-want +got):\n%s", diff)
	}

	code, out, errOut := run(t, "", func(o *LintOptions) { o.Format = "json" }, td("tree"))
	if code != 1 || errOut != "" {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	if diff := cmp.Diff(want, paths(t, out)); diff != "" {
		t.Errorf("files with findings (-want +got):\n%s", diff)
	}
}

func TestFileGivenTwiceIsLintedOnce(t *testing.T) {
	file := td("tree/conf/producer.properties")
	_, once, _ := run(t, "", nil, file)
	_, twice, _ := run(t, "", nil, file, "./"+file, td("tree/conf"))
	if once != twice {
		t.Errorf("once:\n%s\ngiven three ways:\n%s", once, twice)
	}
}

// TestEmptyDirectoryFails: a directory argument in which nothing is
// checked fails the run (exit 2), also beside a good file: a mistyped path
// must not pass CI (issue 30: a directory named d.properties gave "no
// findings in 0 files", exit 0).
func TestEmptyDirectoryFails(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := run(t, "", nil, dir)
	if code != cmdutil.ExitUsage || strings.Contains(out, "no findings") || !strings.Contains(errOut, dir+": no configuration files") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	named := filepath.Join(dir, "d.properties")
	if err := os.Mkdir(named, 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run(t, "", nil, named, td("clean.properties"))
	want := "kdiag: lint: " + named + ": is a directory, not a configuration file, and holds no configuration files"
	if code != cmdutil.ExitUsage || out != "no findings in 1 file\n" || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, out, errOut, want)
	}
}

// TestBinaryFileRefused: an executable named x.properties (issue 30: a
// copied kdiag binary gave 238,229 findings, 85 MB of output) is refused in
// one line, exit 2, with no findings.
func TestBinaryFileRefused(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	x := filepath.Join(t.TempDir(), "x.properties")
	if err := os.WriteFile(x, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "", nil, x)
	want := "kdiag: lint: " + x + ": binary file, not a configuration"
	if code != cmdutil.ExitUsage || out != "" || !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 1 {
		t.Errorf("exit %d, stdout %.200q, stderr %.300q; want exit 2, no output and %q", code, out, errOut, want)
	}
}

// TestUnreadableAmongGood: an input that cannot be read is reported with
// its path, every other input is still linted and reported, and the exit
// status is 2.
func TestUnreadableAmongGood(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.properties")
	locked := filepath.Join(dir, "locked.properties")
	for _, p := range []string{good, locked} {
		if err := os.WriteFile(p, []byte("bootstrap.servers=kafka-1:9092\nacks=2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A dangling symlink in a walked directory, and a file that reading
	// refuses (chmod 000 does not stop root, so the refusal is injected).
	if err := os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "dangling.properties")); err != nil {
		t.Fatal(err)
	}
	readFile := func(name string) (string, error) {
		if name == locked {
			return "", &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
		}
		return readRegular(name)
	}
	missing := filepath.Join(dir, "missing.yml")

	code, out, errOut := run(t, "", func(o *LintOptions) { o.ReadFile = readFile; o.Format = "json" }, dir, missing)
	if code != cmdutil.ExitUsage {
		t.Errorf("exit %d, want %d", code, cmdutil.ExitUsage)
	}
	for _, want := range []string{
		"lint: " + filepath.Join(dir, "dangling.properties") + ": no such file or directory",
		"lint: " + locked + ": permission denied",
		"lint: " + missing + ": no such file or directory",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr does not say %q:\n%s", want, errOut)
		}
	}
	if diff := cmp.Diff([]string{filepath.ToSlash(good)}, paths(t, out)); diff != "" {
		t.Errorf("the readable file was not linted (-want +got):\n%s", diff)
	}
	// The json document says so too, for CI artifacts.
	var rep struct {
		Problems []struct{ Path, Message string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 3 {
		t.Errorf("json problems = %+v, want the 3 unreadable inputs", rep.Problems)
	}
}

func TestParseErrorIsReported(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "application.yml")
	if err := os.WriteFile(bad, []byte("spring:\n  kafka: [unclosed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "", nil, bad, td("clean.properties"))
	// The engine may report a broken YAML as a finding (KD903) or the
	// parser may refuse it: either way the run must not pass as clean.
	if code == 0 {
		t.Errorf("a broken YAML file passed: stdout %q, stderr %q", out, errOut)
	}
	if !strings.Contains(out+errOut, "application.yml") {
		t.Errorf("the broken file is not named: stdout %q, stderr %q", out, errOut)
	}
}

func TestBrokerIdle(t *testing.T) {
	file := td("idle400k.properties")
	tests := []struct {
		name string
		set  func(*LintOptions)
		want bool // KD102 reported
	}{
		{"broker default 600000", nil, false},
		{"--broker-idle-ms 300000", func(o *LintOptions) { o.BrokerIdleSet, o.BrokerIdleMS = true, 300000 }, true},
		{"--broker-config with 300000", func(o *LintOptions) { o.BrokerConfig = td("server.properties") }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, out, errOut := run(t, "", tt.set, file)
			if got := strings.Contains(out, "KD102"); got != tt.want {
				t.Errorf("KD102 reported = %v, want %v\nstdout:\n%s\nstderr:\n%s", got, tt.want, out, errOut)
			}
		})
	}
}

// TestBrokerConfigWithoutIdleSaysSo: a --broker-config that does not set
// connections.max.idle.ms is linted against the broker default, and the run
// says so on stderr (issue 30: it used 600000 silently); one that sets it
// says nothing.
func TestBrokerConfigWithoutIdleSaysSo(t *testing.T) {
	broker := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(broker, []byte("broker.id=1\nlisteners=PLAINTEXT://:9092\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "", func(o *LintOptions) { o.BrokerConfig = broker }, td("clean.properties"))
	want := "kdiag: lint: --broker-config " + broker + " does not set connections.max.idle.ms: using the broker's default, 600000 ms\n"
	if code != 0 || out != "no findings in 1 file\n" || errOut != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want stderr %q", code, out, errOut, want)
	}
	_, _, errOut = run(t, "", func(o *LintOptions) { o.BrokerConfig = td("server.properties") }, td("clean.properties"))
	if errOut != "" {
		t.Errorf("a broker config that sets the key: stderr %q, want nothing", errOut)
	}
}

// TestSpringProfiles: a Spring file with profile documents is linted per
// profile, each finding saying in which profile it holds (issue 30: the
// documents were merged, so the base profile's -1 was never reported), and
// --profile lints the profiles it names only.
func TestSpringProfiles(t *testing.T) {
	file := td("profiles/application.yml")
	tests := []struct {
		name     string
		profiles []string
		want     []string // rule and line of each finding, and the profiles it names
		note     string
	}{
		{"every profile", nil, []string{"KD101:7 (in profile default)", "KD102:15 (in profile prod)"},
			"Spring profiles, each linted on its own: default (no profile active); prod"},
		{"--profile prod", []string{"prod"}, []string{"KD102:15"}, "Spring profiles, each linted on its own: prod"},
		{"--profile dev", []string{"dev"}, []string{"KD101:7"}, "Spring profiles, each linted on its own: dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, out, errOut := run(t, "", func(o *LintOptions) { o.Format = "json"; o.Profiles = tt.profiles }, file)
			var rep struct {
				Findings []struct {
					Rule    string
					Message string
					Line    int
				}
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var got []string
			for _, f := range rep.Findings {
				s := f.Rule + ":" + strconv.Itoa(f.Line)
				if i := strings.LastIndex(f.Message, " (in profile"); i >= 0 {
					s += f.Message[i:]
				}
				got = append(got, s)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			if !strings.Contains(errOut, file+": "+tt.note) {
				t.Errorf("stderr %q does not say %q", errOut, tt.note)
			}
		})
	}
}

// TestScalaProducerFile: apache/kafka 0.8.2.2's config/producer.properties
// is known as the old Scala producer's file and said so (KD412), its keys
// named as that producer's, and it gets no librdkafka rule (issue 30: it was
// detected as librdkafka and got KD104).
func TestScalaProducerFile(t *testing.T) {
	file := filepath.Join("..", "..", "..", "config", "testdata", "kafka-0.8.2.2-producer.properties")
	_, out, errOut := run(t, "", nil, file)
	for _, want := range []string{
		":27:1: warning KD412 this file configures the old Scala producer (kafka.producer.Producer, removed in Kafka 2.0; producer.type, serializer.class say so): the Java producer ignores its 4 keys of that producer",
		":21:1: warning KD404 metadata.broker.list is a key of the old Scala producer (removed in Kafka 2.0): the Java producer ignores it (the Java config is bootstrap.servers)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s%s", want, out, errOut)
		}
	}
	if strings.Contains(out, "KD104") || strings.Contains(out, "librdkafka") {
		t.Errorf("linted as librdkafka:\n%s", out)
	}
}

// TestKafkaVersion21: --kafka-version 2.1 checks with the 2.1 producer's own
// configs (issue 27: 2.x was refused, and doctor linted a 2.1.1 client with
// 3.9's catalog, calling client.dns.lookup=default an error).
func TestKafkaVersion21(t *testing.T) {
	_, out, errOut := run(t, "client.dns.lookup=default\nbootstrap.servers=a:9092,b:9092\n", func(o *LintOptions) { o.KafkaVersion = "2.1.1" }, "-")
	if out != "no findings in 1 file\n" || errOut != "" {
		t.Errorf("2.1: stdout %q, stderr %q", out, errOut)
	}
	_, out, _ = run(t, "client.dns.lookup=default\nbootstrap.servers=a:9092,b:9092\n", func(o *LintOptions) { o.KafkaVersion = "3.9" }, "-")
	if !strings.Contains(out, "KD403") {
		t.Errorf("3.9 takes client.dns.lookup=default:\n%s", out)
	}
}

func TestIgnore(t *testing.T) {
	code, out, _ := run(t, "", func(o *LintOptions) { o.Ignore = []string{"kd308", ""} }, td("error.properties"))
	if code != 0 || strings.Contains(out, "KD308") {
		t.Errorf("--ignore kd308: exit %d, stdout:\n%s", code, out)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	for _, format := range []string{"text", "json", "sarif"} {
		code, out, errOut := run(t, "", func(o *LintOptions) { o.Format = format }, td("secrets.properties"))
		if code != 1 {
			t.Errorf("%s: exit %d, want 1 (secrets in clear are errors)", format, code)
		}
		for _, secret := range []string{"jaas-pass-s3cr3t", "key-pass-hunter2", "trust-pass-0xdead"} {
			if strings.Contains(out+errOut, secret) {
				t.Errorf("%s output shows the secret %q:\n%s", format, secret, out)
			}
		}
		if !strings.Contains(out, "KD501") || !strings.Contains(out, "KD502") {
			t.Errorf("%s output lacks KD501/KD502:\n%s", format, out)
		}
	}
}

// TestGolden lints a fixed tree with the real engine in every format. If
// a rule's wording changed on purpose, run go test ./internal/cmd/lint/ -update.
func TestGolden(t *testing.T) {
	for _, format := range []string{"text", "json", "sarif"} {
		t.Run(format, func(t *testing.T) {
			_, out, _ := run(t, "", func(o *LintOptions) { o.Format = format }, td("tree"), td("secrets.properties"))
			path := td("lint." + format + ".golden")
			if *update {
				if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/cmd/lint/ -update)", err)
			}
			if diff := cmp.Diff(string(want), out); diff != "" {
				t.Errorf("%s differs (-want +got); if intended, run go test ./internal/cmd/lint/ -update:\n%s", path, diff)
			}
		})
	}
}

// TestSARIFFromEngineValidates checks what real rules produce, not only the
// writers' fixtures, against the SARIF 2.1.0 schema.
func TestSARIFFromEngineValidates(t *testing.T) {
	_, out, _ := run(t, "", func(o *LintOptions) { o.Format = "sarif" }, td("tree"), td("secrets.properties"), td("error.properties"))
	f, err := os.Open(filepath.Join("..", "..", "..", "rules", "output", "testdata", "sarif-schema-2.1.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("sarif-schema-2.1.0.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("sarif-schema-2.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("lint's SARIF does not validate: %v\n%s", err, out)
	}
}

// TestFlags parses command lines through cobra with a runF that captures
// the options.
func TestFlags(t *testing.T) {
	tests := []struct {
		name string
		cli  []string
		want func(*LintOptions) bool
	}{
		{"defaults", []string{"a.properties"}, func(o *LintOptions) bool {
			def := rules.DefaultOptions()
			return o.Format == "text" && o.FailOn == "warning" && o.Dialect == "" && o.StdinName == "<stdin>" &&
				o.KafkaVersion == def.KafkaVersion && o.BrokerIdleMS == def.BrokerIdleMS && !o.BrokerIdleSet &&
				len(o.Args) == 1 && o.Args[0] == "a.properties"
		}},
		{"everything", []string{"-o", "sarif", "--fail-on", "error", "--dialect", "spring", "--kafka-version", "3.9",
			"--broker-idle-ms", "300000", "--ignore", "KD101,KD203", "--ignore", "KD404", "--stdin-name", "app.yml", "-", "dir/"},
			func(o *LintOptions) bool {
				return o.Format == "sarif" && o.FailOn == "error" && o.Dialect == "spring" && o.KafkaVersion == "3.9" &&
					o.BrokerIdleSet && o.BrokerIdleMS == 300000 && o.StdinName == "app.yml" &&
					cmp.Equal(o.Ignore, []string{"KD101", "KD203", "KD404"}) && cmp.Equal(o.Args, []string{"-", "dir/"})
			}},
		{"broker config", []string{"--broker-config", "server.properties", "x"}, func(o *LintOptions) bool {
			return o.BrokerConfig == "server.properties" && !o.BrokerIdleSet
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			var got *LintOptions
			cmd := NewCmdLint(&cmdutil.Factory{IO: ios}, func(o *LintOptions) error { got = o; return nil })
			cmd.SetArgs(tt.cli)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if got == nil || !tt.want(got) {
				t.Errorf("options %+v", got)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	cmd := NewCmdLint(&cmdutil.Factory{IO: ios}, nil)
	if cmd.Example == "" || !strings.Contains(cmd.Long, "Exit status") {
		t.Error("lint --help lacks an example or the exit statuses")
	}
	// The -o help is built from the writers' map.
	if u := cmd.Flags().Lookup("output").Usage; !strings.Contains(u, "json|sarif|text") {
		t.Errorf("-o usage %q", u)
	}
}

// TestSecretsCorpus lints testdata/secrets (issue 15's secret defects: keys
// misspelt from a password key, a secret that is a substring of its key, a
// JAAS value with an escaped quote, secret-named keys, librdkafka's
// sasl.pasword, Spring's spring.kafka.jaas.options.password) in every output
// format: no piece of any secret may appear, each secret is reported, and
// the messages are not garbled by masking.
func TestSecretsCorpus(t *testing.T) {
	secrets := []string{"Typo7Secret", "Typo8Secret", "RdTypo9Secret", "Tok3nValue99", "CredValue42",
		"SpringJaasPw1", "Esc", "aped", "APw", "alice"}
	wants := []string{
		"java.properties:5:1: warning KD404 ssl.key.pasword is not a producer config: did you mean ssl.key.password?",
		"java.properties:6:1: warning KD404 ssl.truststore.pasword is not a producer config: did you mean ssl.truststore.password?",
		"java.properties:8:18: error KD501 ssl.key.password holds a secret in clear (value hidden)",
		"java.properties:10:18: error KD502 sasl.jaas.config: the password option holds a secret in clear (value hidden)",
		"rdkafka.conf:5:1: error KD404 sasl.pasword is not a librdkafka property: rd_kafka_conf_set fails with",
		"application.yml:9:19: error KD502 spring.kafka.jaas.options.password: the password option of the JAAS login module Spring installs holds a secret in clear (value hidden)",
	}
	for _, format := range []string{"text", "json", "sarif"} {
		t.Run(format, func(t *testing.T) {
			_, out, errOut := run(t, "", func(o *LintOptions) { o.Format = format }, td("secrets"))
			for _, s := range secrets {
				if strings.Contains(out+errOut, s) {
					t.Errorf("%s output shows %q", format, s)
				}
			}
			if strings.Contains(out, "******word") || strings.Contains(out, "ssl.key.******") {
				t.Errorf("%s output masks inside a key name", format)
			}
			for _, w := range wants {
				if format != "text" {
					// json and sarif carry the message; the position is
					// in fields of its own.
					w = w[strings.Index(w, " KD")+7:]
				}
				if !strings.Contains(out, w) {
					t.Errorf("%s output lacks %q:\n%s", format, w, out)
				}
			}
		})
	}
}

// TestGoldenSources lints each folder of testdata/sources (configurations
// found in other files: an application log's ProducerConfig blocks, ...) in
// text and json, against testdata/sources/<name>.<format>.golden. The
// positions in them are the ones in the files. Regenerate with
// go test ./internal/cmd/lint/ -update.
func TestGoldenSources(t *testing.T) {
	dirs, err := filepath.Glob(td("sources/*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		st, err := os.Stat(dir)
		if err != nil || !st.IsDir() {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, format := range []string{"text", "json"} {
			t.Run(filepath.Base(dir)+"/"+format, func(t *testing.T) {
				_, out, errOut := run(t, "", func(o *LintOptions) { o.Format = format }, files...)
				if errOut != "" {
					t.Errorf("stderr: %s", errOut)
				}
				path := dir + "." + format + ".golden"
				if *update {
					if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./internal/cmd/lint/ -update)", err)
				}
				if diff := cmp.Diff(string(want), out); diff != "" {
					t.Errorf("%s differs (-want +got); if intended, run go test ./internal/cmd/lint/ -update:\n%s", path, diff)
				}
			})
		}
	}
}

// TestEnvFile: --env resolves placeholders, and the finding says the value
// came from there.
func TestEnvFile(t *testing.T) {
	dir := t.TempDir()
	app := filepath.Join(dir, "application.properties")
	env := filepath.Join(dir, "prod.env")
	if err := os.WriteFile(app, []byte("spring.kafka.bootstrap-servers=${BOOTSTRAP}\nspring.kafka.producer.properties.linger.ms=${LINGER:5}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env, []byte("BOOTSTRAP=b1:9092,b2:9092\nLINGER=5s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, without, _ := run(t, "", nil, app)
	code, with, errOut := run(t, "", func(o *LintOptions) { o.EnvFile = env }, app)
	if strings.Contains(without, "KD401") || !strings.Contains(without, "KD411") {
		t.Errorf("without --env: want KD411 for ${BOOTSTRAP} and the default 5 checked:\n%s", without)
	}
	if code != 1 || !strings.Contains(with, `KD401 spring.kafka.producer.properties.linger.ms (linger.ms): "5s" is not a number of milliseconds (its placeholders resolved from --env)`) ||
		strings.Contains(with, "KD411") {
		t.Errorf("with --env: exit %d, stdout:\n%s\nstderr: %s", code, with, errOut)
	}
}
