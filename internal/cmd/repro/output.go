package repro

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kdiag/kdiag/broker"
	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/internal/table"
	"github.com/kdiag/kdiag/producer"

	"github.com/kdiag/kdiag/repro"
	"github.com/olekukonko/tablewriter/pkg/twwidth"
)

// progress shows each scenario's socket counts as it runs: on a terminal one
// line per scenario redrawn in place, elsewhere a plain line whenever a
// count changes.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	duration time.Duration
	names    []string
	lines    []string
	last     []repro.Sample
	peak     []int
	printed  []time.Duration // plain mode: the Elapsed of each scenario's last printed line
	drawn    bool
	lastDraw time.Time
	width    int // a redrawn line longer than this would wrap and break the redraw
}

func newProgress(w io.Writer, tty bool, scs []repro.Scenario, d time.Duration, width int) *progress {
	p := &progress{w: w, tty: tty, duration: d, width: width, lines: make([]string, len(scs)), last: make([]repro.Sample, len(scs)), peak: make([]int, len(scs)), printed: make([]time.Duration, len(scs))}
	for i, s := range scs {
		p.names = append(p.names, s.Name)
		p.lines[i] = fmt.Sprintf("  %-17s waiting", s.Name)
	}
	return p
}

func (p *progress) start(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines[i] = fmt.Sprintf("  %-17s starting the broker and the producer", p.names[i])
	if !p.tty {
		fmt.Fprintln(p.w, strings.TrimSpace(p.lines[i]))
	}
	p.draw(true)
}

func (p *progress) update(i int, s repro.Sample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.last[i]
	p.last[i] = s
	p.peak[i] = max(p.peak[i], s.CloseWait)
	p.lines[i] = fmt.Sprintf("  %-17s %5.1fs/%-5s ESTABLISHED %3d   CLOSE_WAIT %3d (peak %d)",
		p.names[i], s.Elapsed.Seconds(), p.duration.String(), s.Established, s.CloseWait, p.peak[i])
	if !p.tty {
		// A line when a count changes, at most one a second per scenario.
		changed := s.Established != prev.Established || s.CloseWait != prev.CloseWait
		if changed && (p.printed[i] == 0 || s.Elapsed-p.printed[i] >= time.Second) {
			p.printed[i] = s.Elapsed
			fmt.Fprintln(p.w, strings.TrimSpace(p.lines[i]))
		} else if changed {
			p.last[i] = prev // report the change on a later sample
		}
		return
	}
	p.draw(false)
}

func (p *progress) finish(i int, r *repro.Result, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err != nil:
		p.lines[i] = fmt.Sprintf("  %-17s failed: %v", p.names[i], err)
	case r != nil:
		mark := "as expected"
		if !r.AsExpected {
			mark = "NOT as expected"
		}
		p.lines[i] = fmt.Sprintf("  %-17s done: CLOSE_WAIT peak %d, final %d (%s)", p.names[i], r.CloseWaitPeak, r.CloseWaitFinal, mark)
	}
	if !p.tty {
		fmt.Fprintln(p.w, strings.TrimSpace(p.lines[i]))
	}
	p.draw(true)
}

// draw redraws every line in place, at most 10 times a second unless force.
func (p *progress) draw(force bool) {
	if !p.tty || (!force && time.Since(p.lastDraw) < 100*time.Millisecond) {
		return
	}
	p.lastDraw = time.Now()
	var b strings.Builder
	if p.drawn {
		fmt.Fprintf(&b, "\x1b[%dA", len(p.lines))
	}
	for _, l := range p.lines {
		b.WriteString("\r\x1b[K")
		b.WriteString(truncate(l, p.width-1))
		b.WriteString("\n")
	}
	p.drawn = true
	_, _ = io.WriteString(p.w, b.String())
}

// truncate cuts s to at most width display columns.
func truncate(s string, width int) string {
	if width <= 0 || twwidth.Width(s) <= width {
		return s
	}
	r := []rune(s)
	for len(r) > 0 && twwidth.Width(string(r)) > width {
		r = r[:len(r)-1]
	}
	return string(r)
}

func (p *progress) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw(true)
	fmt.Fprintln(p.w)
}

// DefaultWidth is the width the table and the text fit when standard
// output is not a terminal or its width is unknown.
const DefaultWidth = 80

// configCell lists what the producer ran with, at the run's scale.
func configCell(r *repro.Result) string {
	keys := make([]string, 0, len(r.Config))
	for k := range r.Config {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+r.Config[k])
	}
	parts = append(parts, "a message every "+human.AgeMS(r.IntervalMS))
	if r.BlockCallbacks {
		parts = append(parts, "callbacks block until released")
	}
	if r.ProducerPerMessage {
		parts = append(parts, "new producer per message, never closed")
	}
	return strings.Join(parts, "\n")
}

// clientCell is the producer's own count of its connections: who closed
// each and why, in the words the verdicts use ("the client closed 5 idle
// connections" is its idle-closed line, not the sum with those Close
// closed at exit).
func clientCell(c *producer.Stats) string {
	if c == nil {
		return "n/a"
	}
	lines := []string{fmt.Sprintf("opened %d", c.ConnectionsOpened), fmt.Sprintf("idle-closed %d", c.ClosedIdle),
		fmt.Sprintf("closed at exit %d", c.ClosedOnClose)}
	if c.ClosedOnError > 0 {
		lines = append(lines, fmt.Sprintf("closed on error %d", c.ClosedOnError))
	}
	lines = append(lines, fmt.Sprintf("peer closed %d", c.PeerCloses))
	return strings.Join(lines, "\n")
}

func brokerCell(b *broker.Stats) string {
	if b == nil {
		return "n/a\n(real cluster)"
	}
	return fmt.Sprintf("accepted %d\nidle-closed %d\nclient-closed %d", b.Accepted, b.ClosedIdle, b.ClosedByClient)
}

// verdictText is the verdict, and what the scenario should have shown when
// it did not.
func verdictText(r *repro.Result) string {
	if r.AsExpected {
		return r.Verdict
	}
	return r.Verdict + "\n(NOT what this scenario is meant to show: " + r.Expected + ")"
}

// oldestCell is the longest any socket was seen in CLOSE_WAIT, "-" when
// none was.
func oldestCell(r *repro.Result) string {
	if r.CloseWaitPeak == 0 {
		return "-"
	}
	return human.AgeMS(r.CloseWaitOldestMS)
}

func closeWaitCell(r *repro.Result) string {
	return strconv.Itoa(r.CloseWaitPeak) + " / " + strconv.Itoa(r.CloseWaitFinal)
}

// writeTable prints one row per scenario fitted to width columns: the
// CLOSE_WAIT figures and the verdict, wrapped into what the other columns
// leave. The producer's configuration and both sides' connection counts
// are in -o wide and -o json.
func writeTable(w io.Writer, results []*repro.Result, width int) error {
	if len(results) == 0 {
		return nil
	}
	header := []string{"SCENARIO", "CLOSE_WAIT\npeak/final", "OLDEST\nCLOSE_WAIT", "VERDICT"}
	rows := make([][]string, len(results))
	for i, r := range results {
		rows[i] = []string{r.Name, closeWaitCell(r), oldestCell(r), ""}
	}
	// The fixed columns take their widest cell; the verdict what is left,
	// never less than minVerdict.
	const minVerdict = 24
	used := 0
	for c := 0; c < len(header)-1; c++ {
		wc := cellWidth(header[c])
		for _, row := range rows {
			wc = max(wc, cellWidth(row[c]))
		}
		used += wc + len(table.CellPad)
	}
	vw := max(width-used, minVerdict)
	for i, r := range results {
		var lines []string
		for _, para := range strings.Split(verdictText(r), "\n") {
			lines = append(lines, wrapLines(para, vw)...)
		}
		rows[i][len(header)-1] = strings.Join(lines, "\n")
	}
	return table.Render(w, header, rows)
}

// writeWide prints every detail, one row per scenario, at whatever width
// that takes: the configuration, the reader, the CLOSE_WAIT figures, the
// producer's and the broker's counts of connections and the verdict.
func writeWide(w io.Writer, results []*repro.Result) error {
	if len(results) == 0 {
		return nil
	}
	header := []string{"SCENARIO", "PRODUCER CONFIG", "READER", "CLOSE_WAIT\npeak/final", "OLDEST\nCLOSE_WAIT",
		"CLIENT\nCONNECTIONS", "BROKER\nCONNECTIONS", "VERDICT"}
	var rows [][]string
	for _, r := range results {
		rows = append(rows, []string{r.Name, configCell(r), r.Reader, closeWaitCell(r), oldestCell(r),
			clientCell(r.Client), brokerCell(r.Broker), verdictText(r)})
	}
	return table.Render(w, header, rows)
}

// cellWidth is the display width of a cell's widest line.
func cellWidth(cell string) int {
	n := 0
	for _, l := range strings.Split(cell, "\n") {
		n = max(n, twwidth.Width(l))
	}
	return n
}

// wrapLines breaks s into lines of at most width display columns, at
// spaces; a word longer than width has a line of its own.
func wrapLines(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && twwidth.Width(line)+1+twwidth.Width(word) > width {
			lines = append(lines, line)
			line = word
			continue
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// wrap is wrapLines joined, each line after the first indented.
func wrap(s string, width int, indent string) string {
	return strings.Join(wrapLines(s, width), "\n"+indent)
}

// writeExplanations says, under the table, what each scenario shows and
// what was noted while it ran, fitted to width columns.
func writeExplanations(w io.Writer, results []*repro.Result, width int) {
	if len(results) == 0 {
		return
	}
	const nameCol = 20 // "  " + 17 for the longest name + " "
	text := max(width-nameCol, 30)
	fmt.Fprintln(w, "\nWhat each scenario shows:")
	for _, r := range results {
		shows := r.Shows
		if r.StandsFor != "" {
			shows += ". Stands for " + r.StandsFor + "."
		}
		fmt.Fprintf(w, "  %-17s %s\n", r.Name, wrap(shows, text, strings.Repeat(" ", nameCol)))
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  %-17s note: %s\n", "", wrap(n, text-6, strings.Repeat(" ", nameCol+6)))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, wrap("CLOSE_WAIT means the broker closed the connection (it sent FIN) and the client has not closed its end. "+
		"Linux keeps such a socket, with its file descriptor, until the client closes it; a client that never reads an idle connection never notices. "+
		"To see it on a host: kdiag scan --state close-wait. To check a config: kdiag lint FILE.", max(width, 40), ""))
}
