package rules

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/kdiag/kdiag/config"
)

// All returns the rule catalog, sorted by ID. The slice is a copy; the rules
// are shared and must not be modified.
func All() []*Rule {
	return append([]*Rule(nil), catalog...)
}

// Lookup finds a rule by ID (case-insensitive: "kd101" finds KD101).
func Lookup(id string) (*Rule, bool) {
	id = strings.ToUpper(strings.TrimSpace(id))
	i := sort.Search(len(catalog), func(i int) bool { return catalog[i].ID >= id })
	if i < len(catalog) && catalog[i].ID == id {
		return catalog[i], true
	}
	return nil, false
}

// Lint checks every file and returns all findings, sorted by path, line,
// column and rule, with suppressions applied and secrets redacted.
func Lint(files []*config.File, opts Options) []Finding {
	var out []Finding
	for _, f := range files {
		out = append(out, LintFile(f, opts)...)
	}
	sortFindings(out)
	return out
}

// LintFile checks one file: it runs every rule that applies to the file's
// dialect and drops the findings a valid `kdiag:ignore` comment suppresses.
// No finding holds a secret: evidence is built with the value redacted
// (Redact), and rules print values through shown.
func LintFile(f *config.File, opts Options) []Finding {
	if f == nil {
		return nil
	}
	v := newView(f, opts)
	v.knownRule = func(id string) bool { _, ok := Lookup(id); return ok }
	for _, r := range catalog {
		v.ruleIDs = append(v.ruleIDs, r.ID)
	}
	var found []Finding
	for _, r := range catalog {
		if !r.appliesTo(v.dialect) || r.Check == nil {
			continue
		}
		rule := r
		p := &Pass{File: f, Options: opts, view: v}
		p.Report = func(fd Finding) {
			fd.RuleID = rule.ID
			if fd.Severity == 0 {
				fd.Severity = rule.Severity
			}
			if fd.Path == "" {
				fd.Path = f.Path
			}
			if fd.Fix == "" {
				fd.Fix = rule.Remediation
			}
			if fd.Pos.Line == 0 {
				fd.Pos = filePos
			}
			found = append(found, fd)
		}
		rule.Check(p)
	}
	found = applySuppressions(found, parseDirectives(f, v.knownRule))
	sortFindings(found)
	return found
}

// filePos is where findings about the file as a whole (a missing key, a
// default value) are reported: its first line, so that a `kdiag:ignore`
// comment on line 1 can suppress them.
var filePos = config.Pos{Line: 1, Col: 1}

func (r *Rule) appliesTo(d config.Dialect) bool {
	if r.Dialects == nil {
		return true
	}
	for _, x := range r.Dialects {
		if x == d {
			return true
		}
	}
	return false
}

func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line < b.Pos.Line
		}
		if a.Pos.Col != b.Pos.Col {
			return a.Pos.Col < b.Pos.Col
		}
		if a.RuleID != b.RuleID {
			return a.RuleID < b.RuleID
		}
		return a.Message < b.Message
	})
}

// fileView is the engine's reading of one file, shared by its rules.
type fileView struct {
	f       *config.File
	dialect config.Dialect
	version Version
	// brokerIdle is the broker's connections.max.idle.ms (<= 0: never).
	brokerIdle int64
	yaml       bool
	// eff maps each key to the entry that takes effect (highest Rank, then
	// the last one written), with its index in f.Entries.
	eff   map[string]config.Entry
	order map[string]int
	// knownRule and ruleIDs give the KD9xx rules the catalog without the
	// rule values referring to it (which would be an initialization cycle).
	knownRule func(string) bool
	ruleIDs   []string
}

func newView(f *config.File, opts Options) *fileView {
	v := &fileView{f: f, dialect: f.Dialect, brokerIdle: opts.BrokerIdleMS}
	if v.dialect == config.Unknown {
		v.dialect = config.Java
	}
	ver, err := ParseVersion(opts.KafkaVersion)
	if err != nil {
		// Options.Validate reports a bad version; linting goes on with
		// the default rather than checking nothing.
		ver, _ = ParseVersion(DefaultKafkaVersion)
	}
	v.version = ver
	if opts.BrokerIdleMS == 0 {
		v.brokerIdle = DefaultBrokerIdleMS
	}
	ext := strings.ToLower(filepath.Ext(f.Path))
	v.yaml = ext == ".yml" || ext == ".yaml"
	v.eff, v.order = effective(f)
	return v
}

// effective computes which entry of each key takes effect, as
// config.File.Effective does (the highest Rank wins, and among equal ranks
// the entry written last), and also where that entry is in the file, which
// librdkafka's aliases need (the alias written last wins).
func effective(f *config.File) (map[string]config.Entry, map[string]int) {
	eff := map[string]config.Entry{}
	order := map[string]int{}
	for i, e := range f.Entries {
		if e.Key == "" {
			continue
		}
		if prev, ok := eff[e.Key]; ok && prev.Rank > e.Rank {
			continue
		}
		eff[e.Key] = e
		order[e.Key] = i
	}
	return eff, order
}

// get returns the effective entry of key.
func (v *fileView) get(key string) (config.Entry, bool) {
	e, ok := v.eff[key]
	return e, ok
}

// getAny returns the effective entry among several names of one property
// (librdkafka aliases): the one written last wins, as each rd_kafka_conf_set
// overwrites the same property.
func (v *fileView) getAny(keys ...string) (config.Entry, string, bool) {
	best, bestKey, at := config.Entry{}, "", -1
	for _, k := range keys {
		if e, ok := v.eff[k]; ok && v.order[k] > at {
			best, bestKey, at = e, k, v.order[k]
		}
	}
	return best, bestKey, at >= 0
}

// javaValue returns the value that takes effect for a Java key: the one
// written, or else the catalog default for the selected version. set says
// whether the file sets it; ok is false when there is neither.
func (v *fileView) javaValue(key string) (val string, e config.Entry, set, ok bool) {
	if e, found := v.get(key); found {
		return strings.TrimSpace(e.Value), e, true, true
	}
	s, found := JavaSetting(key)
	if !found {
		return "", config.Entry{}, false, false
	}
	d, has := s.Default(v.version)
	return d, config.Entry{}, false, has
}

// libValue is javaValue for librdkafka, over a property's names: those
// given and their aliases in the catalog (linger.ms and
// queue.buffering.max.ms are one property).
func (v *fileView) libValue(keys ...string) (val string, e config.Entry, set, ok bool) {
	keys = withAliases(keys)
	if e, _, found := v.getAny(keys...); found {
		return strings.TrimSpace(e.Value), e, true, true
	}
	for _, k := range keys {
		if s, found := LibrdkafkaSetting(k); found {
			return s.Default, config.Entry{}, false, true
		}
	}
	return "", config.Entry{}, false, false
}

// evidence is the entry as written, its value redacted if secret: built
// from the key and the value, so the value is replaced by position, never
// looked for in other text.
func (v *fileView) evidence(e config.Entry) string {
	val := shown(e)
	if v.yaml {
		return e.RawKey + ": " + val
	}
	return e.RawKey + "=" + val
}

// shown is an entry's value as a finding may print it: Redacted for a
// secret key (by its producer key or as written), the value otherwise.
func shown(e config.Entry) string {
	if IsSecretKey(e.Key) || IsSecretKey(e.RawKey) {
		if isJAASKey(e.Key) {
			return RedactJAAS(e.Value)
		}
		if e.Value == "" {
			return ""
		}
		return Redacted
	}
	return e.Value
}

// name is how a finding names the entry's key: the key as written, and for
// Spring the producer config it maps to.
func name(e config.Entry) string {
	if e.RawKey != "" && e.RawKey != e.Key {
		return fmt.Sprintf("%s (%s)", e.RawKey, e.Key)
	}
	return e.Key
}

// reportValue reports a problem with an entry's value, at the value.
func (p *Pass) reportValue(e config.Entry, sev Severity, msg, fix string) {
	p.Report(Finding{Severity: sev, Message: msg, Pos: e.ValuePos, Key: e.Key,
		Evidence: p.view.evidence(e), Fix: fix})
}

// reportKey reports a problem with an entry's key, at the key.
func (p *Pass) reportKey(e config.Entry, sev Severity, msg, fix string) {
	p.Report(Finding{Severity: sev, Message: msg, Pos: e.KeyPos, Key: e.Key,
		Evidence: p.view.evidence(e), Fix: fix})
}

// reportFile reports a problem of the file as a whole (a missing key, a
// default that does not fit), at its first line.
func (p *Pass) reportFile(key string, sev Severity, msg, fix string) {
	p.Report(Finding{Severity: sev, Message: msg, Pos: filePos, Key: key, Fix: fix})
}

// directive is one `kdiag:ignore` comment.
type directive struct {
	pos     config.Pos
	ids     []string
	unknown []string
	reason  string
	text    string
}

var directiveRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*kdiag:ignore\b(.*)$`) })

// ruleIDRE matches what is meant as a rule ID, also a mistyped one
// (KD1O1), which KD902 then reports as unknown.
var ruleIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[Kk][Dd][0-9A-Za-z]{3}$`) })

// parseDirectives reads the file's `kdiag:ignore ID[,ID...] reason` comments.
func parseDirectives(f *config.File, known func(string) bool) []directive {
	var ds []directive
	for _, c := range f.Comments {
		m := directiveRE().FindStringSubmatch(c.Text)
		if m == nil {
			continue
		}
		d := directive{pos: c.Pos, text: strings.TrimSpace(c.Text)}
		rest := strings.TrimSpace(m[1])
		// IDs come first, separated by commas or spaces; the reason is
		// everything after the last ID.
		for rest != "" {
			tok := rest
			if i := strings.IndexAny(rest, " \t,"); i >= 0 {
				tok = rest[:i]
			}
			if tok == "" {
				rest = strings.TrimLeft(rest, " \t,")
				continue
			}
			if !ruleIDRE().MatchString(tok) {
				break
			}
			id := strings.ToUpper(tok)
			if known(id) {
				d.ids = append(d.ids, id)
			} else {
				d.unknown = append(d.unknown, id)
			}
			rest = strings.TrimLeft(rest[len(tok):], " \t,")
		}
		d.reason = strings.TrimSpace(rest)
		ds = append(ds, d)
	}
	return ds
}

// valid reports whether the directive suppresses anything: it must name at
// least one rule and give a reason.
func (d directive) valid() bool { return len(d.ids) > 0 && d.reason != "" }

// applySuppressions drops findings that a valid directive on the same line or
// the line above names. Findings about suppressions themselves (KD9xx) cannot
// be suppressed.
func applySuppressions(fs []Finding, ds []directive) []Finding {
	if len(ds) == 0 {
		return fs
	}
	out := fs[:0]
	for _, fd := range fs {
		if !strings.HasPrefix(fd.RuleID, "KD9") && suppressed(fd, ds) {
			continue
		}
		out = append(out, fd)
	}
	return out
}

func suppressed(fd Finding, ds []directive) bool {
	for _, d := range ds {
		if !d.valid() || (fd.Pos.Line != d.pos.Line && fd.Pos.Line != d.pos.Line+1) {
			continue
		}
		for _, id := range d.ids {
			if id == fd.RuleID {
				return true
			}
		}
	}
	return false
}

// withAliases adds the librdkafka aliases of each name.
func withAliases(keys []string) []string {
	out := append([]string(nil), keys...)
	has := func(k string) bool {
		for _, x := range out {
			if x == k {
				return true
			}
		}
		return false
	}
	for _, k := range keys {
		s, _ := LibrdkafkaSetting(k)
		for _, o := range LibrdkafkaSettings() {
			if (o.AliasOf == k || o.Name == s.AliasOf || (s.AliasOf != "" && o.AliasOf == s.AliasOf)) && !has(o.Name) {
				out = append(out, o.Name)
			}
		}
	}
	return out
}
