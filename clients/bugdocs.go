package clients

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// BugDocsPath is where the generated known-bug documentation lives,
// relative to the repository root.
const BugDocsPath = "docs/known-bugs.md"

// BugsMarkdown writes docs/known-bugs.md from the known-bug catalog: a
// table of every entry, the symptoms, and one section per entry with its
// range, fix, symptom and sources.
func BugsMarkdown(w io.Writer, bugs []KnownBug) error {
	b := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	p("# Known connection and fd bugs, by library version\n\n")
	p("<!-- Generated from the known-bug catalog (clients/bugs.go) by `go generate ./clients/`. Do not edit. -->\n\n")
	p("The connection and file-descriptor bugs of each Kafka client library that kdiag can match against the version it\n")
	p("identifies (`clients.BugsFor(library, version)`, with the versions as [docs/clients.md](clients.md) says each\n")
	p("library is recognized). Each entry was verified at its source: the fixing commit read in the library's repository,\n")
	p("and the first release tag (not a pre-release) that contains it. A version that cannot be placed against a range (it\n")
	p("does not parse, it is a pre-release of a bound, a Go pseudo-version that may hold the fix, a Confluent build outside\n")
	p("the known mapping) matches nothing: the catalog does not guess. librdkafka's entries apply to the bindings that load\n")
	p("it (kcat, confluent-kafka-python, node-rdkafka), matched by librdkafka's own version.\n\n")
	p("| ID | library | affected | first fixed | fixing commit | symptom |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, k := range bugs {
		c, _ := k.FixCommit()
		p("| [%s](#%s) | %s | %s | %s | [%s](%s) | %s |\n", k.ID, strings.ToLower(k.ID), k.Library, cell(k.Range()), k.Fixed, c.String(), c.URL(), k.Symptom)
	}
	p("\n## Symptoms\n\nWhat each bug leaves on a host, in the terms of kdiag's output.\n\n")
	for _, s := range Symptoms() {
		p("- `%s`: %s.\n", s, s.Describe())
	}
	for _, k := range bugs {
		p("\n<a id=\"%s\"></a>\n## %s: %s\n\n", strings.ToLower(k.ID), k.ID, k.Title)
		p("- Library: %s.\n", k.Library)
		p("- Affected: %s. %s.\n", k.Range(), upperFirst(k.Affected.Basis))
		c, _ := k.FixCommit()
		p("- Fixed in %s, by commit %s (%s).\n", k.Fixed, c.ID, k.FixDate.Format("2006-01-02"))
		p("- Symptom `%s`: %s.\n", k.Symptom, k.SymptomWords)
		p("- Sources:\n")
		for _, r := range k.Sources {
			fix := ""
			if r.Fix {
				fix = " (fix)"
			}
			p("  - %s [%s](%s)%s: %s.\n", r.Kind, r.String(), r.URL(), fix, r.Says)
		}
		if k.Notes != "" {
			p("- Notes: %s\n", k.Notes)
		}
	}
	return b.Flush()
}
