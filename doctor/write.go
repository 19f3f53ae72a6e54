package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/netstat"
)

// Writers are the report writers by -o name.
var Writers = map[string]func(io.Writer, *Report) error{
	"text":     WriteText,
	"wide":     WriteWide,
	"json":     WriteJSON,
	"markdown": WriteMarkdown,
}

// WriteJSON writes the report as one JSON document.
func WriteJSON(w io.Writer, r *Report) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

type ew struct {
	w   io.Writer
	err error
}

func (e *ew) f(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

func header(r *Report) string {
	span := ""
	if r.Samples > 1 {
		span = fmt.Sprintf(" over %s", human.Age(r.End.Sub(r.Start)))
	}
	procs := fmt.Sprintf("%d Kafka client processes", len(r.Processes))
	if len(r.Processes) == 1 {
		procs = "1 Kafka client process"
	}
	return fmt.Sprintf("%s, %s%s at %s", procs, human.Plural(r.Samples, "scan"), span,
		r.End.UTC().Format(time.RFC3339))
}

// socketLine writes the socket counts: CLOSE_WAIT, held CLOSE and
// ESTABLISHED first, then the other states.
func socketLine(m map[string]int) string {
	return socketLineOf(m, []string{netstat.CloseWait.String(), netstat.Close.String(), netstat.Established.String()})
}

func socketLineOf(m map[string]int, first []string) string {
	var parts []string
	for _, s := range first {
		parts = append(parts, fmt.Sprintf("%s %d", s, m[s]))
	}
	var rest []string
	for s := range m {
		if !slices.Contains(first, s) {
			rest = append(rest, s)
		}
	}
	slices.Sort(rest)
	for _, s := range rest {
		parts = append(parts, fmt.Sprintf("%s %d", s, m[s]))
	}
	return strings.Join(parts, ", ")
}

func instancesLine(p Process) string {
	if p.Instances == nil {
		if lib := p.Client.Catalog(); lib != nil {
			return fmt.Sprintf("unknown (%s starts no thread per instance)", lib.Name)
		}
		return "unknown"
	}
	lib := p.Client.Catalog()
	return fmt.Sprintf("%d (%s threads, over %s)", *p.Instances, lib.Threads.Full, human.Plural(p.ThreadSamples, "sample"))
}

// noThreads says why a process shows no network thread.
func noThreads(p Process) string {
	lib := p.Client.Catalog()
	switch {
	case p.ThreadSamples == 0:
		return "not read"
	case lib == nil:
		return "none known (client not identified)"
	case lib.Threads == nil:
		return fmt.Sprintf("none named (%s starts no thread that /proc tells apart: %s)", lib.Name, map[string]string{
			"Go": "goroutines", "JavaScript": "one event loop", "Python": "CPython does not name its threads"}[lib.Language])
	}
	return "none running"
}

func clientTitle(p Process) string {
	if !p.Client.Identified() {
		return "client not identified"
	}
	s := p.Client.String()
	if p.Client.Language != "" {
		s += ", " + p.Client.Language
	}
	return s
}

// WriteText writes the report for a terminal, short: per process its
// client, its sockets and each finding as what, the evidence it rests on,
// what ends it and the fix. WriteWide writes everything.
func WriteText(w io.Writer, r *Report) error { return writeText(w, r, false) }

// WriteWide writes the report for a terminal with everything the JSON
// holds: the client's evidence, every network thread, every lint finding,
// every line of evidence, the causes weighed and their sources, the notes.
func WriteWide(w io.Writer, r *Report) error { return writeText(w, r, true) }

func writeText(w io.Writer, r *Report, wide bool) error {
	e := &ew{w: w}
	e.f("kdiag doctor: %s\n", header(r))
	switch {
	case r.Blind && len(r.Processes) == 0:
		e.f("UNKNOWN: %s.\n", r.BlindReason)
	case r.Blind:
		e.f("UNKNOWN: %s; what doctor says below may miss it.\n", r.BlindReason)
	}
	if len(r.Processes) == 0 && !r.Blind {
		e.f("\nNo Kafka client process found (none with a Kafka client library, nor with sockets to the brokers); name one with --pid or --process.\n")
	}
	for _, p := range r.Processes {
		writeProcess(e, p, wide)
	}
	switch {
	case wide:
		for _, n := range r.Notes {
			e.f("note: %s\n", n)
		}
	case len(r.Notes) > 0:
		e.f("\n%s about what the scan could not see: kdiag doctor -o wide shows them.\n", human.Plural(len(r.Notes), "note"))
	}
	return e.err
}

func writeProcess(e *ew, p Process, wide bool) {
	e.f("\npid %d %s: %s\n", p.PID, p.Name, clientTitle(p))
	if wide && len(p.Client.Evidence) > 0 {
		e.f("  evidence: %s\n", strings.Join(p.Client.Evidence, "; "))
	}
	if p.Cmdline != "" {
		e.f("  command: %s\n", truncate(p.Cmdline, 200, wide))
	}
	if wide || p.Instances != nil {
		e.f("  instances: %s\n", instancesLine(p))
	}
	writeThreads(e, p, wide)
	e.f("  sockets: %s\n", socketWords(p))
	if p.OldestCloseWait != nil {
		e.f("  oldest CLOSE_WAIT: %s\n", p.OldestCloseWait.Words())
	}
	if p.FDs != nil {
		e.f("  fds: %s\n", fdWords(p.FDs))
	}
	if wide || p.Verdict != "too-short" {
		e.f("  verdict: %s\n", verdictText(p.Verdict))
	}
	writeConfig(e, p, wide)
	if p.NoFinding != "" {
		e.f("  %s\n", p.NoFinding)
	} else if len(p.Findings) == 0 {
		e.f("  findings: none\n")
	}
	for _, f := range p.Findings {
		writeFinding(e, f, wide)
	}
}

// fdWords writes the census, and the growth toward the limit when there is
// one.
func fdWords(f *FDReport) string {
	s := analyzer.CensusWords(f.Census)
	if f.UntilLimit > 0 {
		s += fmt.Sprintf("; %+.1f/min: EMFILE in ~%s", f.PerMinute, human.Age(f.UntilLimit))
	}
	return s
}

// socketWords counts the sockets, CLOSE_WAIT, held CLOSE and ESTABLISHED
// first, then the other states, and those to brokers.
func socketWords(p Process) string {
	s := strings.Replace(socketLine(p.Sockets), "CLOSE ", "held CLOSE ", 1)
	if len(p.BrokerSockets) > 0 {
		s += "; to brokers: " + socketLineOf(p.BrokerSockets, []string{netstat.CloseWait.String(), netstat.Established.String()})
	}
	return s
}

func writeThreads(e *ew, p Process, wide bool) {
	switch {
	case len(p.NetworkThreads) == 0 && wide:
		e.f("  network threads: %s\n", noThreads(p))
	case len(p.NetworkThreads) == 0:
	default:
		e.f("  network threads:\n")
		for _, t := range p.NetworkThreads {
			e.f("    %d %-16s %s, wchan %s\n", t.TID, t.Name, t.Words(), dash(t.Wchan))
		}
	}
}

func writeConfig(e *ew, p Process, wide bool) {
	if len(p.ConfigFiles) == 0 {
		if wide {
			e.f("  config: none found\n")
		}
		return
	}
	for _, c := range p.ConfigFiles {
		e.f("  config: %s (%s", c.Path, c.How)
		if c.Dialect != "" {
			e.f(", %s", c.Dialect)
		}
		e.f(")")
		switch {
		case c.Error != "":
			e.f(": %s\n", c.Error)
		case len(c.Findings) == 0:
			e.f(": no lint finding\n")
		case !wide:
			e.f(": %s (kdiag lint %s)\n", lintCounts(c.Findings), c.Path)
		default:
			e.f("\n")
		}
		if wide {
			for _, f := range c.Findings {
				e.f("    %s: %s %s %s\n", f.Where, f.Severity, f.Rule, f.Message)
			}
		}
	}
}

// lintCounts writes "KD101 warning, KD203 info": each rule once, worst
// first.
func lintCounts(fs []LintFinding) string {
	rank := map[string]int{"error": 0, "warning": 1, "info": 2}
	sorted := slices.Clone(fs)
	slices.SortStableFunc(sorted, func(x, y LintFinding) int { return rank[x.Severity] - rank[y.Severity] })
	var parts []string
	seen := map[string]bool{}
	for _, f := range sorted {
		if !seen[f.Rule] {
			seen[f.Rule] = true
			parts = append(parts, f.Rule+" "+f.Severity)
		}
	}
	return strings.Join(parts, ", ")
}

func writeFinding(e *ew, f Finding, wide bool) {
	e.f("  %s %s: %s\n", strings.ToUpper(f.Severity.String()), f.ID, f.Title)
	ev := f.KeyEvidence
	if wide || ev == nil {
		ev = f.Evidence
	}
	for _, line := range ev {
		e.f("    - %s\n", line)
	}
	if f.Ends != "" {
		e.f("    ends: %s\n", f.Ends)
	}
	if f.Fix != "" {
		e.f("    fix: %s%s\n", f.Fix, rulesText(f.Rules))
	}
	if !wide {
		return
	}
	for j, c := range f.Causes {
		if j == 0 {
			e.f("    cause: %s\n", c.Title)
		} else {
			e.f("    also possible: %s: %s%s\n", c.ID, c.Text, rulesText(c.Rules))
		}
		for _, ev := range c.Evidence {
			e.f("      - %s\n", ev)
		}
	}
}

// verdictText says a verdict, and for too-short what a verdict needs.
func verdictText(v string) string {
	if v == "too-short" {
		return fmt.Sprintf("too-short (a trend needs %d scans over %s: --duration %s or more)",
			analyzer.DefaultMinSamples, human.Age(analyzer.DefaultMinDuration), human.Age(analyzer.DefaultMinDuration))
	}
	return v
}

// truncate cuts s to n bytes with an ellipsis, unless all is wanted.
func truncate(s string, n int, all bool) string {
	if all || len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func rulesText(r []string) string {
	if len(r) == 0 {
		return ""
	}
	return " [kdiag lint: " + strings.Join(r, ", ") + "]"
}

// mdEscape keeps text from breaking a Markdown table or starting markup.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}

// WriteMarkdown writes the report to paste into a ticket.
func WriteMarkdown(w io.Writer, r *Report) error {
	e := &ew{w: w}
	e.f("## kdiag doctor\n\n%s.\n\n", header(r))
	if r.Blind {
		e.f("**UNKNOWN: %s; what doctor says below may miss it.**\n\n", mdEscape(r.BlindReason))
	}
	if len(r.Processes) > 0 {
		mdTable(e, r.Processes)
	}
	for _, p := range r.Processes {
		mdProcess(e, p)
	}
	for _, n := range r.Notes {
		e.f("> note: %s\n", mdEscape(n))
	}
	return e.err
}

// mdTable writes one row a process: its client, counts, oldest
// CLOSE_WAIT, verdict and findings.
func mdTable(e *ew, ps []Process) {
	e.f("| pid | process | client | instances | CLOSE_WAIT | CLOSE (held) | ESTABLISHED | oldest CLOSE_WAIT | verdict | findings |\n")
	e.f("| ---: | --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- |\n")
	for _, p := range ps {
		inst := "-"
		if p.Instances != nil {
			inst = fmt.Sprint(*p.Instances)
		}
		old := "-"
		if p.OldestCloseWait != nil {
			old = p.OldestCloseWait.String()
		}
		var ids []string
		for _, f := range p.Findings {
			ids = append(ids, f.ID)
		}
		e.f("| %d | %s | %s | %s | %d | %d | %d | %s | %s | %s |\n", p.PID, mdEscape(p.Name), mdEscape(clientTitle(p)), inst,
			p.Sockets[netstat.CloseWait.String()], p.Sockets[netstat.Close.String()], p.Sockets[netstat.Established.String()], old, p.Verdict,
			mdEscape(strings.Join(ids, ", ")))
	}
	e.f("\n")
}

// mdProcess writes one process's section: what doctor read of it, then
// its findings.
func mdProcess(e *ew, p Process) {
	e.f("### pid %d %s: %s\n\n", p.PID, mdEscape(p.Name), mdEscape(clientTitle(p)))
	if len(p.Client.Evidence) > 0 {
		e.f("- Evidence: %s\n", mdEscape(strings.Join(p.Client.Evidence, "; ")))
	}
	if p.Cmdline != "" {
		e.f("- Command: `%s`\n", strings.ReplaceAll(p.Cmdline, "`", "'"))
	}
	e.f("- Instances: %s\n", mdEscape(instancesLine(p)))
	e.f("- Sockets: %s\n", socketLine(p.Sockets))
	if p.FDs != nil {
		e.f("- Fds: %s\n", mdEscape(fdWords(p.FDs)))
	}
	for _, t := range p.NetworkThreads {
		e.f("- Network thread %d `%s`: **%s**, wchan `%s`\n", t.TID, t.Name, t.Words(), dash(t.Wchan))
	}
	for _, c := range p.ConfigFiles {
		e.f("- Config `%s` (%s)", c.Path, mdEscape(c.How))
		if c.Error != "" {
			e.f(": %s", mdEscape(c.Error))
		}
		e.f("\n")
		for _, f := range c.Findings {
			e.f("  - %s: %s **%s** %s\n", mdEscape(f.Where), f.Severity, f.Rule, mdEscape(f.Message))
		}
	}
	if p.OldestCloseWait != nil {
		e.f("- Oldest CLOSE_WAIT: %s\n", mdEscape(p.OldestCloseWait.Words()))
	}
	if p.NoFinding != "" {
		e.f("- %s\n", mdEscape(p.NoFinding))
	}
	e.f("\n")
	for i, f := range p.Findings {
		e.f("%d. **%s** `%s`: %s\n", i+1, strings.ToUpper(f.Severity.String()), f.ID, mdEscape(f.Title))
		for _, ev := range f.Evidence {
			e.f("   - %s\n", mdEscape(ev))
		}
		if f.Ends != "" {
			e.f("   - **Ends:** %s\n", mdEscape(f.Ends))
		}
		if f.Fix != "" {
			e.f("   - **Fix:** %s%s\n", mdEscape(f.Fix), rulesText(f.Rules))
		}
		for j, c := range f.Causes {
			if j > 0 {
				e.f("   - Also possible (`%s`): %s%s\n", c.ID, mdEscape(c.Text), rulesText(c.Rules))
			}
		}
	}
	e.f("\n")
}
