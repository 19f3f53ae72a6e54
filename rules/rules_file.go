package rules

import (
	"fmt"
	"strings"
)

// KD9xx: the file itself and kdiag's own suppression comments.

var kd901 = &Rule{
	ID:       "KD901",
	Title:    "kdiag:ignore without a reason or without a rule",
	Severity: Warning,
	Category: "suppression",
	Rationale: "A suppression comment must say which rule it silences and why, so that the next reader can " +
		"judge whether it still holds: `# kdiag:ignore KD101 broker closes idle connections itself`. A " +
		"comment without a reason (or naming no rule) suppresses nothing and is reported, like staticcheck's " +
		"lint:ignore.",
	Remediation: "Write the rule ID and a reason after kdiag:ignore, e.g. `# kdiag:ignore KD203 single DNS name for the cluster`.",
	Source:      "kdiag suppression syntax (rules/engine.go parseDirectives), after staticcheck's //lint:ignore Check reason",
	Check: func(p *Pass) {
		for _, d := range parseDirectives(p.File, p.view.knownRule) {
			switch {
			case len(d.ids) == 0 && len(d.unknown) == 0:
				p.Report(Finding{Pos: d.pos, Message: "kdiag:ignore names no rule: it suppresses nothing", Evidence: d.text})
			case d.reason == "":
				p.Report(Finding{Pos: d.pos, Message: fmt.Sprintf("kdiag:ignore %s gives no reason: it suppresses nothing until it does",
					strings.Join(append(d.ids, d.unknown...), ",")), Evidence: d.text})
			}
		}
	},
}

var kd902 = &Rule{
	ID:       "KD902",
	Title:    "kdiag:ignore names an unknown rule",
	Severity: Warning,
	Category: "suppression",
	Rationale: "A suppression naming a rule that does not exist (a typo, or a rule since renumbered) silences " +
		"nothing, and the finding it was meant for is still reported, or will be when the rule appears.",
	Remediation: "Use an ID from `kdiag rules`.",
	Source:      "kdiag rule catalog (rules.All)",
	Check: func(p *Pass) {
		for _, d := range parseDirectives(p.File, p.view.knownRule) {
			for _, id := range d.unknown {
				msg := fmt.Sprintf("kdiag:ignore names %s, which is not a kdiag rule", id)
				if s := suggestRule(id, p.view.ruleIDs); s != "" {
					msg += fmt.Sprintf(" (did you mean %s?)", s)
				}
				p.Report(Finding{Pos: d.pos, Message: msg, Evidence: d.text})
			}
		}
	},
}

func suggestRule(id string, ids []string) string { return closest(id, ids, 2) }

// SuggestRuleID returns the catalog rule ID closest to id (at most two
// edits away, any case), or "" when none is that close: the did-you-mean of
// an unknown ID in suppressions, --ignore and kdiag rules explain.
func SuggestRuleID(id string) string {
	return closest(strings.ToUpper(strings.TrimSpace(id)), catalogIDs(), 3)
}

func catalogIDs() []string {
	ids := make([]string, 0, len(All()))
	for _, r := range All() {
		ids = append(ids, r.ID)
	}
	return ids
}

// closest returns the candidate with the smallest Damerau distance to word,
// if it is below limit.
func closest(word string, cands []string, limit int) string {
	best, bestD := "", limit
	for _, x := range cands {
		if d := damerau(word, x); d < bestD {
			best, bestD = x, d
		}
	}
	return best
}

var kd903 = &Rule{
	ID:       "KD903",
	Title:    "syntax problem in the file",
	Severity: Error,
	Category: "suppression",
	Rationale: "The parser recovered from a line it could not read (a YAML syntax error, an invalid \\u escape, " +
		"a key without a value where one is needed). The client would read that line differently or not at " +
		"all, so the settings kdiag checked may not be the ones in force. Text the client reads without " +
		"complaint but that looks like a mistake (a line continuation at the end of the file, which " +
		"java.util.Properties drops) is a warning.",
	Remediation: "Fix the line as the message says.",
	Source:      "config package parsers (config.File.Problems)",
	Check: func(p *Pass) {
		for _, pr := range p.File.Problems {
			sev := Severity(0)
			switch {
			case pr.Note:
				sev = Info // kdiag's limit, not the client's problem
			case pr.Warning:
				sev = Warning // the client reads it; the text looks wrong
			}
			p.Report(Finding{Severity: sev, Pos: pr.Pos, Message: pr.Msg})
		}
	},
}
