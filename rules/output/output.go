// Package output writes lint findings in kdiag's output formats: text
// (compiler style, for people), json (stable field names, for scripts) and
// sarif (SARIF 2.1.0 in the form GitHub code scanning accepts).
//
// Every writer takes the same flat records (rules.Finding) and the rule
// catalog, so that SARIF can describe each rule it reports and the text and
// json formats can name a rule's title and documentation. Writers are chosen
// from one map, Writers, whose keys build the -o help text.
package output

import (
	"cmp"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/kdiag/kdiag/rules"
)

// DocsURL is the rendered docs/rules.md on the project's repository; a rule's
// section is at DocsURL + "#" + its lower-case ID (HelpURI).
const DocsURL = "https://github.com/kdiag/kdiag/blob/main/docs/rules.md"

// InformationURI is kdiag's home page, written into SARIF tool.driver.
const InformationURI = "https://github.com/kdiag/kdiag"

// HelpURI returns the address of a rule's documentation: docs/rules.md#kd101.
func HelpURI(id string) string { return DocsURL + "#" + strings.ToLower(id) }

// Meta describes the lint run a writer reports on.
type Meta struct {
	// ToolVersion is kdiag's version (SARIF tool.driver.version, json
	// "version"); "" is written as "(devel)".
	ToolVersion string
	// Files is how many files were linted, for the summary.
	Files int
	// BaseDir, when set, is the directory relative paths are relative to
	// (the working directory): SARIF writes an absolute path under it as a
	// path relative to %SRCROOT%, so code scanning can place it in the
	// checkout.
	BaseDir string
	// Problems are the inputs that could not be linted (unreadable,
	// unparsable). Text output leaves them to standard error; json and
	// sarif carry them, so a CI artifact says the run was incomplete.
	Problems []Problem
}

// Problem is an input kdiag could not lint.
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (m Meta) version() string {
	if m.ToolVersion == "" {
		return "(devel)"
	}
	return m.ToolVersion
}

// Writer writes findings to w in one format. catalog is the rule catalog
// (rules.All()); a finding whose rule is not in it is still written, with
// its ID only.
type Writer func(w io.Writer, findings []rules.Finding, catalog []*rules.Rule, meta Meta) error

// Writers are the output formats by their -o name.
var Writers = map[string]Writer{
	"text":  WriteText,
	"json":  WriteJSON,
	"sarif": WriteSARIF,
}

// Formats returns the -o names, sorted.
func Formats() []string {
	out := make([]string, 0, len(Writers))
	for k := range Writers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Summary counts findings by severity.
type Summary struct {
	Findings int `json:"findings"`
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	Infos    int `json:"infos"`
	// Files is how many files were linted; FilesWithFindings how many of
	// them have at least one finding.
	Files             int `json:"files"`
	FilesWithFindings int `json:"files_with_findings"`
}

// Summarize counts findings; files is the number of files linted.
func Summarize(findings []rules.Finding, files int) Summary {
	s := Summary{Findings: len(findings), Files: files}
	paths := map[string]bool{}
	for _, f := range findings {
		switch f.Severity {
		case rules.Error:
			s.Errors++
		case rules.Warning:
			s.Warnings++
		default:
			s.Infos++
		}
		paths[f.Path] = true
	}
	s.FilesWithFindings = len(paths)
	if s.Files < s.FilesWithFindings {
		s.Files = s.FilesWithFindings
	}
	return s
}

// prepare returns the findings every writer writes: secrets scrubbed (a
// second line of defence behind the engine's own redaction, because a leaked
// password in a CI log cannot be taken back) and in a stable order (path,
// line, column, rule), so outputs can be diffed and golden-tested.
func prepare(findings []rules.Finding) []rules.Finding {
	out := make([]rules.Finding, len(findings))
	for i, f := range findings {
		out[i] = scrub(f)
	}
	slices.SortStableFunc(out, func(a, b rules.Finding) int {
		return cmp.Or(
			cmp.Compare(a.Path, b.Path),
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Col, b.Pos.Col),
			cmp.Compare(a.RuleID, b.RuleID),
		)
	})
	return out
}

// index maps rule IDs to catalog entries.
func index(catalog []*rules.Rule) map[string]*rules.Rule {
	m := make(map[string]*rules.Rule, len(catalog))
	for _, r := range catalog {
		if r != nil {
			m[r.ID] = r
		}
	}
	return m
}
