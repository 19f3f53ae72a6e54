package output

import (
	"encoding/json"
	"io"

	"github.com/kdiag/kdiag/rules"
)

// JSONReport is the document WriteJSON writes. Its field names are a stable
// interface for scripts: fields are added, never renamed or removed.
type JSONReport struct {
	// Tool is "kdiag"; Version its version.
	Tool     string        `json:"tool"`
	Version  string        `json:"version"`
	Findings []JSONFinding `json:"findings"`
	// Problems lists the inputs that could not be linted; [] when none.
	Problems []Problem `json:"problems"`
	Summary  Summary   `json:"summary"`
}

// JSONFinding is one finding with its rule's title and documentation link.
type JSONFinding struct {
	Rule     string `json:"rule"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Path     string `json:"path"`
	// Line and Column are 1-based; 0 when the finding concerns the whole file.
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Key      string `json:"key,omitempty"`
	Evidence string `json:"evidence,omitempty"`
	Fix      string `json:"fix,omitempty"`
	Title    string `json:"title,omitempty"`
	Category string `json:"category,omitempty"`
	HelpURI  string `json:"help_uri"`
}

// WriteJSON writes one JSONReport, indented. findings is [] (never null)
// when there are none.
func WriteJSON(w io.Writer, findings []rules.Finding, catalog []*rules.Rule, meta Meta) error {
	fs := prepare(findings)
	byID := index(catalog)
	rep := JSONReport{
		Tool:     "kdiag",
		Version:  meta.version(),
		Findings: make([]JSONFinding, 0, len(fs)),
		Problems: append([]Problem{}, meta.Problems...),
		Summary:  Summarize(fs, meta.Files),
	}
	for _, f := range fs {
		jf := JSONFinding{
			Rule:     f.RuleID,
			Severity: f.Severity.String(),
			Message:  f.Message,
			Path:     f.Path,
			Line:     f.Pos.Line,
			Column:   f.Pos.Col,
			Key:      f.Key,
			Evidence: f.Evidence,
			Fix:      f.Fix,
			HelpURI:  HelpURI(f.RuleID),
		}
		if r := byID[f.RuleID]; r != nil {
			jf.Title, jf.Category = r.Title, r.Category
			if jf.Fix == "" {
				jf.Fix = r.Remediation
			}
		}
		rep.Findings = append(rep.Findings, jf)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // "<stdin>" reads better than "\u003cstdin\u003e"
	return enc.Encode(rep)
}
