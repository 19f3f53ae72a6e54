package rules

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kdiag/kdiag/config"
)

// The per-rule cases live in testdata/<ID>/, one file per case, with the
// expectation next to the line it concerns:
//
//	connections.max.idle.ms=-1  # want KD101
//
// Java properties have no trailing comments, so the harness removes the
// "# want ..." suffix from each line before parsing and remembers the line.
// A first-line comment "# kdiag-test: kafka-version=3.9 broker-idle-ms=300000"
// sets the options. The dialect comes from the file name: "rdkafka" in it
// means librdkafka, *.yml/*.yaml and application*.properties mean Spring, the
// rest Java.

var wantRE = regexp.MustCompile(`(^|\s+)#\s*want((?:\s+KD\d{3})+)\s*$`)
var optsRE = regexp.MustCompile(`kdiag-test:(.*)$`)

type testCase struct {
	path string
	// src is the file with the want comments removed.
	src  []byte
	want []string // "line:ID", sorted
	// listed are the rule IDs the case's wants name.
	listed  map[string]bool
	opts    Options
	dialect config.Dialect
}

func loadCase(t *testing.T, path string) testCase {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tc := testCase{path: path, listed: map[string]bool{}, opts: DefaultOptions()}
	lines := strings.Split(string(raw), "\n")
	for i, ln := range lines {
		if m := wantRE.FindStringSubmatch(ln); m != nil {
			for _, id := range strings.Fields(m[2]) {
				tc.want = append(tc.want, fmt.Sprintf("%d:%s", i+1, id))
				tc.listed[id] = true
			}
			lines[i] = ln[:len(ln)-len(m[0])]
		}
		if m := optsRE.FindStringSubmatch(lines[i]); m != nil {
			for _, kv := range strings.Fields(m[1]) {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "kafka-version":
					tc.opts.KafkaVersion = v
				case "broker-idle-ms":
					n, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						t.Fatalf("%s: bad broker-idle-ms %q", path, v)
					}
					tc.opts.BrokerIdleMS = n
				default:
					t.Fatalf("%s: unknown kdiag-test option %q", path, k)
				}
			}
		}
	}
	sort.Strings(tc.want)
	tc.src = []byte(strings.Join(lines, "\n"))
	base := strings.ToLower(filepath.Base(path))
	switch {
	case strings.Contains(base, "rdkafka"):
		tc.dialect = config.Librdkafka
	case strings.HasSuffix(base, ".yml"), strings.HasSuffix(base, ".yaml"), strings.HasPrefix(base, "application"):
		tc.dialect = config.Spring
	default:
		tc.dialect = config.Java
	}
	return tc
}

// run lints the case and returns "line:ID" for every finding of the rules
// that matter: the rule under test and those the case lists.
func (tc testCase) run(t *testing.T, rule string) ([]string, []Finding) {
	t.Helper()
	f, err := config.Parse(tc.path, tc.src, tc.dialect)
	if err != nil {
		t.Fatalf("%s: parse: %v", tc.path, err)
	}
	fs := LintFile(f, tc.opts)
	var got []string
	for _, fd := range fs {
		if fd.RuleID == rule || tc.listed[fd.RuleID] {
			got = append(got, fmt.Sprintf("%d:%s", fd.Pos.Line, fd.RuleID))
		}
	}
	sort.Strings(got)
	return got, fs
}

func caseFiles(t *testing.T, id string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", id, "*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestRules runs every testdata case of every rule.
func TestRules(t *testing.T) {
	for _, r := range All() {
		for _, path := range caseFiles(t, r.ID) {
			t.Run(r.ID+"/"+filepath.Base(path), func(t *testing.T) {
				tc := loadCase(t, path)
				got, all := tc.run(t, r.ID)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					var b strings.Builder
					for _, fd := range all {
						fmt.Fprintf(&b, "\n  %d:%d %s %s: %s", fd.Pos.Line, fd.Pos.Col, fd.RuleID, fd.Severity, fd.Message)
					}
					t.Errorf("%s: findings (-want +got):\n%s\nall findings:%s", path, diff, b.String())
				}
			})
		}
	}
}

var idRE = regexp.MustCompile(`^KD\d{3}$`)

// TestCatalog checks every rule value: its ID, its documentation, its order
// in the catalog, and that its testdata has a case that triggers it and one
// that does not.
func TestCatalog(t *testing.T) {
	rules := All()
	if len(rules) == 0 {
		t.Fatal("empty catalog")
	}
	seen := map[string]bool{}
	for i, r := range rules {
		if !idRE.MatchString(r.ID) {
			t.Errorf("rule %q: ID does not match %s", r.ID, idRE)
		}
		if seen[r.ID] {
			t.Errorf("rule %s: duplicate ID", r.ID)
		}
		seen[r.ID] = true
		if i > 0 && rules[i-1].ID >= r.ID {
			t.Errorf("catalog not sorted: %s before %s", rules[i-1].ID, r.ID)
		}
		for field, val := range map[string]string{"Title": r.Title, "Rationale": r.Rationale,
			"Remediation": r.Remediation, "Source": r.Source, "Category": r.Category} {
			if strings.TrimSpace(val) == "" {
				t.Errorf("rule %s: no %s", r.ID, field)
			}
		}
		if r.Severity < Info || r.Severity > Error {
			t.Errorf("rule %s: invalid severity %d", r.ID, r.Severity)
		}
		if r.Check == nil {
			t.Errorf("rule %s: no Check", r.ID)
		}
		if want := map[byte]string{'1': "connection", '2': "bootstrap", '3': "crossfield", '5': "secrets", '9': "suppression"}[r.ID[2]]; want != "" && r.Category != want {
			t.Errorf("rule %s: category %q, want %q for its block", r.ID, r.Category, want)
		}
		if got, ok := Lookup(strings.ToLower(r.ID)); !ok || got != r {
			t.Errorf("Lookup(%q) = %v, %v", strings.ToLower(r.ID), got, ok)
		}
		triggers, quiet := 0, 0
		for _, path := range caseFiles(t, r.ID) {
			if loadCase(t, path).listed[r.ID] {
				triggers++
			} else {
				quiet++
			}
		}
		if triggers == 0 || quiet == 0 {
			t.Errorf("rule %s: testdata/%s has %d triggering and %d quiet cases, want at least one of each", r.ID, r.ID, triggers, quiet)
		}
	}
	if _, ok := Lookup("KD000"); ok {
		t.Error("Lookup(KD000) found a rule")
	}
	// Every testdata folder belongs to a rule.
	dirs, _ := filepath.Glob(filepath.Join("testdata", "KD*"))
	for _, d := range dirs {
		if !seen[filepath.Base(d)] {
			t.Errorf("%s: no such rule", d)
		}
	}
}

// TestSourcesCiteUpstream: every rule's Source names where a user can read
// the fact (the upstream projects' files), never a path of kdiag's checkout
// such as ../shared/reference, which users do not have.
func TestSourcesCiteUpstream(t *testing.T) {
	for _, r := range All() {
		if strings.Contains(r.Source, "../") || strings.Contains(r.Source, "shared/reference") || strings.Contains(r.Source, ".tsv") {
			t.Errorf("%s: Source cites a local path: %s", r.ID, r.Source)
		}
		if !strings.HasPrefix(r.ID, "KD9") && !strings.Contains(r.Source, "apache/kafka") && !strings.Contains(r.Source, "confluentinc/librdkafka") &&
			!strings.Contains(r.Source, "java.util.Properties") && !strings.Contains(r.Source, "Spring") {
			t.Errorf("%s: Source names no upstream project: %s", r.ID, r.Source)
		}
	}
}
