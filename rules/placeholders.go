package rules

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/kdiag/kdiag/config"
)

// Placeholders: values that something fills in after the file is written.
//
//   - Kafka config providers (Java client): ${provider:[path:]key}, matched by
//     ConfigTransformer.DEFAULT_PATTERN and resolved in the AbstractConfig
//     constructor, before any value is parsed, for every provider that
//     config.providers lists with a config.providers.<name>.class
//     (apache/kafka clients/.../common/config/AbstractConfig.java
//     resolveConfigVariables, instantiateConfigProviders). A variable of a
//     provider that is not declared so is left as written
//     (ConfigTransformer.replace keeps matcher.group(0)), and the client
//     then parses the literal text.
//   - Spring placeholders (Spring Boot files): ${name} and ${name:default},
//     nested, resolved from the environment when the application starts;
//     the default is everything after the first ':' (so
//     ${KAFKA_BOOTSTRAP:b1:9092,b2:9092} has the default b1:9092,b2:9092).
//   - Template text such as <CLUSTER API SECRET>, which nothing fills in.
//
// A value whose placeholders resolve (from --env, or to their defaults) is
// checked as resolved, and its findings say where the value came from. A
// value that is known only at run time is not checked (KD411 says so where
// there was something to check); a placeholder nothing resolves is KD410.

// providerRE is ConfigTransformer.DEFAULT_PATTERN.
var providerRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}`) })

// templateRE is a whole value that is template text: <SOMETHING TO FILL IN>.
var templateRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^<[^<>=;]+>$`) })

// placeholderKind says what became of an entry's placeholders.
type placeholderKind int

const (
	// phResolved: every placeholder resolved (from --env, or a default).
	phResolved placeholderKind = iota + 1
	// phRuntime: the value is known only when the client runs (a declared
	// config provider, a Spring placeholder without a default).
	phRuntime
	// phLiteral: nothing resolves it; the client gets the text as written.
	phLiteral
)

// placeholder is what became of one entry's placeholders.
type placeholder struct {
	kind placeholderKind
	// written is the value as written; note says where the value
	// checked came from, for findings' messages.
	written, note string
	// literal says why the text stays as written (KD410); severity is
	// KD410's for it.
	literal  string
	severity Severity
	// runtime says what supplies the value at run time (KD411).
	runtime string
}

// hasPlaceholder reports whether a value may hold one (a quick test before
// any parse).
func hasPlaceholder(v string) bool {
	return strings.Contains(v, "${") || (strings.HasPrefix(strings.TrimSpace(v), "<") && strings.HasSuffix(strings.TrimSpace(v), ">"))
}

// resolvePlaceholders returns f with each placeholder value replaced by
// what it resolves to (positions kept), and what became of each, by entry
// index. f itself is returned, unchanged, when no value has a placeholder.
func resolvePlaceholders(f *config.File, d config.Dialect, env map[string]string) (*config.File, map[int]*placeholder) {
	first := -1
	for i, e := range f.Entries {
		if hasPlaceholder(e.Value) {
			first = i
			break
		}
	}
	if first < 0 {
		return f, nil
	}
	providers := declaredProviders(f)
	out := *f
	out.Entries = append([]config.Entry(nil), f.Entries...)
	phs := map[int]*placeholder{}
	for i := first; i < len(out.Entries); i++ {
		e := &out.Entries[i]
		if !hasPlaceholder(e.Value) {
			continue
		}
		var ph *placeholder
		switch {
		case f.Source == config.SourceCompose:
			ph = resolveCompose(e, env)
		case d == config.Spring:
			ph = resolveSpring(e, env)
		default:
			ph = resolveKafka(e, d, providers, env)
		}
		if ph != nil {
			phs[i] = ph
		}
	}
	return &out, phs
}

// declaredProviders are the config providers the Java client instantiates:
// each name of config.providers (split on "," and not trimmed, as
// instantiateConfigProviders splits it) that has a
// config.providers.<name>.class.
func declaredProviders(f *config.File) map[string]bool {
	var list string
	classes := map[string]bool{}
	for _, e := range f.Entries {
		if e.Key == "config.providers" {
			list = e.Value
		}
		if n, ok := strings.CutPrefix(e.Key, "config.providers."); ok {
			if n, ok := strings.CutSuffix(n, ".class"); ok && strings.TrimSpace(e.Value) != "" {
				classes[n] = true
			}
		}
	}
	m := map[string]bool{}
	for _, p := range strings.Split(strings.TrimSpace(list), ",") {
		if classes[p] {
			m[p] = true
		}
	}
	return m
}

// resolveKafka handles a Java (or librdkafka) value: config provider
// variables, other ${...}, template text.
func resolveKafka(e *config.Entry, d config.Dialect, providers map[string]bool, env map[string]string) *placeholder {
	v := strings.TrimSpace(e.Value)
	ph := &placeholder{written: e.Value}
	if templateRE().MatchString(v) {
		ph.kind, ph.severity = phLiteral, Warning
		ph.literal = "looks like template text that was never filled in: the client uses it as the value"
		return ph
	}
	if d == config.Java {
		ms := providerRE().FindAllStringSubmatchIndex(e.Value, -1)
		if len(ms) > 0 {
			var undeclared []string
			resolved := true
			var b strings.Builder
			last := 0
			for _, m := range ms {
				prov, path, key := e.Value[m[2]:m[3]], "", e.Value[m[8]:m[9]]
				if m[6] >= 0 {
					path = e.Value[m[6]:m[7]]
				}
				b.WriteString(e.Value[last:m[0]])
				last = m[1]
				if !providers[prov] {
					undeclared = append(undeclared, prov)
					b.WriteString(e.Value[m[0]:m[1]])
					continue
				}
				if val, ok := env[key]; ok && path == "" && isEnvProvider(prov) {
					b.WriteString(val)
					continue
				}
				resolved = false
			}
			b.WriteString(e.Value[last:])
			switch {
			case len(undeclared) > 0:
				ph.kind, ph.severity = phLiteral, Error
				ph.literal = undeclaredText(undeclared)
			case !resolved:
				ph.kind = phRuntime
				ph.runtime = "is resolved at run time by config provider " + e.Value[ms[0][2]:ms[0][3]]
			default:
				ph.kind = phResolved
				ph.note = "(its placeholders resolved from --env)"
				e.Value = b.String()
			}
			return ph
		}
	}
	if !strings.Contains(e.Value, "${") {
		return nil
	}
	// ${NAME}: no Kafka client resolves it; a template tool (envsubst,
	// Helm) may before the file is used. With --env, kdiag does that.
	if val, defaults, unresolved := springExpand(e.Value, envLookup(env), 0); len(unresolved) == 0 && len(defaults) == 0 && len(env) > 0 {
		ph.kind, ph.note = phResolved, "(its placeholders resolved from --env)"
		e.Value = val
		return ph
	}
	ph.kind, ph.severity = phLiteral, Warning
	client := "the Java client"
	if d == config.Librdkafka {
		client = "librdkafka"
	}
	ph.literal = fmt.Sprintf("has a ${NAME} placeholder, which %s does not resolve (only ${provider:key} of a declared config provider is resolved, by the Java client): it takes the text as written, unless a tool fills it in first (lint the filled file, or give --env)", client)
	return ph
}

func isEnvProvider(name string) bool { return name == "env" }

func undeclaredText(provs []string) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, p := range provs {
		if seen[p] {
			continue
		}
		seen[p] = true
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", p)
	}
	return fmt.Sprintf("has a variable of config provider %s, which config.providers does not declare with a config.providers.<name>.class: "+
		"the client leaves the variable as written and then reads that text as the value", b.String())
}

// resolveCompose handles a value of a compose file's environment:
// compose interpolates ${NAME}, ${NAME:-default} and $NAME from its own
// environment (or .env) before the container starts.
func resolveCompose(e *config.Entry, env map[string]string) *placeholder {
	if !strings.Contains(e.Value, "$") {
		return nil
	}
	ph := &placeholder{written: e.Value}
	val, defaults, unresolved := config.ComposeExpand(e.Value, env)
	switch {
	case len(unresolved) > 0:
		ph.kind = phRuntime
		ph.runtime = fmt.Sprintf("is interpolated by compose from %s when the container starts", strings.Join(unresolved, ", "))
	case len(defaults) > 0:
		ph.kind, ph.note = phResolved, fmt.Sprintf("(the default compose uses when %s is not set)", strings.Join(defaults, ", "))
		e.Value = val
	default:
		ph.kind, ph.note = phResolved, "(its variables resolved from --env)"
		e.Value = val
	}
	return ph
}

// resolveSpring handles a Spring value: ${name[:default]}, nested.
func resolveSpring(e *config.Entry, env map[string]string) *placeholder {
	v := strings.TrimSpace(e.Value)
	ph := &placeholder{written: e.Value}
	if templateRE().MatchString(v) {
		ph.kind, ph.severity = phLiteral, Warning
		ph.literal = "looks like template text that was never filled in: the client uses it as the value"
		return ph
	}
	val, defaults, unresolved := springExpand(e.Value, envLookup(env), 0)
	switch {
	case len(unresolved) > 0:
		ph.kind = phRuntime
		ph.runtime = fmt.Sprintf("comes from %s at run time (no default given)", strings.Join(unresolved, ", "))
	case len(defaults) > 0:
		ph.kind = phResolved
		ph.note = fmt.Sprintf("(the default of its placeholder, used when %s is not set)", strings.Join(defaults, ", "))
		e.Value = val
	default:
		ph.kind = phResolved
		ph.note = "(its placeholders resolved from --env)"
		e.Value = val
	}
	return ph
}

// envLookup looks a name up in --env as Spring's
// SystemEnvironmentPropertySource does: as written, then with '.' and '-'
// as '_', then that in upper case.
func envLookup(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if env == nil {
			return "", false
		}
		for _, n := range []string{name, strings.NewReplacer(".", "_", "-", "_").Replace(name)} {
			if v, ok := env[n]; ok {
				return v, true
			}
			if v, ok := env[strings.ToUpper(n)]; ok {
				return v, true
			}
		}
		return "", false
	}
}

// springExpand expands Spring placeholders as PropertyPlaceholderHelper
// does: ${name} is looked up, ${name:default} falls back to its default
// (everything after the first ':' outside nested placeholders), and
// placeholders nest in names and defaults. It returns the expanded text,
// the names whose default was used, and those with neither a value nor a
// default (left as written).
func springExpand(s string, lookup func(string) (string, bool), depth int) (string, []string, []string) {
	if depth > 10 || !strings.Contains(s, "${") {
		return s, nil, nil
	}
	var b strings.Builder
	var defaults, unresolved []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		// The matching }, past nested placeholders.
		j, nest := i+2, 0
		for ; j < len(s); j++ {
			if strings.HasPrefix(s[j:], "${") {
				nest++
				j++
				continue
			}
			if s[j] == '}' {
				if nest == 0 {
					break
				}
				nest--
			}
		}
		if j >= len(s) {
			b.WriteString(s[i:]) // unclosed: Spring leaves it as text
			break
		}
		inner := s[i+2 : j]
		s = s[j+1:]
		name, def, hasDef := splitSpringDefault(inner)
		name, d1, u1 := springExpand(name, lookup, depth+1)
		defaults, unresolved = append(defaults, d1...), append(unresolved, u1...)
		if v, ok := lookup(name); ok {
			v, d2, u2 := springExpand(v, lookup, depth+1)
			b.WriteString(v)
			defaults, unresolved = append(defaults, d2...), append(unresolved, u2...)
			continue
		}
		if hasDef {
			v, d2, u2 := springExpand(def, lookup, depth+1)
			b.WriteString(v)
			defaults = append(append(defaults, name), d2...)
			unresolved = append(unresolved, u2...)
			continue
		}
		unresolved = append(unresolved, name)
		b.WriteString("${" + inner + "}")
	}
	return b.String(), defaults, unresolved
}

// splitSpringDefault splits a placeholder's text at its first ':' outside
// nested placeholders.
func splitSpringDefault(s string) (name, def string, ok bool) {
	nest := 0
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "${"):
			nest++
			i++
		case s[i] == '}' && nest > 0:
			nest--
		case s[i] == ':' && nest == 0:
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
