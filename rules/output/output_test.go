package output

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/config"
	"github.com/kdiag/kdiag/rules"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the writers' output")

// testCatalog is a small catalog built for the writers' tests, shaped like
// the engine's rules (the engine's own catalog is exercised by the lint
// command's tests).
func testCatalog() []*rules.Rule {
	return []*rules.Rule{
		{
			ID: "KD101", Title: "connections.max.idle.ms is negative", Severity: rules.Warning,
			Category:    "connection",
			Rationale:   "A negative connections.max.idle.ms creates no idle-expiry manager: the client never closes an idle connection, the broker does.",
			Remediation: "Remove the setting (default 540000) or set it below the broker's connections.max.idle.ms.",
			Source:      "org.apache.kafka.common.network.Selector (idleExpiryManager)",
		},
		{
			ID: "KD201", Title: "bootstrap.servers has a single entry", Severity: rules.Info,
			Category:    "bootstrap",
			Rationale:   "With that broker down the client cannot start.",
			Remediation: "List three brokers.",
			Source:      "ClientUtils.parseAndValidateAddresses",
		},
		{
			ID: "KD301", Title: "delivery.timeout.ms below linger.ms + request.timeout.ms", Severity: rules.Error,
			Category:    "crossfield",
			Rationale:   "KafkaProducer throws a ConfigException at construction.",
			Remediation: "Raise delivery.timeout.ms to at least linger.ms + request.timeout.ms.",
			Source:      "KafkaProducer.configureDeliveryTimeout",
		},
		{
			ID: "KD701", Title: "Secret written in clear", Severity: rules.Warning,
			Category:    "secrets",
			Rationale:   "A password in a config file ends up in version control and logs.",
			Remediation: "Read it from the environment or a config provider (${env:NAME}).",
			Source:      "ConfigDef.Type.PASSWORD",
		},
	}
}

// testFindings are out of order on purpose: writers sort them.
func testFindings() []rules.Finding {
	return []rules.Finding{
		{RuleID: "KD301", Severity: rules.Error, Path: "conf/producer.properties", Pos: config.Pos{Line: 7, Col: 1},
			Key: "delivery.timeout.ms", Evidence: "delivery.timeout.ms=1000",
			Message: "delivery.timeout.ms (1000) is below linger.ms + request.timeout.ms (30005): the producer will not start",
			Fix:     "set delivery.timeout.ms to at least 30005"},
		{RuleID: "KD101", Severity: rules.Warning, Path: "conf/producer.properties", Pos: config.Pos{Line: 3, Col: 1},
			Key: "connections.max.idle.ms", Evidence: "connections.max.idle.ms=-1",
			Message: "connections.max.idle.ms is -1: idle connections are left for the broker to close (passive close, CLOSE_WAIT)"},
		{RuleID: "KD201", Severity: rules.Info, Path: "app/application.yml", Pos: config.Pos{Line: 2, Col: 24},
			Key: "bootstrap.servers", Evidence: "kafka-1:9092",
			Message: "bootstrap.servers has one entry: with kafka-1:9092 down the client cannot start"},
		{RuleID: "KD701", Severity: rules.Warning, Path: "conf/producer.properties", Pos: config.Pos{Line: 9, Col: 1},
			Key: "ssl.key.password", Evidence: "ssl.key.password=" + rules.Redacted,
			Message: "ssl.key.password is written in clear"},
	}
}

func testMeta() Meta { return Meta{ToolVersion: "v0.0.0-test", Files: 3} }

func write(t *testing.T, format string, fs []rules.Finding, cat []*rules.Rule, meta Meta) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Writers[format](&buf, fs, cat, meta); err != nil {
		t.Fatalf("%s writer: %v", format, err)
	}
	return buf.Bytes()
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./rules/output/ -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got); if the change is intended run go test ./rules/output/ -update:\n%s", name, diff)
	}
}

func TestGolden(t *testing.T) {
	for _, format := range Formats() {
		t.Run(format, func(t *testing.T) {
			golden(t, "findings."+format+".golden", write(t, format, testFindings(), testCatalog(), testMeta()))
			golden(t, "clean."+format+".golden", write(t, format, nil, testCatalog(), testMeta()))
		})
	}
}

func TestFormats(t *testing.T) {
	if diff := cmp.Diff([]string{"json", "sarif", "text"}, Formats()); diff != "" {
		t.Errorf("Formats() (-want +got):\n%s", diff)
	}
}

func TestSummaryLine(t *testing.T) {
	tests := []struct {
		name string
		s    Summary
		want string
	}{
		{"clean", Summary{Files: 5}, "no findings in 5 files"},
		{"clean one", Summary{Files: 1}, "no findings in 1 file"},
		{"mixed", Summary{Findings: 3, Errors: 1, Warnings: 2, Files: 4, FilesWithFindings: 2}, "3 findings (1 error, 2 warnings) in 2 files"},
		{"one info", Summary{Findings: 1, Infos: 1, Files: 1, FilesWithFindings: 1}, "1 finding (1 info) in 1 file"},
	}
	for _, tt := range tests {
		if got := SummaryLine(tt.s); got != tt.want {
			t.Errorf("%s: SummaryLine = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	got := Summarize(testFindings(), 3)
	want := Summary{Findings: 4, Errors: 1, Warnings: 2, Infos: 1, Files: 3, FilesWithFindings: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Summarize (-want +got):\n%s", diff)
	}
}

func TestTextLayout(t *testing.T) {
	out := string(write(t, "text", testFindings(), testCatalog(), testMeta()))
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	// Sorted by path then line: app/ before conf/, line 3 before 7 before 9.
	wantPrefixes := []string{
		"app/application.yml:2:24: info KD201 ",
		"    fix: List three brokers.",
		"conf/producer.properties:3:1: warning KD101 ",
		"    fix: Remove the setting",
		"conf/producer.properties:7:1: error KD301 ",
		"    fix: set delivery.timeout.ms to at least 30005",
		"conf/producer.properties:9:1: warning KD701 ",
		"    fix: Read it from the environment",
		"4 findings (1 error, 2 warnings, 1 info) in 2 files",
	}
	if len(lines) != len(wantPrefixes) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(wantPrefixes), out)
	}
	for i, p := range wantPrefixes {
		if !strings.HasPrefix(lines[i], p) {
			t.Errorf("line %d = %q, want prefix %q", i+1, lines[i], p)
		}
	}
}

func TestTextKeepsFindingsOnOneLine(t *testing.T) {
	fs := []rules.Finding{{RuleID: "KD101", Severity: rules.Warning, Path: "a.yml", Pos: config.Pos{Line: 1, Col: 1},
		Message: "value \"a\nb:1:1: error KD999 forged\" is odd"}}
	out := string(write(t, "text", fs, nil, Meta{Files: 1}))
	if strings.Contains(out, "\nb:1:1:") {
		t.Errorf("a newline in a message started a new finding line:\n%s", out)
	}
}

func TestJSONShape(t *testing.T) {
	var rep map[string]any
	if err := json.Unmarshal(write(t, "json", testFindings(), testCatalog(), testMeta()), &rep); err != nil {
		t.Fatal(err)
	}
	fs := rep["findings"].([]any)
	first := fs[0].(map[string]any)
	for _, k := range []string{"rule", "severity", "message", "path", "line", "column", "key", "evidence", "fix", "title", "help_uri"} {
		if _, ok := first[k]; !ok {
			t.Errorf("finding has no %q field: %v", k, first)
		}
	}
	if got, want := first["help_uri"], "https://github.com/kdiag/kdiag/blob/main/docs/rules.md#kd201"; got != want {
		t.Errorf("help_uri = %v, want %v", got, want)
	}
	sum := rep["summary"].(map[string]any)
	if sum["findings"].(float64) != 4 || sum["errors"].(float64) != 1 {
		t.Errorf("summary = %v", sum)
	}

	// No findings is [] rather than null, so scripts can iterate.
	var clean map[string]any
	if err := json.Unmarshal(write(t, "json", nil, nil, Meta{}), &clean); err != nil {
		t.Fatal(err)
	}
	if _, ok := clean["findings"].([]any); !ok {
		t.Errorf("findings with no findings = %#v, want []", clean["findings"])
	}
}

func compileSARIFSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "sarif-schema-2.1.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	// The schema's formats (uri, uri-reference) are checked too: GitHub
	// rejects a helpUri or artifact URI that does not parse.
	c.AssertFormat()
	const url = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func validateSARIF(t testing.TB, sch *jsonschema.Schema, out []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("SARIF output is not JSON: %v\n%s", err, out)
	}
	return sch.Validate(inst)
}

func TestSARIFSchema(t *testing.T) {
	sch := compileSARIFSchema(t)
	cases := map[string][]rules.Finding{
		"findings": testFindings(),
		"clean":    nil,
		"odd paths": {
			{RuleID: "KD101", Severity: rules.Warning, Path: "<stdin>", Pos: config.Pos{Line: 1, Col: 1}, Message: "m"},
			{RuleID: "KD101", Severity: rules.Warning, Path: "/etc/kafka/producer 1.properties", Pos: config.Pos{Line: 2, Col: 3}, Message: "m"},
			{RuleID: "KD101", Severity: rules.Warning, Path: "dir with space/ü%.properties", Message: "file-level"},
			{RuleID: "KD999", Severity: rules.Info, Path: "a:b.properties", Pos: config.Pos{Line: 4}, Message: "rule not in the catalog"},
		},
	}
	for name, fs := range cases {
		out := write(t, "sarif", fs, testCatalog(), testMeta())
		if err := validateSARIF(t, sch, out); err != nil {
			t.Errorf("%s: SARIF output does not validate against the 2.1.0 schema: %v\n%s", name, err, out)
		}
	}
	withProblems := testMeta()
	withProblems.BaseDir = "/src/repo"
	withProblems.Problems = []Problem{{Path: "/src/repo/conf/locked.properties", Message: "permission denied"}, {Path: "<stdin>", Message: "yaml: line 2: did not find expected node content"}}
	if out := write(t, "sarif", testFindings(), testCatalog(), withProblems); validateSARIF(t, sch, out) != nil {
		t.Errorf("SARIF with tool notifications does not validate: %v\n%s", validateSARIF(t, sch, out), out)
	}

	// The validation can fail: a level SARIF does not know is rejected.
	bad := bytes.Replace(write(t, "sarif", testFindings(), testCatalog(), testMeta()), []byte(`"level": "error"`), []byte(`"level": "fatal"`), 1)
	if err := validateSARIF(t, sch, bad); err == nil {
		t.Error("a result with level \"fatal\" validated; the schema check is not checking")
	}
}

// sarifDoc is the part of a SARIF log GitHub code scanning relies on beyond
// the schema: every result resolves to a rule descriptor and a file region.
type sarifDoc struct {
	Schema  string `json:"$schema"`
	Version string `json:"version"`
	Runs    []struct {
		Tool struct {
			Driver struct {
				Name, Version, InformationURI string
				Rules                         []struct {
					ID                   string                          `json:"id"`
					Name                 string                          `json:"name"`
					HelpURI              string                          `json:"helpUri"`
					ShortDescription     struct{ Text string }           `json:"shortDescription"`
					FullDescription      struct{ Text string }           `json:"fullDescription"`
					Help                 struct{ Text, Markdown string } `json:"help"`
					DefaultConfiguration struct{ Level string }          `json:"defaultConfiguration"`
					Properties           map[string]any                  `json:"properties"`
				} `json:"rules"`
			} `json:"driver"`
		} `json:"tool"`
		Results []struct {
			RuleID    string                `json:"ruleId"`
			RuleIndex *int                  `json:"ruleIndex"`
			Level     string                `json:"level"`
			Message   struct{ Text string } `json:"message"`
			Locations []struct {
				PhysicalLocation struct {
					ArtifactLocation struct {
						URI       string `json:"uri"`
						URIBaseID string `json:"uriBaseId"`
					} `json:"artifactLocation"`
					Region *struct{ StartLine, StartColumn int } `json:"region"`
				} `json:"physicalLocation"`
			} `json:"locations"`
			PartialFingerprints map[string]string `json:"partialFingerprints"`
		} `json:"results"`
	} `json:"runs"`
}

func TestSARIFForGitHub(t *testing.T) {
	var doc sarifDoc
	if err := json.Unmarshal(write(t, "sarif", testFindings(), testCatalog(), testMeta()), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != "2.1.0" || doc.Schema == "" || len(doc.Runs) != 1 {
		t.Fatalf("version %q, $schema %q, %d runs; want 2.1.0, set, 1", doc.Version, doc.Schema, len(doc.Runs))
	}
	run := doc.Runs[0]
	d := run.Tool.Driver
	if d.Name != "kdiag" || d.Version != "v0.0.0-test" || d.InformationURI != InformationURI {
		t.Errorf("driver = %q %q %q", d.Name, d.Version, d.InformationURI)
	}
	var ids []string
	for _, r := range d.Rules {
		ids = append(ids, r.ID)
		if r.HelpURI != DocsURL+"#"+strings.ToLower(r.ID) {
			t.Errorf("%s: helpUri = %q", r.ID, r.HelpURI)
		}
		if r.Name == "" || r.ShortDescription.Text == "" || r.FullDescription.Text == "" || r.Help.Text == "" || r.Help.Markdown == "" {
			t.Errorf("%s: descriptor lacks name, descriptions or help: %+v", r.ID, r)
		}
		_, secSev := r.Properties["security-severity"]
		if secSev != (r.ID == "KD701") {
			t.Errorf("%s: security-severity present = %v; want it only on the secret rule", r.ID, secSev)
		}
	}
	// Every rule of the catalog, in catalog order (results are streamed
	// after the driver, so which rules fire is not known when it is
	// written).
	if diff := cmp.Diff([]string{"KD101", "KD201", "KD301", "KD701"}, ids); diff != "" {
		t.Errorf("driver.rules (-want +got):\n%s", diff)
	}
	levels := map[string]string{"KD101": "warning", "KD201": "note", "KD301": "error", "KD701": "warning"}
	fps := map[string]bool{}
	for _, r := range run.Results {
		if r.RuleIndex == nil || *r.RuleIndex < 0 || *r.RuleIndex >= len(d.Rules) || d.Rules[*r.RuleIndex].ID != r.RuleID {
			t.Errorf("result %s: ruleIndex %d does not point at its rule", r.RuleID, r.RuleIndex)
		}
		if r.Level != levels[r.RuleID] {
			t.Errorf("result %s: level %q, want %q", r.RuleID, r.Level, levels[r.RuleID])
		}
		if len(r.Locations) != 1 {
			t.Fatalf("result %s: %d locations", r.RuleID, len(r.Locations))
		}
		pl := r.Locations[0].PhysicalLocation
		if pl.ArtifactLocation.URIBaseID != "%SRCROOT%" || strings.HasPrefix(pl.ArtifactLocation.URI, "/") {
			t.Errorf("result %s: artifact %+v, want a relative uri against %%SRCROOT%%", r.RuleID, pl.ArtifactLocation)
		}
		if pl.Region == nil || pl.Region.StartLine < 1 || pl.Region.StartColumn < 1 {
			t.Errorf("result %s: region %+v", r.RuleID, pl.Region)
		}
		fp := r.PartialFingerprints[fingerprintKey]
		if fp == "" || fps[fp] {
			t.Errorf("result %s: fingerprint %q empty or repeated", r.RuleID, fp)
		}
		fps[fp] = true
	}
}

func TestSARIFProblemsAndBaseDir(t *testing.T) {
	meta := testMeta()
	meta.BaseDir = "/src/repo"
	meta.Problems = []Problem{{Path: "/src/repo/conf/locked.properties", Message: "permission denied"}}
	fs := []rules.Finding{
		{RuleID: "KD101", Severity: rules.Warning, Path: "/src/repo/conf/a.properties", Pos: config.Pos{Line: 1, Col: 1}, Message: "m"},
		{RuleID: "KD101", Severity: rules.Warning, Path: "/elsewhere/b.properties", Pos: config.Pos{Line: 1, Col: 1}, Message: "m"},
		{RuleID: "KD101", Severity: rules.Warning, Path: "/src/repository/c.properties", Pos: config.Pos{Line: 1, Col: 1}, Message: "m"},
	}
	var doc struct {
		Runs []struct {
			Invocations []struct {
				ExecutionSuccessful        bool
				ToolExecutionNotifications []struct {
					Level   string
					Message struct{ Text string }
				}
			}
			Results []struct {
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI, URIBaseID string }
					}
				}
			}
			ColumnKind string
		}
	}
	if err := json.Unmarshal(write(t, "sarif", fs, testCatalog(), meta), &doc); err != nil {
		t.Fatal(err)
	}
	run := doc.Runs[0]
	inv := run.Invocations[0]
	if inv.ExecutionSuccessful || len(inv.ToolExecutionNotifications) != 1 ||
		inv.ToolExecutionNotifications[0].Level != "error" ||
		!strings.Contains(inv.ToolExecutionNotifications[0].Message.Text, "permission denied") {
		t.Errorf("invocation = %+v", inv)
	}
	var uris []string
	for _, r := range run.Results {
		a := r.Locations[0].PhysicalLocation.ArtifactLocation
		uris = append(uris, a.URIBaseID+" "+a.URI)
	}
	want := []string{" file:///elsewhere/b.properties", "%SRCROOT% conf/a.properties", " file:///src/repository/c.properties"}
	if diff := cmp.Diff(want, uris); diff != "" {
		t.Errorf("artifact URIs (-want +got):\n%s", diff)
	}
	if run.ColumnKind != "unicodeCodePoints" {
		t.Errorf("columnKind = %q", run.ColumnKind)
	}

	var rep JSONReport
	if err := json.Unmarshal(write(t, "json", nil, nil, meta), &rep); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(meta.Problems, rep.Problems); diff != "" {
		t.Errorf("json problems (-want +got):\n%s", diff)
	}
}

// TestSARIFFingerprintIgnoresLine: a finding keeps its identity when lines
// are inserted above it, so code scanning does not close and reopen alerts.
func TestSARIFFingerprintIgnoresLine(t *testing.T) {
	f := testFindings()[1]
	a := fingerprint(f)
	f.Pos.Line += 10
	if b := fingerprint(f); a != b {
		t.Errorf("fingerprint changed with the line: %s, %s", a, b)
	}
	f.Path = "other.properties"
	if c := fingerprint(f); c == a {
		t.Error("fingerprint did not change with the path")
	}
}

// TestSecretsNeverWritten writes findings that still carry secrets (as if
// the engine had missed one) through every writer and checks no secret
// reaches the output. The writers mask by position what has the form of a
// secret: the value of a secret key's evidence, and secret-named
// assignments (password="x") in messages and fixes. A bare value quoted
// elsewhere in a message is not searched for (that is search and replace,
// which garbles text: a secret "pass" in ssl.key.password): the engine never
// writes one (rules.TestSecretsNeverEchoed, FuzzLintFile).
func TestSecretsNeverWritten(t *testing.T) {
	const (
		keyPass  = "hunter2-keypass"
		jaasPass = "s3cr3t-jaas"
		yamlPass = "y4ml-secret"
		barePass = "bare-value-pw"
		oauth    = "oauth-cl1ent-secret"
	)
	fs := []rules.Finding{
		{RuleID: "KD701", Severity: rules.Warning, Path: "p.properties", Pos: config.Pos{Line: 1, Col: 1},
			Key: "ssl.key.password", Evidence: "ssl.key.password=" + keyPass,
			Message: "ssl.key.password=" + keyPass + " is written in clear", Fix: "remove ssl.key.password=" + keyPass},
		{RuleID: "KD701", Severity: rules.Warning, Path: "p.properties", Pos: config.Pos{Line: 2, Col: 1},
			Key:      "sasl.jaas.config",
			Evidence: `sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="` + jaasPass + `";`,
			Message:  `sasl.jaas.config has password="` + jaasPass + `" in clear`},
		{RuleID: "KD701", Severity: rules.Warning, Path: "application.yml", Pos: config.Pos{Line: 3, Col: 5},
			Key: "ssl.keystore.password", Evidence: "password: " + yamlPass, Message: "in clear"},
		{RuleID: "KD701", Severity: rules.Warning, Path: "application.yml", Pos: config.Pos{Line: 4, Col: 5},
			Key: "ssl.truststore.password", Evidence: barePass, Message: "a value in clear"},
		{RuleID: "KD701", Severity: rules.Warning, Path: "rd.conf", Pos: config.Pos{Line: 5, Col: 1},
			Key: "sasl.oauthbearer.client.secret", Evidence: "sasl.oauthbearer.client.secret: " + oauth, Message: "in clear"},
	}
	for _, format := range Formats() {
		out := string(write(t, format, fs, testCatalog(), testMeta()))
		for _, secret := range []string{keyPass, jaasPass, yamlPass, barePass, oauth} {
			if strings.Contains(out, secret) {
				t.Errorf("%s output contains the secret %q:\n%s", format, secret, out)
			}
		}
		// What is not secret stays, so the finding still says where to look
		// (text output has no evidence, so only the key shows there).
		keeps := []string{"ssl.key.password"}
		if format != "text" {
			keeps = append(keeps, "username=", "PlainLoginModule")
		}
		for _, keep := range keeps {
			if !strings.Contains(out, keep) {
				t.Errorf("%s output lost the non-secret %q", format, keep)
			}
		}
	}
}

func TestScrubLeavesOrdinaryFindings(t *testing.T) {
	for _, f := range []rules.Finding{
		{RuleID: "KD101", Key: "connections.max.idle.ms", Evidence: "connections.max.idle.ms=-1",
			Message: "ssl.key.password: not set; connections.max.idle.ms: -1", Fix: "set it to 540000"},
		// A reference is the fix, not a secret.
		{RuleID: "KD501", Key: "ssl.key.password", Evidence: "ssl.key.password=" + rules.Redacted,
			Message: "ssl.key.password holds a secret in clear (value hidden)",
			Fix:     `use ssl.key.password=${env:SSL_KEY_PASSWORD} or password="${env:KAFKA_PASSWORD}"`},
	} {
		if diff := cmp.Diff(f, scrub(f)); diff != "" {
			t.Errorf("scrub changed a finding with no secret (-want +got):\n%s", diff)
		}
	}
}

func TestRuleName(t *testing.T) {
	for title, want := range map[string]string{
		"connections.max.idle.ms is negative": "ConnectionsMaxIdleMsIsNegative",
		"Secret written in clear":             "SecretWrittenInClear",
		"":                                    "",
	} {
		if got := ruleName(title); got != want {
			t.Errorf("ruleName(%q) = %q, want %q", title, got, want)
		}
	}
}

// TestSARIFBaseAndNoParentURIs: with a base directory, %SRCROOT% is given in
// originalUriBaseIds as its file: URI, and a path outside it (../x, or an
// absolute path elsewhere) is an absolute file: URI, never one that starts
// with "../".
func TestSARIFBaseAndNoParentURIs(t *testing.T) {
	fs := []rules.Finding{
		{RuleID: "KD101", Severity: rules.Warning, Path: "conf/p.properties", Pos: config.Pos{Line: 1, Col: 1}, Message: "m"},
		{RuleID: "KD101", Severity: rules.Warning, Path: "../other/p.properties", Pos: config.Pos{Line: 1, Col: 1}, Message: "m"},
		{RuleID: "KD101", Severity: rules.Warning, Path: "/etc/kafka/p.properties", Pos: config.Pos{Line: 1, Col: 1}, Message: "m"},
		{RuleID: "KD101", Severity: rules.Warning, Path: "/src/repo/deploy/p.properties", Pos: config.Pos{Line: 1, Col: 1}, Message: "m"},
	}
	out := write(t, "sarif", fs, testCatalog(), Meta{Files: 4, BaseDir: "/src/repo"})
	var log struct {
		Runs []struct {
			OriginalURIBaseIDs map[string]struct {
				URI string `json:"uri"`
			} `json:"originalUriBaseIds"`
			Results []struct {
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation sarifArtifact `json:"artifactLocation"`
					} `json:"physicalLocation"`
				} `json:"locations"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(out, &log); err != nil {
		t.Fatal(err)
	}
	run := log.Runs[0]
	if got := run.OriginalURIBaseIDs["%SRCROOT%"].URI; got != "file:///src/repo/" {
		t.Errorf("originalUriBaseIds[%%SRCROOT%%] = %q, want file:///src/repo/", got)
	}
	var got []sarifArtifact
	for _, r := range run.Results {
		got = append(got, r.Locations[0].PhysicalLocation.ArtifactLocation)
	}
	// In the findings' (path) order.
	want := []sarifArtifact{
		{URI: "file:///src/other/p.properties"},
		{URI: "file:///etc/kafka/p.properties"},
		{URI: "deploy/p.properties", URIBaseID: "%SRCROOT%"},
		{URI: "conf/p.properties", URIBaseID: "%SRCROOT%"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("artifact locations (-want +got):\n%s", diff)
	}
}

// TestAppendFindingMatchesEncoder: the hand-written encoding of a JSON
// finding is byte for byte what encoding/json writes, odd text included.
func TestAppendFindingMatchesEncoder(t *testing.T) {
	for _, s := range []string{"", "plain", "quote \" backslash \\ tab \t nl \n cr \r", "\x00\x01\x1f\x7f", "<stdin> & é ✓ 😀",
		"\u2028\u2029", "bad \xff\xfe utf-8", "\u0080\u009b"} {
		jf := JSONFinding{Rule: "KD101", Severity: "warning", Message: s, Path: s, Line: 3, Column: 7, Key: s,
			Evidence: s, Fix: s, Title: s, Category: s, HelpURI: HelpURI("KD101")}
		want, err := newMarshaler("    ").marshal(jf)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendFinding(nil, &jf); string(got) != string(want) {
			t.Errorf("%q:\ngot  %s\nwant %s", s, got, want)
		}
	}
}
