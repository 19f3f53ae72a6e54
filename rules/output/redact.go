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
const secretName = `(?i)([A-Za-z0-9_.\-\[\]]*(?:password|passwd|secret|passphrase|private\.key\.pem|keystore\.key|certificate\.chain|truststore\.certificates))`

// secretValue is an assigned value, with its quotes if it has any.
const secretValue = `("[^"]*"|'[^']*'|[^\s;"',]+)`

// evidenceAssign finds a secret assignment in evidence, which is text from
// the file: `ssl.key.password=x`, a JAAS option `password="x"`, a YAML
// `password: x`. Group 3 is the value.
var evidenceAssign = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(secretName + `(\s*[=:]\s*)` + secretValue) })

// textAssign finds one in a message or fix, prose where "key: ..." is how a
// message starts, so only "=" counts.
var textAssign = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(secretName + `(\s*=\s*)` + secretValue) })

// secretKey reports whether a config key holds a secret (the Java client's
// PASSWORD-type configs and librdkafka's equivalents). The engine's
// rules.IsSecretKey is the authority; this is the writers' own net, wide on
// purpose.
func secretKey(key string) bool {
	if rules.IsSecretKey(key) {
		return true
	}
	k := strings.ToLower(key)
	for _, w := range []string{"password", "passwd", "secret", "passphrase", "jaas.config",
		"ssl.keystore.key", "ssl.key.pem", "private.key.pem", "certificate.chain", "truststore.certificates"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// scrub returns f with every secret value it can find masked in Message,
// Evidence and Fix: the values of secret-named assignments, and the whole
// evidence of a finding about a secret key when the evidence is a bare value.
// A value found in one field is masked in the others too.
func scrub(f rules.Finding) rules.Finding {
	var literals []string
	assigned := false // the evidence has a secret assignment in it
	redactIn := func(re *regexp.Regexp, s string) string {
		return re.ReplaceAllStringFunc(s, func(m string) string {
			sub := re.FindStringSubmatch(m)
			if re == evidenceAssign() {
				assigned = true
			}
			v := sub[3]
			q := ""
			if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
				q, v = v[:1], v[1:len(v)-1]
			}
			// A reference (${env:NAME}, ${file:path:key}, a Spring
			// placeholder) is how a secret should be written: keep it.
			if v == mask || v == "" || strings.HasPrefix(v, "${") {
				return m
			}
			literals = append(literals, v)
			return sub[1] + sub[2] + q + mask + q
		})
	}
	ev := redactIn(evidenceAssign(), f.Evidence)
	msg := redactIn(textAssign(), f.Message)
	fix := redactIn(textAssign(), f.Fix)
	if secretKey(f.Key) && !strings.Contains(strings.ToLower(f.Key), "jaas") && !assigned && ev != "" && ev != mask {
		// A secret key's evidence with no recognisable assignment in it is
		// the value itself.
		literals = append(literals, f.Evidence)
		ev = mask
	}
	for _, l := range literals {
		// Short values are only masked where they were found: masking every
		// "ab" in a message would garble it.
		if len(l) < 3 {
			continue
		}
		ev = strings.ReplaceAll(ev, l, mask)
		msg = strings.ReplaceAll(msg, l, mask)
		fix = strings.ReplaceAll(fix, l, mask)
	}
	f.Evidence, f.Message, f.Fix = ev, msg, fix
	return f
}
