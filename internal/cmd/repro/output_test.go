package repro

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kdiag/kdiag/repro"
	"github.com/olekukonko/tablewriter/pkg/twwidth"
)

func progressRun(tty bool) string {
	var buf bytes.Buffer
	scs := []repro.Scenario{{Name: "healthy"}, {Name: "passive-close"}}
	p := newProgress(&buf, tty, scs, 12*time.Second, 80)
	p.start(0)
	p.start(1)
	for i, cw := range []int{0, 0, 2, 2, 3} {
		d := time.Duration(i+1) * 1100 * time.Millisecond
		p.update(1, repro.Sample{Elapsed: d, ElapsedMS: d.Milliseconds(), Established: 3, CloseWait: cw})
		p.lastDraw = time.Time{} // draw every update in the test
	}
	p.finish(0, &repro.Result{AsExpected: true}, nil)
	p.finish(1, &repro.Result{CloseWaitPeak: 3, CloseWaitFinal: 3, AsExpected: true}, nil)
	p.close()
	return buf.String()
}

func TestProgressOnATerminalRedrawsInPlace(t *testing.T) {
	out := progressRun(true)
	// Every redraw after the first moves up over the two lines.
	if n := strings.Count(out, "\x1b[2A"); n < 5 {
		t.Errorf("%d cursor-up sequences, want one per redraw:\n%q", n, out)
	}
	last := out[strings.LastIndex(out, "\x1b[2A"):]
	for _, s := range []string{"healthy           done: CLOSE_WAIT peak 0, final 0 (as expected)", "passive-close     done: CLOSE_WAIT peak 3, final 3 (as expected)"} {
		if !strings.Contains(last, s) {
			t.Errorf("final redraw lacks %q:\n%q", s, last)
		}
	}
}

func TestProgressElsewherePrintsPlainLines(t *testing.T) {
	out := progressRun(false)
	if strings.Contains(out, "\x1b[") {
		t.Errorf("escape sequences in plain output:\n%q", out)
	}
	want := []string{
		"healthy           starting the broker and the producer",
		"passive-close     starting the broker and the producer",
		"passive-close       3.3s/12s   ESTABLISHED   3   CLOSE_WAIT   2 (peak 2)",
		"passive-close       5.5s/12s   ESTABLISHED   3   CLOSE_WAIT   3 (peak 3)",
		"healthy           done: CLOSE_WAIT peak 0, final 0 (as expected)",
		"passive-close     done: CLOSE_WAIT peak 3, final 3 (as expected)",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("plain output lacks %q:\n%s", w, out)
		}
	}
	// Unchanged counts print no line.
	if n := strings.Count(out, "CLOSE_WAIT   2 (peak 2)"); n != 1 {
		t.Errorf("the CLOSE_WAIT=2 line printed %d times, want once:\n%s", n, out)
	}
}

var update = flag.Bool("update", false, "rewrite the golden files")

// fixtureResults are the results of a real default run (`kdiag repro -o
// json` at the default scale, testdata/run.json).
func fixtureResults(t *testing.T) []*repro.Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Scenarios []*repro.Result `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Scenarios) != 5 {
		t.Fatalf("%d scenarios in the fixture, want 5", len(doc.Scenarios))
	}
	return doc.Scenarios
}

func golden(t *testing.T, name string, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s (-want +got):\n%s", path, d)
	}
}

// widest returns the display width of out's widest line, and that line.
func widest(out string) (int, string) {
	n, line := 0, ""
	for _, l := range strings.Split(out, "\n") {
		if w := twwidth.Width(l); w > n {
			n, line = w, l
		}
	}
	return n, line
}

// TestTableFitsTheTerminal: the default output (the headline, the table
// and what each scenario shows) fits the width it is given, in 80 and 120
// columns, with the detail left for -o wide.
func TestTableFitsTheTerminal(t *testing.T) {
	results := fixtureResults(t)
	for _, width := range []int{80, 120} {
		t.Run(strconv.Itoa(width), func(t *testing.T) {
			var b bytes.Buffer
			opts := &ReproOptions{BrokerIdle: 3 * time.Second, Parallel: true}
			fmt.Fprintln(&b, wrap(headline(opts, len(results), 12*time.Second), width, ""))
			if err := writeTable(&b, results, width); err != nil {
				t.Fatal(err)
			}
			writeExplanations(&b, results, width)
			out := b.String()
			if n, line := widest(out); n > width {
				t.Errorf("a line is %d columns wide, more than %d:\n%s", n, width, line)
			}
			golden(t, fmt.Sprintf("table-%d", width), out)
		})
	}
}

func TestWide(t *testing.T) {
	var b bytes.Buffer
	if err := writeWide(&b, fixtureResults(t)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range []string{"PRODUCER CONFIG", "connections.max.idle.ms=2700", "on-demand", "new producer per message, never closed",
		"callbacks block until released", "idle-closed 2", "closed at exit 1", "accepted 32", "request.timeout.ms=30000"} {
		if !strings.Contains(out, s) {
			t.Errorf("-o wide lacks %q", s)
		}
	}
	golden(t, "wide", out)
}

// TestClientCountsAgreeWithTheVerdict: the number of idle connections a
// verdict says the client closed is the one its CLIENT cell shows; the
// connections Close closed at exit are counted apart.
func TestClientCountsAgreeWithTheVerdict(t *testing.T) {
	said := regexp.MustCompile(`the client closed (\d+) idle connection`)
	checked := 0
	for _, r := range fixtureResults(t) {
		m := said.FindStringSubmatch(r.Verdict)
		if m == nil {
			continue
		}
		checked++
		if cell := clientCell(r.Client); !strings.Contains(cell, "idle-closed "+m[1]+"\n") {
			t.Errorf("%s: the verdict says %s idle connections, the CLIENT cell says:\n%s", r.Name, m[1], cell)
		}
		if r.Client.ClosedOnClose == 0 {
			t.Errorf("%s: no connection closed at exit in the fixture, so this checks nothing about them", r.Name)
		}
	}
	if checked == 0 {
		t.Fatal("no verdict in the fixture names the client's idle closes")
	}
}

// TestOneScale: the table and the text under it give every time at the
// run's scale; only the headline names real ones, to say what they became.
func TestOneScale(t *testing.T) {
	var b bytes.Buffer
	results := fixtureResults(t)
	if err := writeTable(&b, results, 120); err != nil {
		t.Fatal(err)
	}
	writeExplanations(&b, results, 120)
	if err := writeWide(&b, results); err != nil {
		t.Fatal(err)
	}
	real := regexp.MustCompile(`\b(9m|10m|20m|5m)\b|\b\d+m\d+s\b`)
	if m := real.FindString(b.String()); m != "" {
		t.Errorf("a real-scale time %q in the output:\n%s", m, b.String())
	}
	head := headline(&ReproOptions{BrokerIdle: 3 * time.Second, Parallel: true}, 5, 12*time.Second)
	for _, s := range []string{"divided by 200", "10m idle timeout is 3s here", "9m is 2.7s"} {
		if !strings.Contains(head, s) {
			t.Errorf("headline %q does not say %q", head, s)
		}
	}
}
