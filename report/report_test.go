package report

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/netstat"
	"github.com/kdiag/kdiag/record"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fixedRecording is a real recording: `kdiag watch --record` sampling the
// leaker helper (internal/cmd/watch/testdata/leaker) while its CLOSE_WAIT
// sockets grew, held and drained; see scripts/record-leak.sh.
const fixedRecording = "testdata/leak.jsonl"

func load(t *testing.T) Input {
	t.Helper()
	snaps, notes, err := record.ReadFile(fixedRecording)
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, n := range notes {
		ns = append(ns, n.String())
	}
	// Recent: the recording is short; look at its last 10 s for "now".
	a := analyzer.Analyze(snaps, analyzer.Options{Recent: 10 * time.Second, StuckAge: 5 * time.Second})
	return Input{Origin: "recording leak.jsonl", Analysis: a, Notes: ns}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

func TestGoldenHTML(t *testing.T) {
	var buf bytes.Buffer
	if err := HTML(&buf, load(t)); err != nil {
		t.Fatal(err)
	}
	golden(t, "leak.html.golden", buf.Bytes())
	html := buf.String()
	for _, bad := range []string{"http://", "https://", "<script", "src="} {
		// xmlns is the one URL allowed: it names SVG's namespace, fetches nothing.
		if strings.Contains(strings.ReplaceAll(html, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("report is not self-contained: contains %q", bad)
		}
	}
}

func TestGoldenMarkdown(t *testing.T) {
	var buf bytes.Buffer
	if err := Markdown(&buf, load(t)); err != nil {
		t.Fatal(err)
	}
	golden(t, "leak.md.golden", buf.Bytes())
}

func TestGoldenText(t *testing.T) {
	var buf bytes.Buffer
	if err := Text(&buf, load(t).Analysis); err != nil {
		t.Fatal(err)
	}
	golden(t, "leak.txt.golden", buf.Bytes())
}

// TestChartIsWellFormedSVG parses each chart as XML and checks both lines
// have a point per sample inside the plot area.
func TestChartIsWellFormedSVG(t *testing.T) {
	in := load(t)
	p := newPage(in)
	if len(p.Charts) == 0 {
		t.Fatal("no chart")
	}
	var buf bytes.Buffer
	if err := HTML(&buf, in); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	start := strings.Index(html, "<svg")
	end := strings.Index(html, "</svg>") + len("</svg>")
	var svg struct {
		Polylines []struct {
			Class  string `xml:"class,attr"`
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
	}
	if err := xml.Unmarshal([]byte(html[start:end]), &svg); err != nil {
		t.Fatalf("chart is not well-formed XML: %v", err)
	}
	if len(svg.Polylines) != 2 {
		t.Fatalf("polylines = %d, want 2", len(svg.Polylines))
	}
	c := p.Charts[0]
	for _, pl := range svg.Polylines {
		pts := strings.Fields(pl.Points)
		if len(pts) != len(in.Analysis.Processes[0].Points) {
			t.Errorf("%s: %d points, want %d", pl.Class, len(pts), len(in.Analysis.Processes[0].Points))
		}
		for _, pt := range pts {
			var x, y float64
			if _, err := fmtSscanf(pt, &x, &y); err != nil || x < c.X0 || x > c.X1 || y < c.Y0 || y > c.Y1 {
				t.Errorf("%s: point %q outside the plot (%v)", pl.Class, pt, err)
				break
			}
		}
	}
}

func TestHTMLEscapes(t *testing.T) {
	in := load(t)
	a := *in.Analysis
	a.Processes = append([]analyzer.ProcessSeries(nil), a.Processes...)
	a.Processes[0].Process.Name = `<img src=x onerror=alert(1)>`
	a.Findings = []analyzer.Finding{{Severity: analyzer.Critical, Summary: `</li><script>alert(1)</script>`}}
	var buf bytes.Buffer
	if err := HTML(&buf, Input{Origin: `"><script>`, Analysis: &a}); err != nil {
		t.Fatal(err)
	}
	if s := buf.String(); strings.Contains(s, "<script") || strings.Contains(s, "<img") {
		t.Errorf("unescaped markup in the report")
	}
	buf.Reset()
	if err := Markdown(&buf, Input{Origin: "x", Analysis: &a}); err != nil {
		t.Fatal(err)
	}
	if s := buf.String(); strings.Contains(s, "<script") || strings.Contains(s, "<img") {
		t.Errorf("raw HTML in the Markdown")
	}
}

func TestNiceScale(t *testing.T) {
	for _, tc := range []struct{ peak, max, step int }{{0, 1, 1}, {1, 1, 1}, {4, 4, 1}, {7, 8, 2}, {60, 60, 20}, {61, 80, 20}, {999, 1000, 200}} {
		m, s := niceScale(tc.peak)
		if m != tc.max || s != tc.step {
			t.Errorf("niceScale(%d) = %d, %d; want %d, %d", tc.peak, m, s, tc.max, tc.step)
		}
	}
}

func TestSparkline(t *testing.T) {
	var pts []analyzer.Point
	for i := range 8 {
		var c analyzer.Counts
		c[netstat.CloseWait] = i
		pts = append(pts, analyzer.Point{Counts: c})
	}
	if got := sparkline(pts, netstat.CloseWait, 40); got != "▁▂▃▄▅▆▇█" {
		t.Errorf("sparkline = %q", got)
	}
}

func fmtSscanf(s string, x, y *float64) (int, error) { return fmt.Sscanf(s, "%g,%g", x, y) }

// TestTooShortIsNotAllClear: the first 20 s of the recorded leak, its
// CLOSE_WAIT count rising, make no finding (a trend needs 30 s), and the
// text must say the window was too short rather than that nothing grows.
func TestTooShortIsNotAllClear(t *testing.T) {
	snaps, _, err := record.ReadFile(fixedRecording)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for n < len(snaps) && snaps[n].Time.Sub(snaps[0].Time) < 20*time.Second {
		n++
	}
	a := analyzer.Analyze(snaps[:n], analyzer.Options{})
	cw := 0
	for _, p := range a.Processes {
		cw += p.CloseWait.Last
	}
	if len(a.Findings) != 0 || cw == 0 {
		t.Fatalf("the recording's first 20 s: %d findings, %d CLOSE_WAIT at the end; want none and some", len(a.Findings), cw)
	}
	var b bytes.Buffer
	if err := Text(&b, a); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "too short to tell a leak from a burst") || strings.Contains(out, "none growing") {
		t.Errorf("text for a too-short window:\n%s", out)
	}
	t.Logf("%s", out)
}
