package output

import (
	"regexp"
	"strings"
	"sync"

	"github.com/kdiag/kdiag/rules"
)

// mask replaces a secret in every output format: the engine's marker, so
// that a value the engine hid and one the writers hid look the same.
const mask = rules.Redacted

// secretName ends in a word that names a secret.
const secretName = `(?i)([A-Za-z0-9_.\-\[\]]*(?:password|passwd|secret|passphrase|token|credentials?|private\.key\.pem|keystore\.key|certificate\.chain|truststore\.certificates))`

// secretValue is an assigned value, with its quotes if it has any.
const secretValue = `("[^"]*"|'[^']*'|[^\s;"',]+)`

// textAssign finds a secret assignment in a message or fix, prose where
// "key: ..." is how a message starts, so only "=" counts. Group 3 is the
// value.
var textAssign = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(secretName + `(\s*=\s*)` + secretValue) })

// evidenceAssign finds one inside evidence (a JAAS-like text under a key
// that is not itself secret), where "password: x" counts too.
var evidenceAssign = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(secretName + `(\s*[=:]\s*)` + secretValue) })

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
	f.Message = maskAssignments(textAssign(), f.Message)
	f.Fix = maskAssignments(textAssign(), f.Fix)
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
		return maskAssignments(evidenceAssign(), ev)
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

// maskAssignments masks the value of every secret-named assignment re
// finds in s, in place. A reference (${env:NAME}, ${file:path:key}, a Spring
// placeholder) is how a secret should be written, and is kept.
func maskAssignments(re *regexp.Regexp, s string) string {
	return re.ReplaceAllStringFunc(s, func(m string) string {
		sub := re.FindStringSubmatch(m)
		v := sub[3]
		q := ""
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
			q, v = v[:1], v[1:len(v)-1]
		}
		if v == mask || v == "" || (strings.HasPrefix(v, "${") && strings.HasSuffix(v, "}")) {
			return m
		}
		return sub[1] + sub[2] + q + mask + q
	})
}
