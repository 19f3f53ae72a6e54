package clients

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// DocsPath is where the generated client documentation lives, relative to
// the repository root.
const DocsPath = "docs/clients.md"

// Markdown writes docs/clients.md from the catalog: a table of what each
// library does with idle connections, the behaviour measured against kdiag
// broker, and one section per library with every fact's source.
func Markdown(w io.Writer, libs []*Library) error {
	b := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	p("# Kafka clients: what kdiag knows\n\n")
	p("<!-- Generated from the client catalog (clients/catalog.go) by `go generate ./clients/`. Do not edit. -->\n\n")
	p("`kdiag doctor` names the client library of each Kafka client process and gives its diagnosis and fixes in that\n")
	p("library's terms, from the facts below. Each fact names its source: the repository, the file and the symbol, at the\n")
	p("commit it was read at (kdiag/kdiag is this repository, as it is). The connection and fd bugs of each library by\n")
	p("version, which doctor matches against the version it identifies, are in [known-bugs.md](known-bugs.md), generated\n")
	p("from clients/bugs.go.\n\n")
	p("| library | language | reads idle connections (sees the broker's FIN) | idle reaper, default | keepalive |\n")
	p("| --- | --- | --- | --- | --- |\n")
	readsWords := func(reads bool) string {
		if reads {
			return "yes: closes on the FIN"
		}
		return "no: CLOSE_WAIT stays"
	}
	for _, l := range libs {
		idle := "none"
		if l.IdleSetting != "" {
			idle = "`" + l.IdleSetting + "`, " + l.IdleDefaultString()
		}
		p("| [%s](#%s) | %s | %s | %s | %s |\n", l.Name, l.ID, l.Language, readsWords(l.ReadsIdle), cell(idle), cell(l.Keepalive.Says))
		for _, v := range l.Variants {
			p("| [%s](#%s), `%s=%s` | %s | %s | %s | %s |\n", l.Name, l.ID, v.Setting, v.Value, l.Language, readsWords(v.ReadsIdle), cell(idle), cell(l.Keepalive.Says))
		}
	}
	p("\n## Measured against kdiag's broker\n\n")
	p("What each client leaves after the broker closes its idle connections. The rows measured by `kdiag repro` come\n")
	p("from %s, not typed: `go test ./clients/ -run TestRepro` runs each client (installed by .ci/run) under\n", MeasuredFile)
	p("`kdiag repro -- CMD` against kdiag's embedded cluster on 127.0.0.1, which closes its idle connections every 3 s,\n")
	p("checks the verdict against what the catalog says of the client and against that file, and `-update-measured`\n")
	p("rewrites the file from the verdicts. The other rows say how they were measured.\n\n")
	p("| library | version | setup | CLOSE_WAIT after the broker's idle close | measured by |\n| --- | --- | --- | --- | --- |\n")
	row := func(l *Library, m Measurement) {
		setup := m.Setup
		if setup == "" {
			setup = "defaults"
		}
		how := m.How
		if how == "" {
			how = "TestLive (clients/live_test.go)"
		}
		p("| %s | %s | %s | %s | %s |\n", l.Name, m.Version, cell(setup), cell(m.Result), cell(how))
	}
	for _, l := range libs {
		for _, m := range l.Measured {
			row(l, m)
		}
		for _, v := range l.Variants {
			for _, m := range v.Measured {
				row(l, m)
			}
		}
	}
	for _, l := range libs {
		p("\n<a id=\"%s\"></a>\n## %s (`%s`)\n\n", l.ID, l.Name, l.ID)
		p("- Package: %s; language: %s.", l.Module, l.Language)
		if l.Core != "" {
			p(" Wraps %s.", l.Core)
		}
		p("\n- Recognized by: %s.\n", l.Recognized)
		p("- Reads idle connections: %v. %s. Source: %s.\n", l.ReadsIdle, l.Reads.Says, l.Reads.Source)
		p("- Idle reaper: %s. Source: %s.\n", l.Idle.Says, l.Idle.Source)
		p("- Keepalive: %s. Source: %s.\n", l.Keepalive.Says, l.Keepalive.Source)
		if t := l.Threads; t != nil {
			p("- Threads: %s. Source: %s.\n", t.Fact.Says, t.Fact.Source)
		}
		p("- CLOSE_WAIT means: %s\n", l.CloseWait)
		p("- Fix: %s\n", l.Fix)
		for _, v := range l.Variants {
			p("- With `%s=%s`: reads idle connections: %v. %s. Source: %s.\n", v.Setting, v.Value, v.ReadsIdle, v.Reads.Says, v.Reads.Source)
			p("  - CLOSE_WAIT means: %s\n", v.CloseWait)
			p("  - Fix: %s\n", v.Fix)
		}
		for _, f := range l.Lifecycle {
			at := ""
			if f.Versions != "" {
				at = " (" + f.Versions + ")"
			}
			p("- %s%s: %s. Source: %s", upperFirst(f.Topic), at, f.Says, f.Source)
			for _, a := range f.Also {
				p("; %s", a)
			}
			p(".\n")
		}
		if len(l.Rules) > 0 {
			p("- kdiag lint rules: %s.\n", strings.Join(l.Rules, ", "))
		}
	}
	return b.Flush()
}

// upperFirst capitalizes the first letter of a lifecycle topic.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
