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
//     -Dssl.keystore.password=x, TOKEN=x), whatever the dashes or -D: the
//     whole rest of the argument, whatever its quoting;
//   - a secret flag's value in the next argument (--password x), even one
//     that starts with a dash (--password -x);
//   - password=, secret= and the like inside a value (a JAAS config, a
//     shell's -c script): the whole shell word after the "=";
//   - the password of a URL's user info (scheme://user:pass@host).
//
// args itself is not changed.
func Args(args []string) []string {
	out := make([]string, len(args))
	maskNext := false
	for i, a := range args {
		// The argument after a secret flag is masked whatever it looks
		// like: a password may start with a dash (--sasl-password -x),
		// and nothing tells it from a flag. A flag that takes no value
		// (--password --verbose) loses the next flag from the output, a
		// secret never shows.
		if maskNext {
			out[i] = Mask
			maskNext = false
			continue
		}
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
// of a secret key=value (all of it, whatever its quoting: in an argument
// the shell has split, --password='x'y is all value), each secret key=value
// pair inside it (JAAS: username="u" password="p";), and a URL's password.
func Value(s string) string {
	if k, v, ok := strings.Cut(s, "="); ok && IsSecretName(strings.TrimLeft(k, "-")) && !strings.ContainsAny(k, " \t\"'") {
		return s[:len(k)+1] + maskArgValue(v)
	}
	s = maskPairs(s)
	return maskURLPassword(s)
}

// maskArgValue masks v, the whole value of a secret key=value argument. It
// is all secret, whatever its quoting, blanks and semicolons included: the
// shell has already split the words. One shell word that is one quoted
// string, with only semicolons after it (a JAAS entry, password="p"; of a
// command line split at its spaces), keeps its quotes and semicolons, as
// Assignments masks it inside a longer value, so that masking what Cmdline
// masked changes nothing.
func maskArgValue(v string) string {
	end := wordEnd(v, 0, true)
	if strings.Trim(v[end:], ";") != "" {
		return Mask
	}
	w := parseWord(v[:end])
	if w.inner == Mask {
		return v
	}
	return w.masked() + v[end:]
}

// maskPairs masks the value of every name=value inside s whose name says it
// is a secret (a JAAS config's password="p", a shell script's
// --password=p).
func maskPairs(s string) string { return Assignments(s, Assign{Secret: IsSecretName, Shell: true}) }

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
	// Shell reads values as a shell does (a command line, a sh -c
	// script): a ',' is part of the word. Otherwise (configuration text,
	// prose) a ',' outside quotes ends the value too: a list's next item,
	// "password=${env:P}, or ...".
	Shell bool
}

// Assignments masks, by position and in one pass, the value of every
// assignment in s whose name o.Secret accepts: a name ([A-Za-z0-9_.-] and
// []), optional blanks, "=" (or ":" with o.Colon), optional blanks, then the
// value, one shell word (see wordEnd): quoted strings ("…" or '…', to the
// end of s when unclosed) and unquoted bytes, run together, up to a blank or
// ';' (without o.Shell, also ',') outside quotes. A value that is one quoted
// string keeps its quotes around the mask; any other is replaced whole:
// password=""x and password='x'y are x and xy to a shell, and nothing of
// them shows.
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
		vend := wordEnd(s, v, o.Shell)
		if vend <= v {
			continue
		}
		w := parseWord(s[v:vend])
		if w.inner == "" || w.inner == Mask || o.KeepRefs && strings.HasPrefix(w.inner, "${") && strings.HasSuffix(w.inner, "}") {
			continue
		}
		b.WriteString(s[last:v])
		b.WriteString(w.masked())
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

// wordEnd returns the index just past the shell word that starts at v:
// quoted strings and unquoted bytes run together (""x, 'x'y, a"b c"d), up to
// a blank or ';' outside quotes (';' ends a JAAS entry, and a shell command),
// or, unless shell, a ','. A backslash escapes the next byte, inside quotes
// or out: a shell does not read it so inside '…', but reading it so only
// makes the word longer, and the mask covers more, never less.
func wordEnd(s string, v int, shell bool) int {
	j := v
	for j < len(s) {
		switch c := s[j]; c {
		case ' ', '\t', '\n', '\r', '\f', '\v', ';':
			return j
		case ',':
			if !shell {
				return j
			}
			j++
		case '"', '\'':
			j, _ = quotedEnd(s, j)
		case '\\':
			j = min(j+2, len(s))
		default:
			j++
		}
	}
	return j
}

// word is a shell word as Assignments masks it.
type word struct {
	// inner is the word, or the text between the quotes of a word that
	// is one quoted string (to the end of the word when unclosed).
	inner string
	// quote is that string's quote, 0 for any other word.
	quote  byte
	closed bool
}

// parseWord reads w, one whole shell word (see wordEnd).
func parseWord(w string) word {
	if w != "" && (w[0] == '"' || w[0] == '\'') {
		if end, closed := quotedEnd(w, 0); end == len(w) {
			if closed {
				return word{inner: w[1 : end-1], quote: w[0], closed: true}
			}
			return word{inner: w[1:], quote: w[0]}
		}
	}
	return word{inner: w}
}

// masked is the word with its text masked: a quoted string keeps its
// quotes around the mask, any other word is the mask.
func (w word) masked() string {
	switch {
	case w.quote == 0:
		return Mask
	case w.closed:
		return string(w.quote) + Mask + string(w.quote)
	}
	return string(w.quote) + Mask
}

// quotedEnd returns the index just past the quoted string that starts at v
// (s[v] is its quote), backslash escapes skipped: through its closing quote
// (closed), or the end of s when it is unclosed.
func quotedEnd(s string, v int) (end int, closed bool) {
	q := s[v]
	for j := v + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			return j + 1, true
		}
	}
	return len(s), false
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
