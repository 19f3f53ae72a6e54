// Package report renders an analyzer.Analysis for people: a self-contained
// HTML page (summary, findings, an inline SVG chart of CLOSE_WAIT and
// ESTABLISHED over time per process; no external asset), Markdown to paste
// into a ticket, and the plain text `kdiag watch` prints on exit.
package report

import (
	"fmt"
	"github.com/kdiag/kdiag/internal/human"
	"io"
	"math"
	"strings"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/netstat"
)

// Input is what a report is made of.
type Input struct {
	// Origin says where the data comes from: "recording watch.jsonl" or
	// "kdiag watch".
	Origin   string
	Analysis *analyzer.Analysis
	// Notes are remarks about the input itself (a recording's cut last
	// line), shown with the scans' notes.
	Notes []string
}

// Formats are the report writers by -o name.
var Formats = map[string]func(io.Writer, Input) error{
	"html":     HTML,
	"markdown": Markdown,
}

// maxCharts bounds the processes charted (most CLOSE_WAIT first): a report
// is read by a person, and the table lists the rest.
const maxCharts = 8

// Text writes the findings as plain text, what `kdiag watch` prints on exit
// (its notes go to stderr: TextNotes).
func Text(w io.Writer, a *analyzer.Analysis) error {
	ew := &errWriter{w: w}
	ew.printf("%s over %s (%s, %s to %s)\n", human.Plural(a.Samples, "sample"), human.Age(a.End.Sub(a.Start)),
		strings.Join(a.Sources, "+"), a.Start.UTC().Format(time.RFC3339), a.End.UTC().Format(time.RFC3339))
	if u := UnseenLine(a); u != "" {
		ew.printf("%s\n", u)
	}
	if len(a.Findings) == 0 {
		ew.printf("No finding: %s\n", noFindingLine(a))
	}
	for i, f := range a.Findings {
		ew.printf("\n%d. [%s] %s\n", i+1, strings.ToUpper(f.Severity.String()), f.Summary)
		for _, d := range f.Details {
			ew.printf("   %s\n", d)
		}
		if len(f.Causes) > 0 {
			ew.printf("   Likely causes:\n")
			for _, c := range f.Causes {
				ew.printf("   - %s%s\n", c.Text, rulesSuffix(c.Rules))
			}
		}
	}
	return ew.err
}

// TextNotes writes the scans' notes, one line each with prefix, for
// standard error: what limited the scans is not a finding.
func TextNotes(w io.Writer, prefix string, a *analyzer.Analysis) error {
	ew := &errWriter{w: w}
	for _, n := range a.Notes {
		ew.printf("%snote: %s (%s)\n", prefix, n.Text, human.Plural(n.Count, "scan"))
	}
	return ew.err
}

// UnseenLine says, first in every report, that kdiag could not attribute
// some CLOSE_WAIT sockets, so that no one reads "no finding" as all clear:
// UNKNOWN when the last sample could not (analyzer.Unseen.Blind), a note
// when only earlier ones could not; "" when it attributed every one.
func UnseenLine(a *analyzer.Analysis) string {
	u := a.Unseen
	if u == nil {
		return ""
	}
	what := fmt.Sprintf("in %d of %s up to %s could not be attributed (%s)",
		u.Samples, human.Plural(a.Samples, "sample"), human.Plural(u.MaxCloseWait, "CLOSE_WAIT socket"), u.Reason)
	if !u.Blind() {
		return what + "; the last sample attributed every one, so nothing unseen lasted."
	}
	return "UNKNOWN: " + what + "; a leak in a process kdiag could not read would not show here."
}

func noFindingLine(a *analyzer.Analysis) string {
	cw, held := 0, 0
	for _, p := range a.Processes {
		cw += p.Last.Get(netstat.CloseWait)
		held += p.Last.Get(netstat.Close)
	}
	if cw+held == 0 {
		return "no CLOSE_WAIT socket at the last sample."
	}
	for _, p := range a.Processes {
		if p.CloseWait.Last > 0 && p.CloseWait.Verdict == analyzer.TooShort {
			// Not "none growing": too few samples to say, which a user
			// watching a pile grow for 20 s must not read as all clear.
			return fmt.Sprintf("%s at the last sample, but the window is too short to tell a leak from a burst: a trend needs %s and %d samples (watch longer, e.g. --duration 2m).",
				leakedText(cw, held), human.Age(analyzer.DefaultMinDuration), analyzer.DefaultMinSamples)
		}
	}
	return fmt.Sprintf("%s at the last sample, none growing or older than the stuck threshold.", leakedText(cw, held))
}

// leakedText counts CLOSE_WAIT and held CLOSE sockets apart: "3 CLOSE_WAIT
// sockets", "3 CLOSE_WAIT + 3 held CLOSE sockets" (the trends and verdicts
// count both as one leak, analyzer.Counts.Leaked; a count says which).
func leakedText(cw, held int) string {
	if held == 0 {
		return human.Plural(cw, "CLOSE_WAIT socket")
	}
	return fmt.Sprintf("%d CLOSE_WAIT + %s", cw, human.Plural(held, "held CLOSE socket"))
}

func rulesSuffix(r []string) string {
	if len(r) == 0 {
		return ""
	}
	return " [kdiag lint: " + strings.Join(r, ", ") + "]"
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// row is one process as the tables show it.
type row struct {
	PID, Name, User, Kafka string
	CWFirst, CWLast, CWMax int
	Verdict, Recent, Rate  string
	Oldest                 string
	Est                    int
	TopRemote              string
	Spark                  string
	Charted                bool
	ChartID                string
	// Held counts the held CLOSE sockets at the last sample; the CW
	// figures count them too (the trend of analyzer.Counts.Leaked).
	Held int
}

func rows(a *analyzer.Analysis) []row {
	var out []row
	for i, p := range a.Processes {
		r := row{
			PID: fmt.Sprint(p.Key.PID), Name: p.Name(), User: p.Process.User, Kafka: p.Process.Kafka,
			CWFirst: p.CloseWait.First, CWLast: p.CloseWait.Last, CWMax: p.CloseWait.Max,
			Verdict: p.CloseWait.Verdict.String(), Recent: p.CloseWaitRecent.Verdict.String(),
			Rate: fmt.Sprintf("%+.1f", p.CloseWait.PerMinute), Oldest: "-",
			Est: p.Established.Last, Held: p.Last.Get(netstat.Close), Spark: sparkline(p.Points, netstat.CloseWait, 40),
			ChartID: fmt.Sprintf("chart-%d", i),
		}
		if _, age, ok := p.Oldest(a); ok {
			r.Oldest = age.String()
		}
		for _, rem := range p.Remotes {
			if rem.Last.Total() > 0 {
				r.TopRemote = rem.Name()
				break
			}
		}
		out = append(out, r)
	}
	return out
}

// sparkline draws a state's counts as block characters, at most width wide
// (each character the max of its bucket, so a spike is never averaged out).
func sparkline(pts []analyzer.Point, s netstat.State, width int) string {
	if len(pts) == 0 {
		return ""
	}
	n := min(width, len(pts))
	vals := make([]int, n)
	peak := 0
	for i, p := range pts {
		b := i * n / len(pts)
		vals[b] = max(vals[b], p.Counts.Get(s))
		peak = max(peak, vals[b])
	}
	blocks := []rune("▁▂▃▄▅▆▇█")
	var sb strings.Builder
	for _, v := range vals {
		i := 0
		if peak > 0 {
			i = int(math.Round(float64(v) / float64(peak) * float64(len(blocks)-1)))
		}
		sb.WriteRune(blocks[i])
	}
	return sb.String()
}
