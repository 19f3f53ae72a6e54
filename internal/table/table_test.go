package table

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStreamTableMatchesRender checks that the streamed listing is drawn
// exactly as the whole-table renderer draws the same rows, wide characters
// and empty cells included.
func TestStreamTableMatchesRender(t *testing.T) {
	header := []string{"STATE", "LOCAL", "PROCESS", "NAMESPACE"}
	rows := [][]string{
		{"CLOSE_WAIT", "10.0.0.5:40001", "java", "host"},
		{"ESTABLISHED", "[2001:db8::1]:9092", "生产者", ""},
		{"TIME_WAIT", "10.0.0.5:1", "", "netns:4026532201"},
		{"LISTEN", "0.0.0.0:8080", "naïve-prödücer", "3f4e5a6b7c8d"},
	}
	var want, got bytes.Buffer
	if err := Render(&want, header, rows); err != nil {
		t.Fatal(err)
	}
	err := Stream(&got, header, len(rows), func(i int, r []string) { copy(r, rows[i]) })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.String(), got.String()); diff != "" {
		t.Errorf("streamed table differs from the rendered one (-render +stream):\n%s", diff)
	}
}

// TestRenderTrimsLines: no line ends in the padding of its last cell, and a
// cell with a newline spans two lines.
func TestRenderTrimsLines(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, []string{"A", "B"}, [][]string{{"x", "long value"}, {"yy", "two\nlines"}}); err != nil {
		t.Fatal(err)
	}
	want := "A   B\nx   long value\nyy  two\n    lines\n"
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasSuffix(l, " ") {
			t.Errorf("line %q ends in spaces", l)
		}
	}
}
