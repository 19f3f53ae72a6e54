package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/netstat"
)

// Writers are the report writers by -o name.
var Writers = map[string]func(io.Writer, *Report) error{
	"text":     WriteText,
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

// WriteText writes the report for a terminal.
func WriteText(w io.Writer, r *Report) error {
	e := &ew{w: w}
	e.f("kdiag doctor: %s\n", header(r))
	if r.Blind {
		e.f("UNKNOWN: %s; what doctor says below may miss it.\n", r.BlindReason)
	}
	if len(r.Processes) == 0 {
		e.f("\nNo Kafka client process found (none with a Kafka client library, nor with sockets to the brokers); name one with --pid or --process.\n")
	}
	for _, p := range r.Processes {
		e.f("\npid %d %s: %s\n", p.PID, p.Name, clientTitle(p))
		if len(p.Client.Evidence) > 0 {
			e.f("  evidence: %s\n", strings.Join(p.Client.Evidence, "; "))
		}
		if p.Cmdline != "" {
			e.f("  command: %s\n", p.Cmdline)
		}
		e.f("  instances: %s\n", instancesLine(p))
		if len(p.NetworkThreads) == 0 {
			e.f("  network threads: %s\n", noThreads(p))
		} else {
			e.f("  network threads:\n")
			for _, t := range p.NetworkThreads {
				e.f("    %d %-16s %-8s %s, wchan %s\n", t.TID, t.Name, t.State, syscallText(t.Syscall, t.SyscallName), dash(t.Wchan))
			}
		}
		e.f("  sockets: %s\n", socketLine(p.Sockets))
		if len(p.BrokerSockets) > 0 {
			e.f("  to brokers: %s\n", socketLineOf(p.BrokerSockets, []string{netstat.CloseWait.String(), netstat.Established.String()}))
		}
		if p.OldestCloseWait > 0 {
			e.f("  oldest CLOSE_WAIT: %s\n", human.Age(p.OldestCloseWait))
		}
		e.f("  verdict: %s\n", p.Verdict)
		if len(p.ConfigFiles) == 0 {
			e.f("  config: none found\n")
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
			default:
				e.f("\n")
			}
			for _, f := range c.Findings {
				e.f("    %s: %s %s %s\n", f.Where, f.Severity, f.Rule, f.Message)
			}
		}
		if len(p.Findings) == 0 {
			e.f("  findings: none\n")
		}
		for i, f := range p.Findings {
			e.f("  %d. [%s] %s: %s\n", i+1, strings.ToUpper(f.Severity.String()), f.ID, f.Title)
			for _, ev := range f.Evidence {
				e.f("     - %s\n", ev)
			}
			if f.Fix != "" {
				e.f("     fix: %s%s\n", f.Fix, rulesText(f.Rules))
			}
			for j, c := range f.Causes {
				if j == 0 {
					e.f("     cause: %s\n", c.Title)
				} else {
					e.f("     also possible: %s: %s%s\n", c.ID, c.Text, rulesText(c.Rules))
				}
				for _, ev := range c.Evidence {
					e.f("       - %s\n", ev)
				}
			}
		}
	}
	for _, n := range r.Notes {
		e.f("note: %s\n", n)
	}
	return e.err
}

func syscallText(nr int, name string) string {
	switch {
	case nr < 0:
		return "not in a system call"
	case name != "":
		return fmt.Sprintf("in %s (%d)", name, nr)
	}
	return fmt.Sprintf("in system call %d", nr)
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
		e.f("| pid | process | client | instances | CLOSE_WAIT | CLOSE (held) | ESTABLISHED | oldest CLOSE_WAIT | verdict | findings |\n")
		e.f("| ---: | --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- |\n")
		for _, p := range r.Processes {
			inst := "-"
			if p.Instances != nil {
				inst = fmt.Sprint(*p.Instances)
			}
			old := "-"
			if p.OldestCloseWait > 0 {
				old = human.Age(p.OldestCloseWait)
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
	for _, p := range r.Processes {
		e.f("### pid %d %s: %s\n\n", p.PID, mdEscape(p.Name), mdEscape(clientTitle(p)))
		if len(p.Client.Evidence) > 0 {
			e.f("- Evidence: %s\n", mdEscape(strings.Join(p.Client.Evidence, "; ")))
		}
		if p.Cmdline != "" {
			e.f("- Command: `%s`\n", strings.ReplaceAll(p.Cmdline, "`", "'"))
		}
		e.f("- Instances: %s\n", mdEscape(instancesLine(p)))
		e.f("- Sockets: %s\n", socketLine(p.Sockets))
		for _, t := range p.NetworkThreads {
			e.f("- Network thread %d `%s`: **%s**, %s, wchan `%s`\n", t.TID, t.Name, t.State, syscallText(t.Syscall, t.SyscallName), dash(t.Wchan))
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
		e.f("\n")
		for i, f := range p.Findings {
			e.f("%d. **%s** `%s`: %s\n", i+1, strings.ToUpper(f.Severity.String()), f.ID, mdEscape(f.Title))
			for _, ev := range f.Evidence {
				e.f("   - %s\n", mdEscape(ev))
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
	for _, n := range r.Notes {
		e.f("> note: %s\n", mdEscape(n))
	}
	return e.err
}
