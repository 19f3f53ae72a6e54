package rules

import (
	"fmt"
	"iter"
	"path/filepath"
	"regexp"
	"slices"
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
	return slices.Collect(LintAll(files, opts))
}

// LintAll is Lint as a sequence: the files in path order, each file's
// findings as Findings yields them.
func LintAll(files []*config.File, opts Options) iter.Seq[Finding] {
	sorted := slices.Clone(files)
	slices.SortStableFunc(sorted, func(a, b *config.File) int {
		if a == nil || b == nil {
			return 0
		}
		return strings.Compare(a.Path, b.Path)
	})
	return func(yield func(Finding) bool) {
		for _, f := range sorted {
			for fd := range Findings(f, opts) {
				if !yield(fd) {
					return
				}
			}
		}
	}
}

// LintFile checks one file and returns its findings, sorted (see Findings).
func LintFile(f *config.File, opts Options) []Finding {
	return slices.Collect(Findings(f, opts))
}

// chunkEntries is how many entries a PerEntry rule sees at a time: the
// findings of one chunk are sorted and yielded before the next is checked.
const chunkEntries = 4096

// Findings checks one file and yields its findings sorted by line, column,
// rule and message: it runs every rule that applies to the file's dialect
// and drops the findings a valid `kdiag:ignore` comment suppresses. No
// finding holds a secret: evidence is built with the value redacted
// (Redact), and rules print values through shown.
//
// The rules that look at the file as a whole run first, and their findings
// (few: a file-level note, a cross-field conflict, a duplicate) are held.
// The PerEntry rules then run one chunk of entries at a time; each chunk's
// findings, with the held ones that come before the next chunk's first
// key, are sorted and yielded, so memory holds one chunk's findings, not
// the file's. (When the entries are not in file order, as no parser makes
// them, the whole file is one chunk.)
func Findings(f *config.File, opts Options) iter.Seq[Finding] {
	return func(yield func(Finding) bool) {
		if f == nil {
			return
		}
		d := f.Dialect
		if d == config.Unknown {
			d = config.Java
		}
		// The rules see the values placeholders resolve to; what became
		// of each placeholder is in the view.
		f, phs := resolvePlaceholders(f, d, opts.Env)
		v := newView(f, opts)
		v.setPlaceholders(phs)
		v.knownRule = func(id string) bool { _, ok := Lookup(id); return ok }
		for _, r := range catalog {
			v.ruleIDs = append(v.ruleIDs, r.ID)
		}
		dirs := parseDirectives(f, v.knownRule)
		run := func(r *Rule, entries []config.Entry, into *[]Finding) {
			p := &Pass{File: f, Entries: entries, Options: opts, view: v}
			p.Report = func(fd Finding) {
				fd.RuleID = r.ID
				if fd.Severity == 0 {
					fd.Severity = r.Severity
				}
				if fd.Path == "" {
					fd.Path = f.Path
				}
				if fd.Fix == "" {
					fd.Fix = r.Remediation
				}
				if fd.Pos.Line == 0 {
					fd.Pos = originOf(f)
				}
				if note := v.notes[fd.Pos]; note != "" && fd.RuleID != "KD410" && fd.RuleID != "KD411" {
					fd.Message += " " + note
				}
				if !strings.HasPrefix(fd.RuleID, "KD9") && suppressed(fd, dirs) {
					return
				}
				*into = append(*into, fd)
			}
			r.Check(p)
		}
		var whole []Finding
		for _, r := range catalog {
			if r.appliesTo(v.dialect) && r.Check != nil && !r.PerEntry {
				run(r, f.Entries, &whole)
			}
		}
		sortFindings(whole)
		chunk := chunkEntries
		if !inFileOrder(f.Entries) {
			chunk = max(len(f.Entries), 1)
		}
		var pending []Finding
		for a := 0; ; a += chunk {
			b := min(a+chunk, len(f.Entries))
			for _, r := range catalog {
				if r.appliesTo(v.dialect) && r.Check != nil && r.PerEntry {
					run(r, f.Entries[a:b], &pending)
				}
			}
			last := b >= len(f.Entries)
			var next config.Pos
			if !last {
				next = f.Entries[b].KeyPos
			}
			n := 0
			for n < len(whole) && (last || posBefore(whole[n].Pos, next)) {
				n++
			}
			pending = append(pending, whole[:n]...)
			whole = whole[n:]
			sortFindings(pending)
			out := len(pending)
			if !last {
				out = sort.Search(len(pending), func(i int) bool { return !posBefore(pending[i].Pos, next) })
			}
			for _, fd := range pending[:out] {
				if !yield(fd) {
					return
				}
			}
			pending = append(pending[:0], pending[out:]...)
			if last {
				return
			}
		}
	}
}

// posBefore reports whether p comes before q in the file.
func posBefore(p, q config.Pos) bool {
	return p.Line < q.Line || (p.Line == q.Line && p.Col < q.Col)
}

// inFileOrder reports whether the entries are sorted by KeyPos, as every
// parser of package config writes them (Spring's document by document).
func inFileOrder(es []config.Entry) bool {
	for i := 1; i < len(es); i++ {
		if posBefore(es[i].KeyPos, es[i-1].KeyPos) {
			return false
		}
	}
	return true
}

// originOf is where findings about a configuration as a whole go: its
// Origin (a log block's header line), else filePos.
func originOf(f *config.File) config.Pos {
	if f.Origin.Line > 0 {
		return f.Origin
	}
	return filePos
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
	// eff maps each key to the index in f.Entries of the entry that takes
	// effect (highest Rank, then the last one written). An index, not the
	// entry: a file of a million keys holds a million of these.
	eff keyIndex
	// repeated are the keys written more than once (KD409 looks at them).
	repeated map[string]bool
	// scala are the entries whose keys only the old Scala producer had
	// (config.ScalaProducerOnlyKeys): the file was written for it (KD412).
	scala []config.Entry
	// placeholders says what became of each entry's placeholders, by its
	// KeyPos; notes what a finding at a resolved entry's key or value
	// adds to its message (where the value came from).
	placeholders map[config.Pos]*placeholder
	notes        map[config.Pos]string
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
	want := opts.KafkaVersion
	if f.KafkaVersion != "" {
		// The file says which client wrote it (a log's "Kafka version:").
		if _, err := ParseVersion(f.KafkaVersion); err == nil {
			want = f.KafkaVersion
		}
	}
	ver, err := ParseVersion(want)
	if err != nil {
		// Options.Validate reports a bad version; linting goes on with
		// the default rather than checking nothing.
		ver, _ = ParseVersion(DefaultKafkaVersion)
	}
	v.version = ver
	if opts.BrokerIdleMS == 0 {
		v.brokerIdle = DefaultBrokerIdleMS
	}
	if f.BrokerIdleMS != 0 && !opts.BrokerIdleExplicit {
		// The broker next to the client in the same file (compose).
		v.brokerIdle = f.BrokerIdleMS
	}
	ext := strings.ToLower(filepath.Ext(f.Path))
	v.yaml = ext == ".yml" || ext == ".yaml"
	v.eff, v.repeated = effective(f)
	if v.dialect == config.Java && f.Source == "" {
		for _, e := range f.Entries {
			if slices.Contains(config.ScalaProducerOnlyKeys, e.Key) {
				v.scala = append(v.scala, e)
			}
		}
	}
	return v
}

// effective computes which entry of each key takes effect, as
// config.File.Effective does (the highest Rank wins, and among equal ranks
// the entry written last), as an index into f.Entries, which is also where
// that entry is in the file (librdkafka's aliases need it: the alias written
// last wins). It also returns the keys written more than once.
func effective(f *config.File) (keyIndex, map[string]bool) {
	eff := newKeyIndex(len(f.Entries))
	var repeated map[string]bool
	for i, e := range f.Entries {
		if e.Key == "" {
			continue
		}
		s, ok := eff.find(f.Entries, e.Key)
		if ok {
			if repeated == nil {
				repeated = map[string]bool{}
			}
			repeated[e.Key] = true
			if f.Entries[eff.slots[s]-1].Rank > e.Rank {
				continue
			}
		}
		eff.slots[s] = int32(i) + 1
	}
	return eff, repeated
}

// setPlaceholders records what resolvePlaceholders found, by entry index.
func (v *fileView) setPlaceholders(phs map[int]*placeholder) {
	if len(phs) == 0 {
		return
	}
	v.placeholders = map[config.Pos]*placeholder{}
	v.notes = map[config.Pos]string{}
	for i, ph := range phs {
		e := v.f.Entries[i]
		v.placeholders[e.KeyPos] = ph
		if ph.kind == phResolved && ph.note != "" {
			v.notes[e.KeyPos], v.notes[e.ValuePos] = ph.note, ph.note
		}
	}
}

// placeholderOf returns what became of an entry's placeholders (nil: it
// has none).
func (v *fileView) placeholderOf(e config.Entry) *placeholder {
	if v.placeholders == nil {
		return nil
	}
	return v.placeholders[e.KeyPos]
}

// unknown reports whether an entry's value is not known here: it comes at
// run time, or it is placeholder text nothing resolves (KD410 reports it,
// and no other rule checks it).
func (v *fileView) unknown(e config.Entry) bool {
	ph := v.placeholderOf(e)
	return ph != nil && ph.kind != phResolved
}

// get returns the effective entry of key.
func (v *fileView) get(key string) (config.Entry, bool) {
	i, ok := v.eff.get(v.f.Entries, key)
	if !ok {
		return config.Entry{}, false
	}
	return v.f.Entries[i], true
}

// shadowed reports whether another entry of e's key takes effect instead
// of e (a later line, a higher Spring rank) in every configuration the file
// makes: the client never reads e's value, so no value rule judges it
// (KD409 reports the dead line). In a Spring file with profile documents an
// entry of another document may be the one in force in some profile, so
// only a shadow in e's own document counts there. librdkafka has no dead
// lines: each rd_kafka_conf_set checks its value, so the first bad one
// fails.
func (v *fileView) shadowed(e config.Entry) bool {
	if v.dialect == config.Librdkafka || !v.repeated[e.Key] {
		return false
	}
	w, ok := v.get(e.Key)
	if !ok || w.KeyPos == e.KeyPos {
		return false
	}
	return len(v.f.DocProfiles) == 0 || w.Doc == e.Doc
}

// getAny returns the effective entry among several names of one property
// (librdkafka aliases): the one written last wins, as each rd_kafka_conf_set
// overwrites the same property.
func (v *fileView) getAny(keys ...string) (config.Entry, string, bool) {
	best, bestKey, at := config.Entry{}, "", int32(-1)
	for _, k := range keys {
		if i, ok := v.eff.get(v.f.Entries, k); ok && i > at {
			best, bestKey, at = v.f.Entries[i], k, i
		}
	}
	return best, bestKey, at >= 0
}

// duplicates is config.File.Duplicates for the keys written more than once
// only: the file's other keys are not looked at again.
func (v *fileView) duplicates() map[string][]config.Entry {
	if len(v.repeated) == 0 {
		return nil
	}
	sub := &config.File{}
	for _, e := range v.f.Entries {
		if v.repeated[e.Key] {
			sub.Entries = append(sub.Entries, e)
		}
	}
	return sub.Duplicates()
}

// javaValue returns the value that takes effect for a Java key: the one
// written, or else the catalog default for the selected version. set says
// whether the file sets it; ok is false when there is neither.
func (v *fileView) javaValue(key string) (val string, e config.Entry, set, ok bool) {
	if _, here := javaSettingAt(key, v.version); !here && knownJavaKey(key) {
		// A key of another release: this one ignores it (KD408).
		return "", config.Entry{}, false, false
	}
	if e, found := v.get(key); found {
		if v.unknown(e) {
			return "", e, true, false
		}
		return strings.TrimSpace(e.Value), e, true, true
	}
	if d, ok := v.f.Defaults[key]; ok {
		// What Kafka Connect or Streams sets before the user's settings.
		return d, config.Entry{}, false, true
	}
	s, found := javaSettingAt(key, v.version)
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
		if v.unknown(e) {
			return "", e, true, false
		}
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
	if e.RawValue != "" && val == e.Value {
		val = e.RawValue // as written: 16KB, not the 16384 Spring makes of it
	}
	if v.f.Source == config.SourceLog {
		return e.RawKey + " = " + val // as AbstractConfig.logAll writes it
	}
	if v.yaml {
		return e.RawKey + ": " + val
	}
	return e.RawKey + "=" + val
}

// shown is an entry's value as a finding may print it: Redacted for a
// secret key (by its producer key or as written), the value otherwise.
func shown(e config.Entry) string {
	if IsSecretKey(e.Key) || (e.RawKey != e.Key && IsSecretKey(e.RawKey)) {
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
	p.Report(Finding{Severity: sev, Message: msg, Pos: originOf(p.File), Key: key, Fix: fix})
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

// suppressed reports whether a valid directive on the finding's line or the
// line above names its rule. Findings about suppressions themselves (KD9xx)
// are never suppressed (the caller checks).
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

// frameworkKey reports an entry of a Kafka Streams configuration that is not
// a producer.* setting: a plain producer config there applies to the
// producer, but the others are Streams' own or its consumers' and admin's,
// and no producer rule judges them.
func frameworkKey(f *config.File, e config.Entry) bool {
	if f.Source != config.SourceStreams || strings.HasPrefix(e.RawKey, "producer.") {
		return false
	}
	return !knownJavaKey(e.Key)
}
