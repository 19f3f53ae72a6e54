package output

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kdiag/kdiag/config"
	"github.com/kdiag/kdiag/rules"
)

func TestPrintable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain café ✓", "plain café ✓"},
		{"a\\b", "a\\b"},
		{"\x1b]0;title\x07", `\x1b]0;title\x07`},
		{"a\tb\nc\rd", `a\tb\nc\rd`},
		{"del\x7f", `del\x7f`},
		{"csi\u009b31m", `csi\u009b31m`},
		{"rtl\u202eevil", `rtl\u202eevil`},
		{"bad\xffbyte", `bad\xffbyte`},
	}
	for _, tt := range tests {
		if got := Printable(tt.in); got != tt.want {
			t.Errorf("Printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestTextEscapesTerminalSequences: a key from the file holding an OSC
// sequence (which would retitle the terminal) is written escaped.
func TestTextEscapesTerminalSequences(t *testing.T) {
	key := "evil\x1b]0;owned\x07key"
	fs := []rules.Finding{{RuleID: "KD404", Severity: rules.Warning, Path: "p\x1b[2J.properties",
		Pos: config.Pos{Line: 1, Col: 1}, Key: key, Message: key + " is not a producer config", Fix: "Remove " + key}}
	var buf bytes.Buffer
	if err := WriteText(&buf, fs, rules.All(), Meta{Files: 1}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("text output holds raw control characters: %q", out)
	}
	if !strings.Contains(out, `evil\x1b]0;owned\x07key is not`) || !strings.Contains(out, `p\x1b[2J.properties:1:1`) {
		t.Errorf("text output %q: want the sequences escaped", out)
	}
}
