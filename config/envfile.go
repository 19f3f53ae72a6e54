package config

import (
	"strings"
	"unicode/utf8"
)

// SourceEnv is an environment file (.env, docker --env-file, compose
// env_file): NAME=value lines.
const SourceEnv = "env"

// ParseEnvFile reads an environment file as Docker Compose reads an
// env_file or .env: one NAME=value per line; blank lines and lines starting
// with # are skipped; an optional "export " before the name is dropped;
// a value in single quotes is taken as written, one in double quotes with
// \n, \t, \\ and \" decoded, an unquoted one up to a " #" comment with its
// trailing blanks trimmed. A line without "=" is a Problem (compose
// would take the name from its own environment, which kdiag does not
// have). Entries keep the name as Key and RawKey, and exact positions.
func ParseEnvFile(name, src string) *File {
	f := &File{Path: name, Source: SourceEnv}
	lineNo := 0
	for len(src) > 0 {
		var line string
		if i := strings.IndexByte(src, '\n'); i >= 0 {
			line, src = src[:i], src[i+1:]
		} else {
			line, src = src, ""
		}
		lineNo++
		line = strings.TrimSuffix(line, "\r")
		col := 1
		trimmed := strings.TrimLeft(line, " \t")
		col += len(line) - len(trimmed)
		if trimmed == "" {
			continue
		}
		if trimmed[0] == '#' {
			f.Comments = append(f.Comments, Comment{Text: strings.TrimSpace(trimmed[1:]), Pos: posAt(lineNo, col)})
			continue
		}
		if rest, ok := strings.CutPrefix(trimmed, "export "); ok {
			col += len(trimmed) - len(rest)
			trimmed = rest
		}
		eq := strings.IndexByte(trimmed, '=')
		if eq <= 0 {
			f.Problems = append(f.Problems, Problem{Pos: posAt(lineNo, col), Msg: "a line without NAME=value: kdiag cannot tell its value (compose would read it from its own environment)"})
			continue
		}
		key := strings.TrimRight(trimmed[:eq], " \t")
		raw := trimmed[eq+1:]
		vcol := col + utf8.RuneCountInString(trimmed[:eq+1])
		lead := len(raw) - len(strings.TrimLeft(raw, " \t"))
		raw = raw[lead:]
		vcol += lead
		val := envValue(raw)
		e := Entry{Key: key, RawKey: key, Value: val, KeyPos: posAt(lineNo, col), ValuePos: posAt(lineNo, vcol)}
		if val != raw {
			e.RawValue = raw
		}
		f.Entries = append(f.Entries, e)
	}
	return f
}

// envValue decodes an env file value as compose does.
func envValue(raw string) string {
	switch {
	case len(raw) >= 2 && raw[0] == '\'' && strings.IndexByte(raw[1:], '\'') >= 0:
		return raw[1 : 1+strings.IndexByte(raw[1:], '\'')]
	case len(raw) >= 2 && raw[0] == '"':
		var b strings.Builder
		for i := 1; i < len(raw); i++ {
			c := raw[i]
			if c == '"' {
				return b.String()
			}
			if c == '\\' && i+1 < len(raw) {
				i++
				switch raw[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				default:
					b.WriteByte(raw[i])
				}
				continue
			}
			b.WriteByte(c)
		}
		return raw // an unclosed quote: taken as written
	}
	if i := strings.Index(raw, " #"); i >= 0 {
		raw = raw[:i]
	}
	return strings.TrimRight(raw, " \t")
}

// EnvMap returns an environment file's variables, the last one written
// winning.
func (f *File) EnvMap() map[string]string {
	m := make(map[string]string, len(f.Entries))
	for _, e := range f.Entries {
		m[e.Key] = e.Value
	}
	return m
}
