package output

import (
	"bufio"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/kdiag/kdiag/rules"
)

// StreamText writes findings compiler style, one per line, so editors and CI
// logs link them to the file:
//
//	app.properties:12:1: warning KD101 connections.max.idle.ms is -1: ...
//	    fix: set connections.max.idle.ms to 540000
//
// Text from the file (paths, keys and values quoted in messages) goes
// through Printable, so a finding stays on its line and no escape sequence
// from a file reaches the terminal. The output ends with a summary line: "3 findings (1 error, 2 warnings) in 2
// files", or "no findings in 5 files". Like golangci-lint, the findings and
// the summary are the command's result and go to w (standard output); only
// diagnostics about the run itself (an unreadable file) go to standard error.
//
// Secrets are masked (scrub) as each finding is written.
func StreamText(w io.Writer, findings iter.Seq[rules.Finding], catalog []*rules.Rule, meta func() Meta) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	byID := index(catalog)
	var c counter
	for f := range findings {
		f = scrub(f)
		c.add(f)
		fmt.Fprintf(bw, "%s: %s %s %s\n", Printable(position(f)), f.Severity, Printable(f.RuleID), Printable(f.Message))
		fix := f.Fix
		if fix == "" {
			if r := byID[f.RuleID]; r != nil {
				fix = r.Remediation
			}
		}
		if fix != "" {
			fmt.Fprintf(bw, "    fix: %s\n", Printable(fix))
		}
	}
	// With nothing linted and inputs that could not be read, there is no
	// summary: "no findings in 0 files" would read as a pass, and the
	// problems are on standard error.
	if m := meta(); m.Files > 0 || len(m.Problems) == 0 || c.s.Findings > 0 {
		fmt.Fprintln(bw, SummaryLine(c.summary(m.Files)))
	}
	return bw.Flush()
}

// position is "path:line:col", leaving out what is unknown (a file-level
// finding has no line).
func position(f rules.Finding) string {
	switch {
	case f.Pos.Line <= 0:
		return f.Path
	case f.Pos.Col <= 0:
		return fmt.Sprintf("%s:%d", f.Path, f.Pos.Line)
	}
	return fmt.Sprintf("%s:%d:%d", f.Path, f.Pos.Line, f.Pos.Col)
}

// SummaryLine renders a summary for people: "3 findings (1 error, 2
// warnings) in 2 files", "no findings in 5 files".
func SummaryLine(s Summary) string {
	if s.Findings == 0 {
		return "no findings in " + plural(s.Files, "file", "files")
	}
	var parts []string
	if s.Errors > 0 {
		parts = append(parts, plural(s.Errors, "error", "errors"))
	}
	if s.Warnings > 0 {
		parts = append(parts, plural(s.Warnings, "warning", "warnings"))
	}
	if s.Infos > 0 {
		parts = append(parts, plural(s.Infos, "info", "info"))
	}
	return fmt.Sprintf("%s (%s) in %s", plural(s.Findings, "finding", "findings"),
		strings.Join(parts, ", "), plural(s.FilesWithFindings, "file", "files"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
