package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kdiag/kdiag/config"
	"github.com/kdiag/kdiag/rules"
)

// FuzzWriters feeds text from configuration files (paths, messages quoting
// values, evidence) through every writer: none may fail or panic, json and
// sarif stay valid JSON and SARIF, text keeps one line per finding, and a
// value assigned to a password key in the evidence never reaches the output.
func FuzzWriters(f *testing.F) {
	f.Add("conf/producer.properties", "connections.max.idle.ms is -1", "connections.max.idle.ms=-1", "ssl.key.password", "hunter22", 3, 1)
	f.Add("<stdin>", "a \"quoted\" value\nwith a newline", "password: 'x y z'", "sasl.jaas.config", "p@ss\"word", 1, 7)
	f.Add("/abs/dir with space/ü%.yml", "\x00\xff", "", "", "", 0, 0)
	f.Add("a:b/../c.conf", "<script>&amp;", "k=${env:X}", "ssl.truststore.password", "${env:X}", -1, -1)
	sch := compileSARIFSchema(f)
	write := func(t *testing.T, format string, fs []rules.Finding) []byte {
		var buf bytes.Buffer
		if err := Writers[format](&buf, fs, testCatalog(), Meta{Files: 1}); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		return buf.Bytes()
	}
	f.Fuzz(func(t *testing.T, path, msg, evidence, key, secret string, line, col int) {
		findings := func(secret string) []rules.Finding {
			return []rules.Finding{
				{RuleID: "KD101", Severity: rules.Warning, Path: path, Pos: config.Pos{Line: int32(line), Col: int32(col)},
					Key: key, Message: msg, Evidence: evidence},
				{RuleID: "KD701", Severity: rules.Error, Path: path, Pos: config.Pos{Line: 1, Col: 1},
					Key: "ssl.key.password", Message: "in clear", Evidence: "ssl.key.password=" + secret},
			}
		}
		// A secret written as one token after "password=" is replaced
		// before anything is derived from it, so the output must not depend
		// on it at all (unless it also appears in the other fields).
		secretChecked := secret != "" && secret != mask && !strings.HasPrefix(secret, "${") &&
			!strings.ContainsAny(secret, " \t\n\v\f\r;\"',") && !strings.Contains(path+msg+evidence+key, secret)
		for _, format := range Formats() {
			out := write(t, format, findings(secret))
			switch format {
			case "json":
				if !json.Valid(out) {
					t.Fatalf("json output is not JSON:\n%s", out)
				}
			case "sarif":
				if err := validateSARIF(t, sch, out); err != nil {
					t.Fatalf("sarif output does not validate: %v\n%s", err, out)
				}
			case "text":
				// Two findings, two fix lines, one summary line.
				if n := bytes.Count(out, []byte("\n")); n != 5 {
					t.Fatalf("text output has %d lines for 2 findings:\n%s", n, out)
				}
			}
			if secretChecked {
				if other := write(t, format, findings("other-value")); !bytes.Equal(out, other) {
					t.Fatalf("%s output depends on the secret %q:\n%s", format, secret, out)
				}
			}
		}
	})
}
