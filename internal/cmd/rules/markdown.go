package rules

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/kdiag/kdiag/rules"
)

// DocsPath is where the generated rule documentation lives, relative to the
// repository root; output.DocsURL is its rendered address.
const DocsPath = "docs/rules.md"

// categoryTitles name the catalog's categories in docs/rules.md.
var categoryTitles = map[string]string{
	"connection":  "Connection lifecycle",
	"bootstrap":   "bootstrap.servers",
	"crossfield":  "Settings the Java producer rejects or overrides",
	"type":        "Types and ranges",
	"keys":        "Keys",
	"secrets":     "Secrets",
	"suppression": "Suppressions",
}

// TestdataPath is where each rule's test cases live (rules/testdata/<ID>/),
// relative to the repository root; docs/rules.md shows one of them per rule.
const TestdataPath = "rules/testdata"

// maxExampleLines keeps an example to what a reader takes in at a glance.
const maxExampleLines = 25

// Markdown writes docs/rules.md for cat: an index table, then one section
// per rule under its category, each with the anchor #kd101 that SARIF's
// helpUri and kdiag's other outputs link to. Everything comes from the rule
// values, so the page cannot drift from what kdiag checks. When examples is
// not nil it is the rules' testdata folder (one <ID>/ folder per rule), and
// each rule shows a case that triggers it, with the line its "# want"
// comment marks.
func Markdown(w io.Writer, cat []*rules.Rule, examples fs.FS) error {
	b := bufio.NewWriter(w)
	fmt.Fprintln(b, "# kdiag lint rules")
	fmt.Fprintln(b)
	fmt.Fprintln(b, "<!-- Generated from the rule catalog by `go generate ./internal/cmd/rules/`. Do not edit. -->")
	fmt.Fprintln(b)
	fmt.Fprintf(b, "`kdiag lint` checks Kafka producer configuration with the %d rules below. ", len(cat))
	fmt.Fprintln(b, "`kdiag rules` lists them and `kdiag rules explain ID` prints one.")
	fmt.Fprintln(b)
	fmt.Fprintln(b, "A finding is suppressed by a comment on its line or the line above, which must give a reason:")
	fmt.Fprintln(b)
	fmt.Fprintln(b, "```properties")
	fmt.Fprintln(b, "# kdiag:ignore KD101 the brokers behind this client never close idle connections")
	fmt.Fprintln(b, "connections.max.idle.ms=-1")
	fmt.Fprintln(b, "```")
	fmt.Fprintln(b)
	if examples != nil {
		fmt.Fprintf(b, "Each rule's example is one of its test cases (`%s/<ID>/`); a `# want KD101` comment marks the line the rule reports.\n\n", TestdataPath)
	}
	fmt.Fprintln(b, "| ID | Severity | Category | Title |")
	fmt.Fprintln(b, "| --- | --- | --- | --- |")
	for _, r := range cat {
		fmt.Fprintf(b, "| [%s](#%s) | %s | %s | %s |\n", r.ID, strings.ToLower(r.ID), r.Severity, r.Category, cell(r.Title))
	}

	// Categories in the order their first rule appears in the (ID-sorted)
	// catalog, so the page follows the numbering.
	var order []string
	byCat := map[string][]*rules.Rule{}
	for _, r := range cat {
		if _, seen := byCat[r.Category]; !seen {
			order = append(order, r.Category)
		}
		byCat[r.Category] = append(byCat[r.Category], r)
	}
	for _, c := range order {
		title := categoryTitles[c]
		if title == "" {
			title = c
		}
		fmt.Fprintf(b, "\n## %s\n", title)
		for _, r := range byCat[c] {
			fmt.Fprintf(b, "\n<a id=\"%s\"></a>\n\n### %s: %s\n\n", strings.ToLower(r.ID), r.ID, r.Title)
			fmt.Fprintf(b, "**Severity:** %s · **Category:** %s · **Dialects:** %s\n", r.Severity, r.Category, strings.Join(dialects(r), ", "))
			if r.Rationale != "" {
				fmt.Fprintf(b, "\n%s\n", strings.TrimSpace(r.Rationale))
			}
			if r.Remediation != "" {
				fmt.Fprintf(b, "\n**Fix:** %s\n", strings.TrimSpace(r.Remediation))
			}
			if r.Source != "" {
				fmt.Fprintf(b, "\n**Source:** %s\n", strings.TrimSpace(r.Source))
			}
			if examples != nil {
				name, text, err := example(examples, r.ID)
				if err != nil {
					return err
				}
				if name != "" {
					lang := "properties"
					if ext := path.Ext(name); ext == ".yml" || ext == ".yaml" {
						lang = "yaml"
					}
					fmt.Fprintf(b, "\nExample (`%s/%s/%s`):\n\n```%s\n%s```\n", TestdataPath, r.ID, name, lang, text)
				}
			}
		}
	}
	return b.Flush()
}

// example picks the test case that best shows a rule firing: bad.properties,
// else the first file named bad*, else the first file that expects the rule.
// It returns "" when the rule has no testdata folder.
func example(fsys fs.FS, id string) (name, text string, err error) {
	entries, err := fs.ReadDir(fsys, id)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", nil
		}
		return "", "", err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.SliceStable(names, func(i, j int) bool { return rank(names[i]) < rank(names[j]) })
	for _, n := range names {
		data, err := fs.ReadFile(fsys, path.Join(id, n))
		if err != nil {
			return "", "", err
		}
		if !strings.Contains(string(data), "want "+id) {
			continue
		}
		lines := strings.SplitAfter(string(data), "\n")
		if len(lines) > maxExampleLines {
			lines = append(lines[:maxExampleLines], "...\n")
		}
		text = strings.Join(lines, "")
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		return n, text, nil
	}
	return "", "", nil
}

// rank orders example candidates: bad.properties, bad*, then the rest, each
// group by name.
func rank(name string) string {
	switch {
	case name == "bad.properties":
		return "0"
	case strings.HasPrefix(name, "bad"):
		return "1" + name
	}
	return "2" + name
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
