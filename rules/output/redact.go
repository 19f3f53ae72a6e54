package output

import (
	"strings"

	"github.com/kdiag/kdiag/internal/redact"
	"github.com/kdiag/kdiag/rules"
)

// mask replaces a secret in every output format: the engine's marker, so
// that a value the engine hid and one the writers hid look the same.
const mask = rules.Redacted

// secretNameWords end a name that names a secret, in an assignment found
// in free text (password="x" in a message, a JAAS-like text in evidence).
var secretNameWords = []string{"password", "passwd", "secret", "passphrase", "token", "credential",
	"credentials", "private.key.pem", "keystore.key", "certificate.chain", "truststore.certificates"}

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

// maskAssignments masks the value of every assignment in s whose name ends
// in a secret word (redact.Assignments: name, optional blanks, "=" or, with
// colon, ":" as in YAML evidence, then the value), in one pass over s (a
// regular expression with a leading name class backtracked over every fix
// text: 5 s for 100,000 findings). A reference (${env:NAME},
// ${file:path:key}, a Spring placeholder) is how a secret should be
// written, and is kept.
func maskAssignments(s string, colon bool) string {
	if strings.IndexByte(s, '=') < 0 && (!colon || strings.IndexByte(s, ':') < 0) {
		return s
	}
	return redact.Assignments(s, redact.Assign{Secret: endsWithSecretWord, Colon: colon, KeepRefs: true})
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
