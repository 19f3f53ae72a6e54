package rules

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kdiag/kdiag/config"
)

// LintProfiles lints the profile evaluations of one Spring file (the
// configurations config.ProfileEvaluations makes, one per set of active
// profiles) and merges their findings: a finding that every evaluation has
// is reported once, as it is; one that only some have says in which, "(in
// profile prod)" or "(in profiles default, staging)", "default" being
// Spring's name for no profile active. Findings are sorted as Findings
// sorts them.
func LintProfiles(evals []*config.File, opts Options) []Finding {
	if len(evals) == 1 && evals[0].Profile == "" {
		return LintFile(evals[0], opts)
	}
	type key struct {
		rule string
		pos  config.Pos
		msg  string
	}
	var (
		order []key
		first = map[key]Finding{}
		in    = map[key][]string{}
	)
	for _, f := range evals {
		for _, fd := range LintFile(f, opts) {
			k := key{fd.RuleID, fd.Pos, fd.Message}
			if _, ok := first[k]; !ok {
				first[k] = fd
				order = append(order, k)
			}
			if !slices.Contains(in[k], f.Profile) {
				in[k] = append(in[k], f.Profile)
			}
		}
	}
	out := make([]Finding, 0, len(order))
	for _, k := range order {
		fd := first[k]
		if ps := in[k]; len(ps) < len(evals) {
			word := "profile"
			if len(ps) > 1 {
				word = "profiles"
			}
			fd.Message += fmt.Sprintf(" (in %s %s)", word, strings.Join(ps, ", "))
		}
		out = append(out, fd)
	}
	sortFindings(out)
	return out
}
