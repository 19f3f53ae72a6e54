package output

import (
	"strings"

	"github.com/kdiag/kdiag/rules"
)

// mask replaces a secret in every output format: the engine's marker, so
// that a value the engine hid and one the writers hid look the same.
const mask = rules.Redacted

// secretNameWords end a name that names a secret, in an assignment found
// in free text (password="x" in a message, a JAAS-like text in evidence).
var secretNameWords = []string{"password", "passwd", "secret", "passphrase", "token", "credential",
	"credentials", "private.key.pem", "keystore.key", "certificate.chain", "truststore.certificates"}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == '-' || c == '[' || c == ']'
}

// secretKey reports whether a config key holds a secret. The engine's
// rules.IsSecretKey is the authority; this is the writers' own net, wide on
// purpose.
func secretKey(key string) bool {
	if rules.IsSecretKey(key) {
		return true
	}
	k := strings.ToLower(key)
	for _, w := range []string{"password", "passwd", "secret", "passphrase", "jaas.config", "jaas-config",
		"ssl.keystore.key", "ssl.key.pem", "private.key.pem", "certificate.chain", "truststore.certificates"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// scrub returns f with secrets masked by position, a second line of
// defence behind the engine, which builds evidence with the value already
// hidden. Evidence is "key=value" (or "key: value"): when the finding's key
// or the evidence's own key is secret, everything after the first
// separator is masked (a JAAS value keeps its module and option names), and
// evidence without a separator is masked whole. In messages and fixes, the
// value of each secret-named assignment (password="x") is masked where it
// stands. No value found in one place is searched for anywhere else: a
// secret "pass" must not turn ssl.key.password into ssl.key.******word.
func scrub(f rules.Finding) rules.Finding {
	f.Evidence = scrubEvidence(f.Key, f.Evidence)
	f.Message = maskAssignments(f.Message, false)
	f.Fix = maskAssignments(f.Fix, false)
	return f
}

// scrubEvidence masks the value of a secret key's evidence.
func scrubEvidence(key, ev string) string {
	if ev == "" || ev == mask {
		return ev
	}
	i := strings.IndexAny(ev, "=:")
	evKey := ""
	if i >= 0 {
		evKey = strings.TrimSpace(ev[:i])
	}
	if !secretKey(key) && (evKey == "" || !secretKey(evKey)) {
		return maskAssignments(ev, true)
	}
	if i < 0 {
		return mask
	}
	j := i + 1
	for j < len(ev) && (ev[j] == ' ' || ev[j] == '\t') {
		j++
	}
	val := ev[j:]
	switch {
	case val == "" || val == mask:
		return ev
	case isJAAS(key) || isJAAS(evKey):
		return ev[:j] + rules.RedactJAAS(val)
	}
	return ev[:j] + mask
}

func isJAAS(key string) bool {
	k := strings.ToLower(key)
	return strings.HasSuffix(k, "jaas.config") || strings.HasSuffix(k, "jaas-config") || strings.HasSuffix(k, "oauthbearer.config")
}

// maskAssignments masks, in place, the value of every assignment in s whose
// name ends in a secret word: name, optional blanks, "=" (or ":" when colon
// is set, as in YAML evidence), optional blanks, then a value that is a
// quoted string or runs to a blank, ';', ',' or quote. It scans s once
// (a regular expression with a leading name class backtracked over every
// fix text: 5 s for 100,000 findings). A reference (${env:NAME},
// ${file:path:key}, a Spring placeholder) is how a secret should be
// written, and is kept.
func maskAssignments(s string, colon bool) string {
	if strings.IndexByte(s, '=') < 0 && (!colon || strings.IndexByte(s, ':') < 0) {
		return s
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '=' && (!colon || s[i] != ':') {
			continue
		}
		// The name before the separator (blanks allowed in between).
		e := i
		for e > 0 && (s[e-1] == ' ' || s[e-1] == '\t') {
			e--
		}
		st := e
		for st > 0 && isNameChar(s[st-1]) {
			st--
		}
		if st == e || !endsWithSecretWord(s[st:e]) {
			continue
		}
		// The value after it.
		v := i + 1
		for v < len(s) && (s[v] == ' ' || s[v] == '\t') {
			v++
		}
		if v >= len(s) {
			continue
		}
		end, q := v, byte(0)
		if s[v] == '"' || s[v] == '\'' {
			q = s[v]
			j := strings.IndexByte(s[v+1:], q)
			if j < 0 {
				continue // an unterminated quote: not an assignment this can read
			}
			end = v + 1 + j + 1
		} else {
			for end < len(s) && !strings.ContainsRune(" \t\n\r\f\v;\"',", rune(s[end])) {
				end++
			}
		}
		inner := s[v:end]
		if q != 0 {
			inner = s[v+1 : end-1]
		}
		if end == v || inner == "" || inner == mask || (strings.HasPrefix(inner, "${") && strings.HasSuffix(inner, "}")) {
			continue
		}
		b.WriteString(s[last:v])
		if q != 0 {
			b.WriteByte(q)
			b.WriteString(mask)
			b.WriteByte(q)
		} else {
			b.WriteString(mask)
		}
		last = end
		i = end - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func endsWithSecretWord(name string) bool {
	n := strings.ToLower(name)
	for _, w := range secretNameWords {
		if strings.HasSuffix(n, w) {
			return true
		}
	}
	return false
}
