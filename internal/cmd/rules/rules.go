// Package rules implements `kdiag rules` (the lint rule catalog) and `kdiag
// rules explain ID`, and generates docs/rules.md from the same catalog.
package rules

//go:generate go run ./gendocs -out ../../../docs/rules.md -testdata ../../../rules/testdata -examples examples_gen.go

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/kdiag/kdiag/config"
	"github.com/kdiag/kdiag/internal/cmdutil"
	"github.com/kdiag/kdiag/rules"
	"github.com/kdiag/kdiag/rules/output"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"
)

// RulesOptions are kdiag rules' parsed flags and dependencies.
type RulesOptions struct {
	IO *cmdutil.IOStreams
	// Catalog returns the rules to show; rules.All unless a test says.
	Catalog func() []*rules.Rule
	Format  string
}

// ExplainOptions are kdiag rules explain's.
type ExplainOptions struct {
	IO      *cmdutil.IOStreams
	Catalog func() []*rules.Rule
	ID      string
	Format  string
}

// listWriters are the formats of the rule list, by -o name.
var listWriters = map[string]func(io.Writer, []*rules.Rule) error{
	"table": writeTable,
	"json":  writeJSON,
}

// explainWriters are the formats of one rule's documentation.
var explainWriters = map[string]func(io.Writer, *rules.Rule) error{
	"text": writeExplain,
	"json": func(w io.Writer, r *rules.Rule) error { return encode(w, doc(r)) },
}

// NewCmdRules returns `kdiag rules` with its explain subcommand. runF, when
// set, receives the parsed options instead of running.
func NewCmdRules(f *cmdutil.Factory, runF func(*RulesOptions) error) *cobra.Command {
	opts := &RulesOptions{IO: f.IO, Catalog: rules.All}
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "List the rules kdiag lint checks",
		Long: `List the rules kdiag lint checks: ID, severity, category and title.
'kdiag rules explain ID' prints one rule's full documentation; docs/rules.md
holds them all, generated from the same catalog.`,
		Example: `  kdiag rules
  kdiag rules -o json | jq -r '.[] | select(.severity == "error") | .id'
  kdiag rules explain KD101`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runRules(opts)
		},
	}
	cmdutil.FormatFlag(cmd.Flags(), &opts.Format, "table", cmdutil.Keys(listWriters))
	cmd.AddCommand(NewCmdExplain(f, nil))
	return cmd
}

// NewCmdExplain returns `kdiag rules explain ID`.
func NewCmdExplain(f *cmdutil.Factory, runF func(*ExplainOptions) error) *cobra.Command {
	opts := &ExplainOptions{IO: f.IO, Catalog: rules.All}
	cmd := &cobra.Command{
		Use:   "explain ID",
		Short: "Print one rule's documentation",
		Long: `Print one lint rule's documentation: title, severity, what it checks and why,
how to fix it, and the source of the fact it rests on. IDs are case-insensitive.`,
		Example: `  kdiag rules explain KD101
  kdiag rules explain kd101 -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.UsageErrorf("rules explain: want one rule ID, got %d (see 'kdiag rules' for the IDs)", len(args))
			}
			opts.ID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runExplain(opts)
		},
	}
	cmdutil.FormatFlag(cmd.Flags(), &opts.Format, "text", cmdutil.Keys(explainWriters))
	return cmd
}

func runRules(opts *RulesOptions) error {
	cat := opts.Catalog()
	if err := cmdutil.CheckFormat(opts.Format, cmdutil.Keys(listWriters)); err != nil {
		return err
	}
	return listWriters[opts.Format](opts.IO.Out, cat)
}

func runExplain(opts *ExplainOptions) error {
	if err := cmdutil.CheckFormat(opts.Format, cmdutil.Keys(explainWriters)); err != nil {
		return err
	}
	cat := opts.Catalog()
	r := find(cat, opts.ID)
	if r == nil {
		return cmdutil.UsageErrorf("rules explain: unknown rule %q%s (see 'kdiag rules')", opts.ID, DidYouMean(opts.ID))
	}
	return explainWriters[opts.Format](opts.IO.Out, r)
}

// find looks an ID up in cat, ignoring case.
func find(cat []*rules.Rule, id string) *rules.Rule {
	id = strings.ToUpper(strings.TrimSpace(id))
	for _, r := range cat {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// writeTable prints the catalog as a borderless table, kubectl style, so it
// reads well in a terminal and greps well in a pipe.
func writeTable(w io.Writer, cat []*rules.Rule) error {
	var buf bytes.Buffer
	t := tablewriter.NewTable(&buf,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders:  tw.BorderNone,
			Symbols:  tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{Separators: tw.SeparatorsNone, Lines: tw.LinesNone},
		})),
		tablewriter.WithConfig(tablewriter.Config{
			Header: tw.CellConfig{
				Alignment:  tw.CellAlignment{Global: tw.AlignLeft},
				Formatting: tw.CellFormatting{AutoFormat: tw.On},
				Padding:    tw.CellPadding{Global: tw.Padding{Right: "  ", Overwrite: true}},
			},
			Row: tw.CellConfig{
				// A title is never wrapped: one rule, one line.
				Alignment:  tw.CellAlignment{Global: tw.AlignLeft},
				Formatting: tw.CellFormatting{AutoWrap: tw.WrapNone},
				Padding:    tw.CellPadding{Global: tw.Padding{Right: "  ", Overwrite: true}},
			},
		}),
	)
	t.Header("ID", "Severity", "Category", "Title")
	for _, r := range cat {
		if err := t.Append(r.ID, r.Severity.String(), r.Category, r.Title); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	// The last column's padding would leave trailing blanks on every line.
	var out strings.Builder
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line == "" {
			continue
		}
		out.WriteString(strings.TrimRight(line, " \n"))
		out.WriteString("\n")
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// RuleDoc is a rule as `kdiag rules -o json` and `explain -o json` write it;
// its field names are stable.
type RuleDoc struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Severity    string   `json:"severity"`
	Category    string   `json:"category"`
	Rationale   string   `json:"rationale"`
	Remediation string   `json:"remediation"`
	Source      string   `json:"source"`
	Dialects    []string `json:"dialects"`
	HelpURI     string   `json:"help_uri"`
}

func doc(r *rules.Rule) RuleDoc {
	return RuleDoc{
		ID: r.ID, Title: r.Title, Severity: r.Severity.String(), Category: r.Category,
		Rationale: r.Rationale, Remediation: r.Remediation, Source: r.Source,
		Dialects: dialects(r), HelpURI: output.HelpURI(r.ID),
	}
}

// dialects names the dialects a rule applies to; every one when the rule
// does not say.
func dialects(r *rules.Rule) []string {
	ds := r.Dialects
	if ds == nil {
		ds = []config.Dialect{config.Java, config.Librdkafka, config.Spring}
	}
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.String()
	}
	return out
}

func writeJSON(w io.Writer, cat []*rules.Rule) error {
	docs := make([]RuleDoc, 0, len(cat))
	for _, r := range cat {
		docs = append(docs, doc(r))
	}
	return encode(w, docs)
}

func encode(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeExplain prints one rule for a terminal.
func writeExplain(w io.Writer, r *rules.Rule) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n\n", r.ID, r.Title)
	fmt.Fprintf(&b, "Severity:  %s\nCategory:  %s\nDialects:  %s\n", r.Severity, r.Category, strings.Join(dialects(r), ", "))
	section := func(name, text string) {
		if text != "" {
			fmt.Fprintf(&b, "\n%s\n%s\n", name, indent(text))
		}
	}
	section("Why", r.Rationale)
	section("Fix", r.Remediation)
	section("Source", r.Source)
	if ex, ok := ruleExamples[r.ID]; ok {
		fmt.Fprintf(&b, "\nExample (rules/testdata/%s/%s)\n", r.ID, ex.File)
		for _, l := range strings.SplitAfter(strings.TrimRight(ex.Text, "\n")+"\n", "\n") {
			if l != "" {
				b.WriteString("  " + l)
			}
		}
	}
	section("Suppress", fmt.Sprintf("# kdiag:ignore %s <reason>   (on the line or the line above)", r.ID))
	fmt.Fprintf(&b, "\nDocumentation: %s\n", output.HelpURI(r.ID))
	_, err := io.WriteString(w, b.String())
	return err
}

// indent wraps s at 78 columns, indented by two spaces.
func indent(s string) string {
	var out []string
	for _, para := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			if line != "" && len(line)+1+len(word) > 76 {
				out = append(out, "  "+line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += word
		}
		out = append(out, "  "+line)
	}
	return strings.Join(out, "\n")
}

// DidYouMean returns ", did you mean KD101?" for the catalog ID closest to
// id (at most two edits away), or "" when none is close.
func DidYouMean(id string) string {
	if s := rules.SuggestRuleID(id); s != "" {
		return fmt.Sprintf(", did you mean %s?", s)
	}
	return ""
}
