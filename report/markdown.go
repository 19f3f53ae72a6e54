package report

import (
	"fmt"
	"github.com/kdiag/kdiag/internal/human"
	"io"
	"strings"
	"time"
)

// Markdown writes the report as GitHub-flavoured Markdown for a ticket: the
// summary, the findings, and per process a table row with a sparkline of
// CLOSE_WAIT in place of the chart.
func Markdown(w io.Writer, in Input) error {
	p := newPage(in)
	a := in.Analysis
	ew := &errWriter{w: w}
	ew.printf("## kdiag report\n\n")
	ew.printf("From %s: %s over %s, %s to %s", mdEscape(in.Origin), human.Plural(a.Samples, "sample"), p.Duration,
		a.Start.UTC().Format(time.RFC3339), a.End.UTC().Format(time.RFC3339))
	if p.Sources != "" {
		ew.printf(" (source: %s)", p.Sources)
	}
	ew.printf(".\n\n")
	ew.printf("| | |\n|---|---:|\n")
	ew.printf("| Processes | %d |\n| CLOSE_WAIT at the last sample | %d |\n", len(a.Processes), p.CWLast)
	if p.Held {
		ew.printf("| held CLOSE at the last sample | %d |\n", p.HeldLast)
	}
	ew.printf("| ESTABLISHED at the last sample | %d |\n", p.EstLast)
	ew.printf("| Findings | %d critical, %d warning, %d info |\n\n", p.Counts["critical"], p.Counts["warning"], p.Counts["info"])

	if u := UnseenLine(a); u != "" {
		ew.printf("**%s**\n\n", mdEscape(u))
	}
	ew.printf("### Findings\n\n")
	if len(a.Findings) == 0 {
		ew.printf("No finding: %s\n\n", noFindingLine(a))
	}
	for i, f := range a.Findings {
		ew.printf("%d. **%s**: %s\n", i+1, strings.ToUpper(f.Severity.String()), mdEscape(f.Summary))
		for _, d := range f.Details {
			ew.printf("   - %s\n", mdEscape(d))
		}
		if len(f.Causes) > 0 {
			ew.printf("\n   Likely causes:\n\n")
			for j, c := range f.Causes {
				ew.printf("   %d. %s%s\n", j+1, mdEscape(c.Text), rulesSuffix(c.Rules))
			}
		}
		ew.printf("\n")
	}

	ew.printf("### Processes\n\n")
	if p.Held {
		// The trend counts the held CLOSE sockets too; their own column
		// says how many.
		ew.printf("| pid | process | CLOSE_WAIT + held CLOSE first → last (max) | held CLOSE | verdict | now | rate /min | oldest CLOSE_WAIT | ESTABLISHED | top remote | CLOSE_WAIT over time |\n")
		ew.printf("|---:|---|---:|---:|---|---|---:|---:|---:|---|---|\n")
	} else {
		ew.printf("| pid | process | CLOSE_WAIT first → last (max) | verdict | now | rate /min | oldest CLOSE_WAIT | ESTABLISHED | top remote | CLOSE_WAIT over time |\n")
		ew.printf("|---:|---|---:|---|---|---:|---:|---:|---|---|\n")
	}
	for _, r := range p.Rows {
		held := ""
		if p.Held {
			held = fmt.Sprintf(" %d |", r.Held)
		}
		ew.printf("| %s | %s | %d → %d (%d) |%s %s | %s | %s | %s | %d | %s | `%s` |\n",
			r.PID, mdCell(r.Name), r.CWFirst, r.CWLast, r.CWMax, held, r.Verdict, r.Recent, r.Rate, r.Oldest, r.Est, mdCell(r.TopRemote), r.Spark)
	}
	if len(p.Notes) > 0 {
		ew.printf("\n### Notes\n\n")
		for _, n := range p.Notes {
			ew.printf("- %s\n", mdEscape(n))
		}
	}
	return ew.err
}

// mdEscape keeps text from being read as Markdown markup or raw HTML.
var mdEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "<", "&lt;", ">", "&gt;", "|", `\|`, "#", `\#`,
)

func mdEscape(s string) string { return mdEscaper.Replace(s) }

// mdCell escapes a table cell; a newline would end the row.
func mdCell(s string) string { return strings.ReplaceAll(mdEscape(s), "\n", " ") }
