package config

import (
	"fmt"
	"slices"
	"strings"
)

// Spring Boot profiles in one file: a YAML document (or a #--- document of
// application.properties) with spring.config.activate.on-profile (Spring
// Boot 2.4 and later; spring.profiles before) applies only while a profile
// it names is active. Which documents apply is decided when the
// application starts, from spring.profiles.active, so one file holds
// several configurations: the one with no profile active (Spring's
// "default" profile) and one per profile. ForProfiles makes each.
//
// Not evaluated: spring.config.activate.on-cloud-platform (a document with
// it is taken to apply), spring.profiles.include and profile groups (only
// the profiles named are active), and profile-specific files
// (application-prod.yml), which are files of their own.

// DocProfile is the profile condition of one document of a Spring file.
type DocProfile struct {
	// Doc is the document's index (Entry.Doc).
	Doc int32 `json:"doc"`
	// Expr is the condition as written: "prod", "prod & eu", "!dev",
	// "prod,staging" (any of them).
	Expr string `json:"expr"`
	// Pos is where the condition's value is written.
	Pos Pos `json:"pos"`
}

// DefaultProfile is the profile Spring activates when no other is:
// a document with on-profile: default applies only then.
const DefaultProfile = "default"

// addProfileSetting records the profile settings of a Spring item:
// spring.config.activate.on-profile and spring.profiles (a document's
// condition), spring.profiles.active (the profiles the file itself
// activates). It reports whether the item was one of them.
func (m *springMapper) addProfileSetting(it springItem) bool {
	var names []string
	for _, e := range it.elems {
		if e.bracket {
			return false
		}
		names = append(names, uniform(e.name))
	}
	switch strings.Join(names, ".") {
	case "spring.config.activate.onprofile", "spring.profiles":
		dp := DocProfile{Doc: int32(it.doc), Expr: it.value, Pos: it.valuePos}
		if _, err := parseProfileCondition(it.value); err != nil {
			m.f.Problems = append(m.f.Problems, Problem{Pos: it.valuePos,
				Msg: fmt.Sprintf("%s: %v: Spring Boot refuses to start with it", it.raw, err)})
		}
		m.f.DocProfiles = append(m.f.DocProfiles, dp)
		return true
	case "spring.profiles.active":
		m.f.ActiveProfiles = append(m.f.ActiveProfiles, ActiveProfileSetting{Doc: int32(it.doc), Value: it.value, Pos: it.valuePos})
		return true
	}
	return false
}

// ActiveProfileSetting is a spring.profiles.active written in the file.
type ActiveProfileSetting struct {
	Doc   int32  `json:"doc"`
	Value string `json:"value"`
	Pos   Pos    `json:"pos"`
}

// HasProfiles reports whether the file holds documents that apply only in
// some profiles, or activates profiles itself.
func (f *File) HasProfiles() bool { return len(f.DocProfiles) > 0 || len(f.ActiveProfiles) > 0 }

// ProfileNames returns the profiles the file's conditions name, sorted,
// without "default".
func (f *File) ProfileNames() []string {
	var out []string
	for _, dp := range f.DocProfiles {
		c, err := parseProfileCondition(dp.Expr)
		if err != nil {
			continue
		}
		for _, n := range c.names() {
			if n != DefaultProfile && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// OwnActiveProfiles returns the profiles the file activates itself
// (spring.profiles.active in a document without a condition; the last one
// wins), nil when it activates none.
func (f *File) OwnActiveProfiles() []string {
	var last string
	for _, a := range f.ActiveProfiles {
		if f.docCondition(a.Doc) == nil {
			last = a.Value
		}
	}
	return SplitProfiles(last)
}

// SplitProfiles splits a comma list of profile names (spring.profiles.active,
// --profile), dropping blanks.
func SplitProfiles(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (f *File) docCondition(doc int32) *DocProfile {
	for i := range f.DocProfiles {
		if f.DocProfiles[i].Doc == doc {
			return &f.DocProfiles[i]
		}
	}
	return nil
}

// ForProfiles returns the configuration the file gives with the profiles
// active active (none: Spring's default profile): a copy holding the
// entries of the documents without a condition and of those whose
// condition the profiles meet. Its Profile names the evaluation. A
// document whose condition does not parse applies in none.
func (f *File) ForProfiles(active []string) *File {
	set := active
	if len(set) == 0 {
		set = []string{DefaultProfile}
	}
	applies := map[int32]bool{}
	for _, dp := range f.DocProfiles {
		c, err := parseProfileCondition(dp.Expr)
		applies[dp.Doc] = err == nil && c.match(set)
	}
	out := *f
	out.Profile = strings.Join(set, ",")
	out.Entries = make([]Entry, 0, len(f.Entries))
	for _, e := range f.Entries {
		if ok, conditional := applies[e.Doc]; conditional && !ok {
			continue
		}
		out.Entries = append(out.Entries, e)
	}
	return &out
}

// ProfileEvaluations returns the configurations of a Spring file to lint:
// for each element of want (a comma list of profiles active together) the
// file with those profiles active; with want empty, the file with the
// profiles it activates itself (none: the default profile) and the file
// with each profile its conditions name, alone. A file without profiles is
// returned as it is, unless want names some.
func ProfileEvaluations(f *File, want []string) []*File {
	if len(want) == 0 && !f.HasProfiles() {
		return []*File{f}
	}
	var sets [][]string
	if len(want) > 0 {
		for _, w := range want {
			sets = append(sets, SplitProfiles(w))
		}
	} else {
		sets = append(sets, f.OwnActiveProfiles())
		for _, n := range f.ProfileNames() {
			sets = append(sets, []string{n})
		}
	}
	var out []*File
	seen := map[string]bool{}
	for _, s := range sets {
		e := f.ForProfiles(s)
		if seen[e.Profile] {
			continue
		}
		seen[e.Profile] = true
		out = append(out, e)
	}
	return out
}

// profileCondition is a parsed profile expression list: any of exprs.
type profileCondition struct{ exprs []*profileExpr }

func (c profileCondition) match(active []string) bool {
	for _, e := range c.exprs {
		if e.eval(active) {
			return true
		}
	}
	return false
}

func (c profileCondition) names() []string {
	var out []string
	for _, e := range c.exprs {
		out = e.collect(out)
	}
	return out
}

// profileExpr is a node of Spring's profile expression language
// (org.springframework.core.env.ProfilesParser): a name, !x, x & y, x | y.
type profileExpr struct {
	op   byte // 0 name, '!', '&', '|'
	name string
	args []*profileExpr
}

func (e *profileExpr) eval(active []string) bool {
	switch e.op {
	case '!':
		return !e.args[0].eval(active)
	case '&':
		for _, a := range e.args {
			if !a.eval(active) {
				return false
			}
		}
		return true
	case '|':
		for _, a := range e.args {
			if a.eval(active) {
				return true
			}
		}
		return false
	}
	return slices.Contains(active, e.name)
}

func (e *profileExpr) collect(out []string) []string {
	if e.op == 0 {
		return append(out, e.name)
	}
	for _, a := range e.args {
		out = a.collect(out)
	}
	return out
}

// parseProfileCondition parses an on-profile value: a comma list of
// expressions, any of which activates the document (Spring binds the value
// to a String[] and calls Profiles.of on it). Like ProfilesParser it
// refuses & and | mixed without parentheses, and an empty expression.
func parseProfileCondition(s string) (profileCondition, error) {
	var c profileCondition
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			return c, fmt.Errorf("profile condition %q: an empty profile expression", s)
		}
		p := &profileParser{toks: profileTokens(part)}
		e, err := p.expr()
		if err == nil && p.i < len(p.toks) {
			err = fmt.Errorf("unexpected %q", p.toks[p.i])
		}
		if err != nil {
			return c, fmt.Errorf("malformed profile expression %q: %v", strings.TrimSpace(part), err)
		}
		c.exprs = append(c.exprs, e)
	}
	return c, nil
}

// profileTokens splits an expression into operators and names, by bytes
// (the operators are ASCII), so that a name is a substring of s.
func profileTokens(s string) []string {
	var toks []string
	start := -1
	flush := func(i int) {
		if start >= 0 {
			toks = append(toks, s[start:i])
			start = -1
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '(', ')', '&', '|', '!':
			flush(i)
			toks = append(toks, s[i:i+1])
		case ' ', '\t':
			flush(i)
		default:
			if start < 0 {
				start = i
			}
		}
	}
	flush(len(s))
	return toks
}

type profileParser struct {
	toks []string
	i    int
}

// expr reads operands joined by one operator kind.
func (p *profileParser) expr() (*profileExpr, error) {
	first, err := p.unary()
	if err != nil {
		return nil, err
	}
	var op byte
	args := []*profileExpr{first}
	for p.i < len(p.toks) && (p.toks[p.i] == "&" || p.toks[p.i] == "|") {
		o := p.toks[p.i][0]
		if op != 0 && o != op {
			return nil, fmt.Errorf("& and | mixed without parentheses")
		}
		op = o
		p.i++
		next, err := p.unary()
		if err != nil {
			return nil, err
		}
		args = append(args, next)
	}
	if op == 0 {
		return first, nil
	}
	return &profileExpr{op: op, args: args}, nil
}

func (p *profileParser) unary() (*profileExpr, error) {
	if p.i >= len(p.toks) {
		return nil, fmt.Errorf("it ends where a profile name is expected")
	}
	switch t := p.toks[p.i]; t {
	case "!":
		p.i++
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &profileExpr{op: '!', args: []*profileExpr{x}}, nil
	case "(":
		p.i++
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		if p.i >= len(p.toks) || p.toks[p.i] != ")" {
			return nil, fmt.Errorf("a ( without its )")
		}
		p.i++
		return x, nil
	case ")", "&", "|":
		return nil, fmt.Errorf("unexpected %q", t)
	default:
		p.i++
		return &profileExpr{name: t}, nil
	}
}
