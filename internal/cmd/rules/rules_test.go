package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/config"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/rules"
)

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *cmdutil.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("got %v, want nil or an *ExitError", err)
	}
	return cmdutil.ExitCode(err)
}

func TestListTable(t *testing.T) {
	ios, _, out, _ := cmdutil.Test()
	if err := runRules(&RulesOptions{IO: ios, Catalog: rules.All, Format: "table"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	cat := rules.All()
	if len(lines) != len(cat)+1 {
		t.Fatalf("%d lines for %d rules:\n%s", len(lines), len(cat), out)
	}
	if f := strings.Fields(lines[0]); !cmp.Equal(f, []string{"ID", "SEVERITY", "CATEGORY", "TITLE"}) {
		t.Errorf("header %q", lines[0])
	}
	for i, r := range cat {
		l := lines[i+1]
		f := strings.Fields(l)
		if len(f) < 4 || f[0] != r.ID || f[1] != r.Severity.String() || f[2] != r.Category || !strings.HasSuffix(l, r.Title) {
			t.Errorf("line %d = %q, want %s %s %s %s", i+2, l, r.ID, r.Severity, r.Category, r.Title)
		}
		if strings.HasSuffix(l, " ") {
			t.Errorf("line %d has trailing blanks: %q", i+2, l)
		}
	}
}

func TestListJSON(t *testing.T) {
	ios, _, out, _ := cmdutil.Test()
	if err := runRules(&RulesOptions{IO: ios, Catalog: rules.All, Format: "json"}); err != nil {
		t.Fatal(err)
	}
	var docs []RuleDoc
	if err := json.Unmarshal(out.Bytes(), &docs); err != nil {
		t.Fatal(err)
	}
	cat := rules.All()
	if len(docs) != len(cat) {
		t.Fatalf("%d rules in json, %d in the catalog", len(docs), len(cat))
	}
	for i, d := range docs {
		r := cat[i]
		if d.ID != r.ID || d.Title != r.Title || d.Severity != r.Severity.String() || d.Remediation != r.Remediation ||
			d.HelpURI != "https://github.com/kdiag/kdiag/blob/main/docs/rules.md#"+strings.ToLower(r.ID) || len(d.Dialects) == 0 {
			t.Errorf("json rule %d = %+v, catalog %s", i, d, r.ID)
		}
	}
}

func TestListBadFormat(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	if code := exitCode(t, runRules(&RulesOptions{IO: ios, Catalog: rules.All, Format: "yaml"})); code != cmdutil.ExitUsage {
		t.Errorf("exit %d, want %d", code, cmdutil.ExitUsage)
	}
}

func TestExplain(t *testing.T) {
	r, ok := rules.Lookup("KD101")
	if !ok {
		t.Fatal("KD101 is not in the catalog")
	}
	for _, id := range []string{"KD101", "kd101", " KD101 "} {
		ios, _, out, _ := cmdutil.Test()
		if err := runExplain(&ExplainOptions{IO: ios, Catalog: rules.All, ID: id, Format: "text"}); err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		s := out.String()
		flat := strings.Join(strings.Fields(s), " ") // explain wraps long text
		for _, want := range []string{
			"KD101: " + r.Title, "Severity:  " + r.Severity.String(), "Why", "Fix", "Source",
			strings.Join(strings.Fields(r.Rationale), " "), strings.Join(strings.Fields(r.Remediation), " "),
			"# kdiag:ignore KD101", "docs/rules.md#kd101",
		} {
			if !strings.Contains(flat, strings.Join(strings.Fields(want), " ")) {
				t.Errorf("explain %q lacks %q:\n%s", id, want, s)
			}
		}
		for _, l := range strings.Split(s, "\n")[1:] { // the title line is as long as the title
			if len(l) > 80 && !strings.Contains(l, "://") && strings.Contains(l, " ") {
				t.Errorf("line wider than 80 columns: %q", l)
			}
		}
	}
}

func TestExplainJSON(t *testing.T) {
	ios, _, out, _ := cmdutil.Test()
	if err := runExplain(&ExplainOptions{IO: ios, Catalog: rules.All, ID: "KD501", Format: "json"}); err != nil {
		t.Fatal(err)
	}
	var d RuleDoc
	if err := json.Unmarshal(out.Bytes(), &d); err != nil || d.ID != "KD501" || d.Category != "secrets" {
		t.Errorf("explain -o json: %v %+v", err, d)
	}
}

func TestExplainUnknown(t *testing.T) {
	tests := []struct{ id, want, notWant string }{
		{"KD1011", `unknown rule "KD1011", did you mean KD101?`, ""},
		{"kd10", `did you mean KD10`, ""},
		{"banana", `unknown rule "banana"`, "did you mean"},
	}
	for _, tt := range tests {
		ios, _, out, _ := cmdutil.Test()
		err := runExplain(&ExplainOptions{IO: ios, Catalog: rules.All, ID: tt.id, Format: "text"})
		if code := exitCode(t, err); code != cmdutil.ExitUsage {
			t.Errorf("%q: exit %d, want %d", tt.id, code, cmdutil.ExitUsage)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tt.want) || (tt.notWant != "" && strings.Contains(msg, tt.notWant)) {
			t.Errorf("%q: error %q, want %q without %q", tt.id, msg, tt.want, tt.notWant)
		}
		if out.Len() != 0 {
			t.Errorf("%q: wrote %q", tt.id, out)
		}
	}
}

func TestDidYouMean(t *testing.T) {
	for _, tt := range []struct{ id, want string }{
		{"KD1O1", ", did you mean KD101?"},
		{"kd101 ", ", did you mean KD101?"},
		{"KD10", ", did you mean KD101?"},
		{"KD011", ", did you mean KD101?"}, // a transposition is one edit
		{"XYZ", ""},
	} {
		if got := DidYouMean(tt.id); got != tt.want {
			t.Errorf("DidYouMean(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
}

func TestFlags(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	f := &cmdutil.Factory{IO: ios}

	var got *RulesOptions
	cmd := NewCmdRules(f, func(o *RulesOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"-o", "json"})
	if err := cmd.Execute(); err != nil || got == nil || got.Format != "json" {
		t.Errorf("rules -o json: %v, %+v", err, got)
	}

	var ex *ExplainOptions
	cmd = NewCmdExplain(f, func(o *ExplainOptions) error { ex = o; return nil })
	cmd.SetArgs([]string{"kd203"})
	if err := cmd.Execute(); err != nil || ex == nil || ex.ID != "kd203" || ex.Format != "text" {
		t.Errorf("explain kd203: %v, %+v", err, ex)
	}

	cmd = NewCmdExplain(f, func(*ExplainOptions) error { t.Error("runF called without an ID"); return nil })
	cmd.SetArgs(nil)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if code := exitCode(t, cmd.Execute()); code != cmdutil.ExitUsage {
		t.Errorf("explain without an ID: exit %d", code)
	}
}

func TestMarkdownShape(t *testing.T) {
	cat := []*rules.Rule{
		{ID: "KD101", Title: "a | b", Severity: rules.Warning, Category: "connection", Rationale: "why", Remediation: "fix", Source: "src"},
		{ID: "KD201", Title: "t2", Severity: rules.Info, Category: "bootstrap", Dialects: []config.Dialect{config.Librdkafka}},
	}
	examples := fstest.MapFS{
		"KD101/good.properties":  {Data: []byte("connections.max.idle.ms=300000\n")},
		"KD101/application.yml":  {Data: []byte("x: -1  # want KD101\n")},
		"KD101/bad-x.properties": {Data: []byte("connections.max.idle.ms=-1  # want KD101\n")},
		"KD201/other.properties": {Data: []byte("# nothing expected here\n")},
	}
	var b bytes.Buffer
	if err := Markdown(&b, cat, examples); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	// KD101's example is its bad* case; KD201 has none that expects it.
	if want := "Example (`rules/testdata/KD101/bad-x.properties`):\n\n```properties\nconnections.max.idle.ms=-1  # want KD101\n```\n"; !strings.Contains(s, want) {
		t.Errorf("markdown lacks KD101's example %q:\n%s", want, s)
	}
	if strings.Contains(s, "KD201/other.properties") {
		t.Errorf("KD201 shows a case that does not expect it:\n%s", s)
	}
	for _, want := range []string{
		"| [KD101](#kd101) | warning | connection | a \\| b |",
		"## Connection lifecycle",
		"<a id=\"kd101\"></a>\n\n### KD101: a | b",
		"**Severity:** warning · **Category:** connection · **Dialects:** java, librdkafka, spring",
		"\nwhy\n", "**Fix:** fix", "**Source:** src",
		"## bootstrap.servers", "<a id=\"kd201\"></a>", "**Dialects:** librdkafka",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("markdown lacks %q:\n%s", want, s)
		}
	}
}

// TestDocsUpToDate fails when docs/rules.md is not what the catalog
// generates, so the published rule documentation cannot drift.
func TestDocsUpToDate(t *testing.T) {
	path := filepath.Join("..", "..", "..", filepath.FromSlash(DocsPath))
	committed, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run go generate ./internal/cmd/rules/ to create it", err)
	}
	var b bytes.Buffer
	if err := Markdown(&b, rules.All(), os.DirFS(filepath.Join("..", "..", "..", filepath.FromSlash(TestdataPath)))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(committed), b.String()); diff != "" {
		t.Errorf("%s is stale: run go generate ./internal/cmd/rules/ and commit it (-committed +generated):\n%s", DocsPath, diff)
	}
	for _, r := range rules.All() {
		if !bytes.Contains(committed, []byte(`<a id="`+strings.ToLower(r.ID)+`"></a>`)) {
			t.Errorf("%s has no anchor for %s", DocsPath, r.ID)
		}
	}

	committedGo, err := os.ReadFile("examples_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	src, err := ExamplesSource(rules.All(), os.DirFS(filepath.Join("..", "..", "..", filepath.FromSlash(TestdataPath))))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(committedGo), string(src)); diff != "" {
		t.Errorf("examples_gen.go is stale: run go generate ./internal/cmd/rules/ and commit it (-committed +generated):\n%s", diff)
	}
}

func TestRedactLine(t *testing.T) {
	for in, want := range map[string]string{
		"ssl.key.password=Sup3rSecret  # want KD501\n": "ssl.key.password=" + rules.Redacted + "  # want KD501\n",
		"      ssl.key-password: hunter2\n":            "      ssl.key-password: " + rules.Redacted + "\n",
		`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="pw";  # want KD502`: `sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="` +
			rules.Redacted + `" password="` + rules.Redacted + `";  # want KD502`,
		"connections.max.idle.ms=-1  # want KD101\n": "connections.max.idle.ms=-1  # want KD101\n",
		"# a comment: password=x\n":                  "# a comment: password=x\n",
	} {
		if got := redactLine(in); got != want {
			t.Errorf("redactLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestExamplesShowNoSecret: the examples come from test cases with made-up
// passwords; none is printed.
func TestExamplesShowNoSecret(t *testing.T) {
	for id, ex := range ruleExamples {
		for _, l := range strings.Split(ex.Text, "\n") {
			if m := exampleLine().FindStringSubmatch(l); m != nil && rules.IsSecretKey(m[2]) && m[4] != "" && !strings.Contains(m[4], rules.Redacted) {
				t.Errorf("%s example shows %s's value: %q", id, m[2], l)
			}
		}
	}
}

func TestExplainShowsExample(t *testing.T) {
	ex, ok := ruleExamples["KD101"]
	if !ok {
		t.Fatal("no example for KD101 in examples_gen.go")
	}
	ios, _, out, _ := cmdutil.Test()
	if err := runExplain(&ExplainOptions{IO: ios, Catalog: rules.All, ID: "KD101", Format: "text"}); err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(ex.Text, "\n", 2)[0]
	if !strings.Contains(out.String(), "Example (rules/testdata/KD101/"+ex.File+")\n  "+first) {
		t.Errorf("explain does not show the example %s:\n%s", ex.File, out)
	}
}
