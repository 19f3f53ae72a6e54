package output

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"iter"
	"strconv"
	"unicode/utf8"

	"github.com/kdiag/kdiag/rules"
)

// JSONReport is the document WriteJSON writes. Its field names are a stable
// interface for scripts: fields are added, never renamed or removed.
type JSONReport struct {
	// Tool is "kdiag"; Version its version.
	Tool     string        `json:"tool"`
	Version  string        `json:"version"`
	Findings []JSONFinding `json:"findings"`
	// Problems lists the inputs that could not be linted; [] when none.
	Problems []Problem `json:"problems"`
	Summary  Summary   `json:"summary"`
}

// JSONFinding is one finding with its rule's title and documentation link.
type JSONFinding struct {
	Rule     string `json:"rule"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Path     string `json:"path"`
	// Line and Column are 1-based; 0 when the finding concerns the whole file.
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Key      string `json:"key,omitempty"`
	Evidence string `json:"evidence,omitempty"`
	Fix      string `json:"fix,omitempty"`
	Title    string `json:"title,omitempty"`
	Category string `json:"category,omitempty"`
	HelpURI  string `json:"help_uri"`
}

// StreamJSON writes one JSONReport, indented, a finding at a time: the
// document is the one encoding/json would write for the whole report, but
// no more than one finding is held. findings is [] (never null) when there
// are none.
func StreamJSON(w io.Writer, findings iter.Seq[rules.Finding], catalog []*rules.Rule, meta func() Meta) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	byID := index(catalog)
	var c counter
	m0 := meta()
	head, err := marshal(struct {
		Tool    string `json:"tool"`
		Version string `json:"version"`
	}{"kdiag", m0.version()}, "")
	if err != nil {
		return err
	}
	// The head object without its closing brace, then the findings array.
	bw.Write(head[:len(head)-2])
	bw.WriteString(",\n  \"findings\": [")
	var buf []byte
	n := 0
	for f := range findings {
		f = scrub(f)
		c.add(f)
		jf := JSONFinding{
			Rule:     f.RuleID,
			Severity: f.Severity.String(),
			Message:  f.Message,
			Path:     f.Path,
			Line:     int(f.Pos.Line),
			Column:   int(f.Pos.Col),
			Key:      f.Key,
			Evidence: f.Evidence,
			Fix:      f.Fix,
			HelpURI:  HelpURI(f.RuleID),
		}
		if r := byID[f.RuleID]; r != nil {
			jf.Title, jf.Category = r.Title, r.Category
			if jf.Fix == "" {
				jf.Fix = r.Remediation
			}
		}
		if n > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n    ")
		buf = appendFinding(buf[:0], &jf)
		bw.Write(buf)
		n++
	}
	if n > 0 {
		bw.WriteString("\n  ")
	}
	m := meta()
	tail, err := marshal(struct {
		Problems []Problem `json:"problems"`
		Summary  Summary   `json:"summary"`
	}{append([]Problem{}, m.Problems...), c.summary(m.Files)}, "")
	if err != nil {
		return err
	}
	bw.WriteString("],\n")
	bw.Write(tail[2:]) // without the opening brace and its newline
	bw.WriteByte('\n')
	return bw.Flush()
}

// marshaler encodes one value after another with one encoder and buffer,
// as marshal does; the bytes it returns are valid until the next call.
type marshaler struct {
	buf bytes.Buffer
	enc *json.Encoder
}

func newMarshaler(prefix string) *marshaler {
	m := &marshaler{}
	m.enc = json.NewEncoder(&m.buf)
	m.enc.SetIndent(prefix, "  ")
	m.enc.SetEscapeHTML(false)
	return m
}

func (m *marshaler) marshal(v any) ([]byte, error) {
	m.buf.Reset()
	if err := m.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(m.buf.Bytes(), []byte("\n")), nil
}

// marshal is json.MarshalIndent with kdiag's settings (two-space indent,
// no HTML escaping: "<stdin>" reads better than "\u003cstdin\u003e"),
// without the encoder's final newline.
func marshal(v any, prefix string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent(prefix, "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// appendFinding appends jf as encoding/json writes it indented by four
// spaces and two more a level (the Encoder StreamJSON would otherwise call
// for each finding: written out, it is a third of the time of a large
// report; TestAppendFindingMatchesEncoder holds the two to the same bytes).
func appendFinding(b []byte, jf *JSONFinding) []byte {
	field := func(name, v string, omitEmpty bool) {
		if omitEmpty && v == "" {
			return
		}
		b = append(b, ",\n      \""...)
		b = append(b, name...)
		b = append(b, "\": "...)
		b = appendJSONString(b, v)
	}
	b = append(b, "{\n      \"rule\": "...)
	b = appendJSONString(b, jf.Rule)
	field("severity", jf.Severity, false)
	field("message", jf.Message, false)
	field("path", jf.Path, false)
	b = append(b, ",\n      \"line\": "...)
	b = strconv.AppendInt(b, int64(jf.Line), 10)
	b = append(b, ",\n      \"column\": "...)
	b = strconv.AppendInt(b, int64(jf.Column), 10)
	field("key", jf.Key, true)
	field("evidence", jf.Evidence, true)
	field("fix", jf.Fix, true)
	field("title", jf.Title, true)
	field("category", jf.Category, true)
	field("help_uri", jf.HelpURI, false)
	return append(b, "\n    }"...)
}

// appendJSONString appends s as a JSON string the way encoding/json does
// with HTML escaping off: ", \\ and control characters escaped (\n, \r, \t,
// else \u00XX), U+2028 and U+2029 as \u2028 and \u2029, invalid UTF-8 as
// \ufffd.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
