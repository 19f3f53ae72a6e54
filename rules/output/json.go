package output

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"iter"

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
	enc := newMarshaler("    ")
	n := 0
	for f := range findings {
		f = scrub(f)
		c.add(f)
		jf := JSONFinding{
			Rule:     f.RuleID,
			Severity: f.Severity.String(),
			Message:  f.Message,
			Path:     f.Path,
			Line:     f.Pos.Line,
			Column:   f.Pos.Col,
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
		b, err := enc.marshal(jf)
		if err != nil {
			return err
		}
		if n > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n    ")
		bw.Write(b)
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
