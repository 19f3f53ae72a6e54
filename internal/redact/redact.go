// Package redact hides secret values in what kdiag shows of a process: its
// command line and its environment. Command lines carry secrets
// (--sasl.password=…, -Djavax.net.ssl.keyStorePassword=…, a JAAS config
// with password="…", https://user:pass@host), and kdiag writes command
// lines into scan JSON, recordings, reports and doctor's output, which end
// up in tickets.
//
// Values are masked by position: the bytes of a value are replaced, never
// found again by a search that could hit the same text elsewhere.
package redact

import (
	"strings"
)

// Mask replaces a secret value.
const Mask = "******"

// secretWords are the parts of a name that say its value is a secret. "pwd"
// is left out: PWD is the working directory.
var secretWords = []string{"password", "passwd", "passphrase", "secret", "token", "credential", "apikey", "privatekey"}

// IsSecretName reports whether a key, flag or variable name says its value
// is a secret: ssl.key.password, --sasl-password, KAFKA_SASL_SECRET,
// keyStorePassword, api_key. Case, dots, dashes and underscores are ignored.
func IsSecretName(name string) bool {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		case c == '.' || c == '-' || c == '_':
		default:
			b.WriteByte(c)
		}
	}
	n := b.String()
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// Args returns a copy of a command line's arguments with secret values
// masked:
//   - key=value where the key says it is a secret (--sasl.password=x,
//     -Dssl.keystore.password=x, TOKEN=x), whatever the dashes or -D;
//   - a secret flag's value in the next argument (--password x);
//   - password=, secret= and the like inside a value (a JAAS config);
//   - the password of a URL's user info (scheme://user:pass@host).
//
// args itself is not changed.
func Args(args []string) []string {
	out := make([]string, len(args))
	maskNext := false
	for i, a := range args {
		if maskNext && !strings.HasPrefix(a, "-") {
			out[i] = Mask
			maskNext = false
			continue
		}
		maskNext = false
		if strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && IsSecretName(strings.TrimLeft(a, "-")) {
			maskNext = true
			out[i] = a
			continue
		}
		out[i] = Value(a)
	}
	return out
}

// Cmdline is Args for a command line joined by spaces, as /proc/<pid>/cmdline
// is shown: each argument is masked before they are joined.
func Cmdline(args []string) string { return strings.Join(Args(args), " ") }

// Line is Cmdline for a command line already joined by spaces (as a
// recording or an older kdiag's JSON holds it): it is split on spaces and
// each argument masked. Masking an already masked line changes nothing.
func Line(s string) string {
	if s == "" {
		return s
	}
	return Cmdline(strings.Split(s, " "))
}

// Value masks the secrets inside one argument or variable: the whole value
// of a secret key=value, each secret key=value pair inside it (JAAS:
// username="u" password="p";), and a URL's password.
func Value(s string) string {
	// A quoted value is left to maskPairs, which keeps its quotes.
	if k, v, ok := strings.Cut(s, "="); ok && IsSecretName(strings.TrimLeft(k, "-")) && !strings.ContainsAny(k, " \t\"'") &&
		!strings.HasPrefix(v, `"`) && !strings.HasPrefix(v, "'") {
		return s[:len(k)+1] + Mask
	}
	s = maskPairs(s)
	return maskURLPassword(s)
}

// maskPairs masks the value of every name=value inside s whose name says it
// is a secret (a JAAS config's password="p").
func maskPairs(s string) string { return Assignments(s, Assign{Secret: IsSecretName}) }

// Assign says which assignments Assignments masks.
type Assign struct {
	// Secret reports whether a name names a secret.
	Secret func(name string) bool
	// Colon takes name: value as an assignment too (YAML-like text).
	Colon bool
	// KeepRefs keeps a value that is a reference to the secret, ${...}
	// (a Kafka config provider's or Spring's placeholder): how a secret
	// should be written, and no secret itself.
	KeepRefs bool
}

// Assignments masks, by position and in one pass, the value of every
// assignment in s whose name o.Secret accepts: a name ([A-Za-z0-9_.-] and
// []), optional blanks, "=" (or ":" with o.Colon), optional blanks, then a
// quoted string ("…" or '…', backslash escapes skipped; to the end of s when
// unclosed) or a run of bytes up to a blank, ';', ',' or quote. A quoted
// value keeps its quotes around the mask.
func Assignments(s string, o Assign) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '=' && (!o.Colon || s[i] != ':') {
			continue
		}
		end := i
		for end > 0 && (s[end-1] == ' ' || s[end-1] == '\t') {
			end--
		}
		start := end
		for start > 0 && isNameByte(s[start-1]) {
			start--
		}
		if start == end || !o.Secret(s[start:end]) {
			continue
		}
		v := i + 1
		for v < len(s) && (s[v] == ' ' || s[v] == '\t') {
			v++
		}
		vend := valueEnd(s, v)
		if vend <= v {
			continue
		}
		q := s[v]
		quoted := q == '"' || q == '\''
		inner := s[v:vend]
		if quoted {
			inner = strings.TrimSuffix(inner[1:], string(q))
		}
		if inner == "" || inner == Mask || o.KeepRefs && strings.HasPrefix(inner, "${") && strings.HasSuffix(inner, "}") {
			continue
		}
		b.WriteString(s[last:v])
		if quoted {
			b.WriteByte(q)
			b.WriteString(Mask)
			if vend-1 > v && s[vend-1] == q {
				b.WriteByte(q)
			}
		} else {
			b.WriteString(Mask)
		}
		last = vend
		i = vend - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func isNameByte(c byte) bool {
	return c == '.' || c == '-' || c == '_' || c == '[' || c == ']' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// valueEnd returns the index just past the value that starts at v: a quoted
// string through its closing quote (backslash escapes skipped; the end of s
// when unclosed), or the run of bytes up to a blank, ';', ',' or quote.
func valueEnd(s string, v int) int {
	if v >= len(s) {
		return v
	}
	if q := s[v]; q == '"' || q == '\'' {
		for j := v + 1; j < len(s); j++ {
			switch s[j] {
			case '\\':
				j++
			case q:
				return j + 1
			}
		}
		return len(s)
	}
	j := v
	for j < len(s) && !strings.ContainsRune(" \t\n\r\f\v;\"',", rune(s[j])) {
		j++
	}
	return j
}

// maskURLPassword masks the password of every scheme://user:password@host
// in s.
func maskURLPassword(s string) string {
	var b strings.Builder
	last := 0
	for off := 0; ; {
		i := strings.Index(s[off:], "://")
		if i < 0 {
			break
		}
		start := off + i + 3
		// User info runs to '@' before any '/', space or end.
		end := start
		for end < len(s) && s[end] != '@' && s[end] != '/' && s[end] != ' ' {
			end++
		}
		off = start
		if end >= len(s) || s[end] != '@' {
			continue
		}
		colon := strings.IndexByte(s[start:end], ':')
		if colon < 0 {
			continue
		}
		b.WriteString(s[last : start+colon+1])
		b.WriteString(Mask)
		last = end
		off = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}
