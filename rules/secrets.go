package rules

import (
	"hash/maphash"
	"strings"
	"sync"
)

// Redacted replaces a secret value in every output.
const Redacted = "******"

// secretWords mark a key as holding a credential whatever the dialect or
// the spelling (Spring writes ssl.key-password, serializers add
// basic.auth.user.info, applications invent my.api.token).
var secretWords = []string{"password", "passwd", "storepass", "keypass", "secret", "passphrase", "token", "credential",
	"user.info", "apikey", "api.key", "private.key", "jaas.config", "keystore.key", "key.pem",
	"oauthbearer.config"}

// secretDescriptors are last name elements that describe a secret without
// holding it: sasl.oauthbearer.token.endpoint.url names where a token comes
// from, ssl.key.password.file where a password is.
var secretDescriptors = map[string]bool{"url": true, "uri": true, "endpoint": true, "location": true,
	"path": true, "file": true, "dir": true, "class": true, "type": true, "ms": true, "seconds": true,
	"bytes": true, "enable": true, "enabled": true, "algorithm": true, "method": true, "mechanism": true,
	"id": true, "name": true, "scope": true, "provider": true, "format": true, "header": true}

// secretNames are the catalog keys whose values are secrets: the Java
// client's PASSWORD-type configs and the properties librdkafka marks
// sensitive. A key within a did-you-mean distance of one of them is a
// misspelling of it (ssl.key.pasword), and its value the same secret.
var secretNames = sync.OnceValue(func() *nameSet {
	var out []string
	for _, s := range JavaSettings() {
		if s.Password {
			out = append(out, s.Name)
		}
	}
	for _, s := range LibrdkafkaSettings() {
		if s.Sensitive {
			out = append(out, s.Name)
		}
	}
	return newNameSet(out)
})

// IsSecretKey reports whether values of key must never be shown: the Java
// client's PASSWORD-type configs, the properties librdkafka marks sensitive,
// a key whose name says it holds a credential (password, secret, token,
// credential, ... unless its last element says it only describes one, such
// as .url or .location), and a key that is a misspelling of a secret key (the
// nearest catalog key is within the did-you-mean distance). Every writer
// calls it (through Redact) before printing a value.
func IsSecretKey(key string) bool {
	h := maphash.String(secretSeed, key) % uint64(len(secretCache.slots))
	secretCache.Lock()
	slot := secretCache.slots[h]
	secretCache.Unlock()
	if slot.ok && slot.key == key {
		return slot.secret
	}
	secret := isSecretKey(key)
	secretCache.Lock()
	secretCache.slots[h] = secretSlot{key: key, secret: secret, ok: true}
	secretCache.Unlock()
	return secret
}

// secretCache remembers the last answers of IsSecretKey, one per slot of a
// direct-mapped table: the engine asks about a key when it builds a
// finding's evidence and the writers ask again when they write it, and an
// unknown key's answer costs a did-you-mean search.
var secretCache struct {
	sync.Mutex
	slots [8192]secretSlot
}

type secretSlot struct {
	key        string
	secret, ok bool
}

var secretSeed = maphash.MakeSeed()

func isSecretKey(key string) bool {
	k := strings.ToLower(strings.TrimSpace(key))
	if k == "" {
		return false
	}
	if s, ok := loadCatalog().java[k]; ok {
		return s.Password
	}
	if s, ok := loadCatalog().lib[k]; ok && s.Sensitive {
		return true
	}
	norm := normKey(k)
	last := norm[strings.LastIndexByte(norm, '.')+1:]
	for _, w := range secretWords {
		if strings.Contains(norm, w) && !secretDescriptors[last] {
			return true
		}
	}
	if _, ok := loadCatalog().lib[k]; ok {
		return false
	}
	return suggest(k, secretNames()) != ""
}

// isJAASKey reports a key whose value is a JAAS configuration
// (sasl.jaas.config, Spring's sasl.jaas-config) or librdkafka's
// sasl.oauthbearer.config, which has the same name=value form.
func isJAASKey(key string) bool {
	k := normKey(key)
	return strings.HasSuffix(k, "jaas.config") || strings.HasSuffix(k, "oauthbearer.config")
}

// Redact returns value as it may be shown for key: unchanged for ordinary
// keys, "******" for secrets. For sasl.jaas.config and librdkafka's
// sasl.oauthbearer.config it keeps the login module, its control flag and
// the option names, so that a reader can see which mechanism is configured,
// and hides every option value (RedactJAAS).
func Redact(key, value string) string {
	if !IsSecretKey(key) || value == "" {
		return value
	}
	if isJAASKey(key) {
		return RedactJAAS(value)
	}
	return Redacted
}

// jaasToken is one token of a JAAS configuration, as java.io.StreamTokenizer
// reads it for Kafka's JaasConfig: a word, a quoted string, or one of = ;
type jaasToken struct {
	kind byte // 'w' word, 'q' quoted string, '=' or ';'
	// text is the word, or the quoted string's content with its escapes
	// decoded.
	text string
	// start and end are the token's byte offsets in the value; space says
	// whether blanks came before it.
	start, end int
	space      bool
}

// jaasWordChar is a character StreamTokenizer (as JaasConfig sets it up:
// wordChars('-', '-'), wordChars('_', '_'), wordChars('$', '$') on top of
// letters, digits and '.') keeps in a word.
func jaasWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '-' || c == '_' || c == '$' || c >= 0x80
}

// tokenizeJAAS splits a JAAS configuration as Kafka's JaasConfig does
// (org.apache.kafka.common.security.JaasConfig: a StreamTokenizer with
// quoteChar '"' and '\” by default, whose quoted strings take backslash
// escapes). ok is false for text it cannot follow (a comment, an
// unterminated quote, a character that is none of the above), where the
// rest of the value must be treated as unreadable.
func tokenizeJAAS(v string) (toks []jaasToken, ok bool) {
	space := true
	for i := 0; i < len(v); {
		c := v[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			space = true
			i++
			continue
		case c == '=' || c == ';':
			toks = append(toks, jaasToken{kind: c, text: v[i : i+1], start: i, end: i + 1, space: space})
			i++
		case c == '"' || c == '\'':
			var b strings.Builder
			j := i + 1
			for ; j < len(v) && v[j] != c; j++ {
				if v[j] == '\\' && j+1 < len(v) {
					j++
					switch v[j] {
					case 'n':
						b.WriteByte('\n')
					case 't':
						b.WriteByte('\t')
					case 'r':
						b.WriteByte('\r')
					default:
						b.WriteByte(v[j])
					}
					continue
				}
				b.WriteByte(v[j])
			}
			if j >= len(v) {
				return toks, false
			}
			toks = append(toks, jaasToken{kind: 'q', text: b.String(), start: i, end: j + 1, space: space})
			i = j + 1
		case jaasWordChar(c):
			j := i
			for j < len(v) && jaasWordChar(v[j]) {
				j++
			}
			toks = append(toks, jaasToken{kind: 'w', text: v[i:j], start: i, end: j, space: space})
			i = j
		default:
			return toks, false
		}
		space = false
	}
	return toks, true
}

// jaasOption is one name=value option of a JAAS configuration.
type jaasOption struct {
	name string
	// value is the option's value (a quoted string's content).
	value string
	// quoted says the value was a quoted string.
	quoted bool
}

// parseJAAS reads a JAAS configuration in the form JaasConfig accepts:
// one or more "LoginModule flag name=value ... ;". ok is false when the text
// does not follow it; options holds what was read before that.
func parseJAAS(v string) (modules []string, options []jaasOption, ok bool) {
	toks, ok := tokenizeJAAS(v)
	i := 0
	for i < len(toks) {
		if toks[i].kind != 'w' || i+1 >= len(toks) || toks[i+1].kind != 'w' {
			return modules, options, false
		}
		modules = append(modules, toks[i].text)
		i += 2
		for i < len(toks) && toks[i].kind != ';' {
			// name = value, each option separated from the one before
			// by blanks: JaasConfig reads "a="x"b="y"" as a value "x"
			// followed by an option name b, which is a word glued to the
			// value; kdiag calls that unreadable.
			if i+2 >= len(toks) || toks[i].kind != 'w' || toks[i+1].kind != '=' ||
				(toks[i+2].kind != 'w' && toks[i+2].kind != 'q') || !toks[i].space {
				return modules, options, false
			}
			options = append(options, jaasOption{name: toks[i].text, value: toks[i+2].text, quoted: toks[i+2].kind == 'q'})
			if i+3 < len(toks) && toks[i+3].kind != ';' && !toks[i+3].space {
				return modules, options, false
			}
			i += 3
		}
		if i >= len(toks) {
			return modules, options, false // JaasConfig requires the final ;
		}
		i++
	}
	return modules, options, ok && len(modules) > 0
}

// RedactJAAS hides every option value of a JAAS configuration by position:
// the login module, its control flag and each option name are kept, each
// value becomes "******". From the first token it cannot read on (a quote
// that does not close, options glued together, a comment), the rest of the
// value is hidden whole: a value is never scanned for the secret's text.
func RedactJAAS(v string) string {
	toks, _ := tokenizeJAAS(v)
	var b strings.Builder
	i := 0
	bad := func() string {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Redacted)
		return b.String()
	}
	sep := func(t jaasToken) {
		if t.space && b.Len() > 0 {
			b.WriteByte(' ')
		}
	}
	for i < len(toks) {
		if toks[i].kind != 'w' || i+1 >= len(toks) || toks[i+1].kind != 'w' {
			return bad()
		}
		sep(toks[i])
		b.WriteString(toks[i].text)
		b.WriteByte(' ')
		b.WriteString(toks[i+1].text)
		i += 2
		for i < len(toks) && toks[i].kind != ';' {
			if i+2 >= len(toks) || toks[i].kind != 'w' || toks[i+1].kind != '=' ||
				(toks[i+2].kind != 'w' && toks[i+2].kind != 'q') || !toks[i].space ||
				(i+3 < len(toks) && toks[i+3].kind != ';' && !toks[i+3].space) {
				return bad()
			}
			b.WriteByte(' ')
			b.WriteString(toks[i].text)
			b.WriteString(`="` + Redacted + `"`)
			i += 3
		}
		if i >= len(toks) {
			return bad()
		}
		b.WriteByte(';')
		i++
	}
	if toks, ok := tokenizeJAAS(v); !ok || len(toks) == 0 {
		return bad()
	}
	return b.String()
}
