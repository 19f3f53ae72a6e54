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
	"iter"
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

// Stream writes findings to w in one format as they come: findings is
// read once, in the order given (Lint's order: path, line, column, rule), and
// nothing but a running summary is kept, so a million findings take no more
// memory than one. meta is called once every finding is written, for what is
// known only then (how many files were linted, what could not be read).
// catalog is the rule catalog (rules.All()); a finding whose rule is not in
// it is still written, with its ID only.
type Stream func(w io.Writer, findings iter.Seq[rules.Finding], catalog []*rules.Rule, meta func() Meta) error

// Streams are the output formats by their -o name.
var Streams = map[string]Stream{
	"text":  StreamText,
	"json":  StreamJSON,
	"sarif": StreamSARIF,
}

// Writer writes a slice of findings in one format, in a stable order (path,
// line, column, rule): the findings are sorted, then given to the Stream of
// the same name.
type Writer func(w io.Writer, findings []rules.Finding, catalog []*rules.Rule, meta Meta) error

// Writers are the slice forms of Streams, by -o name.
var Writers = map[string]Writer{
	"text":  sliceWriter(StreamText),
	"json":  sliceWriter(StreamJSON),
	"sarif": sliceWriter(StreamSARIF),
}

func sliceWriter(s Stream) Writer {
	return func(w io.Writer, findings []rules.Finding, catalog []*rules.Rule, meta Meta) error {
		return s(w, slices.Values(sorted(findings)), catalog, func() Meta { return meta })
	}
}

// WriteText, WriteJSON and WriteSARIF write a slice of findings.
var (
	WriteText  = Writers["text"]
	WriteJSON  = Writers["json"]
	WriteSARIF = Writers["sarif"]
)

// Formats returns the -o names, sorted.
func Formats() []string {
	out := make([]string, 0, len(Streams))
	for k := range Streams {
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
	var c counter
	for _, f := range findings {
		c.add(f)
	}
	return c.summary(files)
}

// counter keeps a Summary's counts while findings stream by.
type counter struct {
	s     Summary
	paths map[string]bool
}

func (c *counter) add(f rules.Finding) {
	c.s.Findings++
	switch f.Severity {
	case rules.Error:
		c.s.Errors++
	case rules.Warning:
		c.s.Warnings++
	default:
		c.s.Infos++
	}
	if c.paths == nil {
		c.paths = map[string]bool{}
	}
	c.paths[f.Path] = true
}

func (c *counter) summary(files int) Summary {
	s := c.s
	s.Files = files
	s.FilesWithFindings = len(c.paths)
	if s.Files < s.FilesWithFindings {
		s.Files = s.FilesWithFindings
	}
	return s
}

// sorted returns a sorted copy of findings (path, line, column, rule).
func sorted(findings []rules.Finding) []rules.Finding {
	out := slices.Clone(findings)
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
