package repro

import (
	"fmt"
	"github.com/kdiag/kdiag/internal/human"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kdiag/kdiag/repro"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
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
}

func newProgress(w io.Writer, tty bool, scs []repro.Scenario, d time.Duration) *progress {
	p := &progress{w: w, tty: tty, duration: d, lines: make([]string, len(scs)), last: make([]repro.Sample, len(scs)), peak: make([]int, len(scs)), printed: make([]time.Duration, len(scs))}
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
		b.WriteString(l)
		b.WriteString("\n")
	}
	p.drawn = true
	_, _ = io.WriteString(p.w, b.String())
}

func (p *progress) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw(true)
	fmt.Fprintln(p.w)
}

// configCell lists what the producer ran with.
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
	if r.CallbackDelayMS > 0 {
		parts = append(parts, "callback blocks "+human.AgeMS(r.CallbackDelayMS))
	}
	if r.ProducerPerMessage {
		parts = append(parts, "new producer per message, never closed")
	}
	return strings.Join(parts, "\n")
}

// writeTable prints one row per scenario.
func writeTable(w io.Writer, results []*repro.Result) {
	if len(results) == 0 {
		return
	}
	t := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNormal),
		tablewriter.WithColumnWidths(tw.NewMapper[int, int]().Set(7, 40)),
	)
	t.Header("SCENARIO", "PRODUCER CONFIG", "READER", "CLOSE_WAIT\npeak/final", "OLDEST\nCLOSE_WAIT", "CLIENT\nCONNECTIONS", "BROKER\nCONNECTIONS", "VERDICT")
	for _, r := range results {
		client, brk := "n/a", "n/a\n(real cluster)"
		if c := r.Client; c != nil {
			client = fmt.Sprintf("opened %d\nclosed %d\npeer closed %d", c.ConnectionsOpened, c.ClosedByClient(), c.PeerCloses)
		}
		if b := r.Broker; b != nil {
			brk = fmt.Sprintf("accepted %d\nidle-closed %d\nclient-closed %d", b.Accepted, b.ClosedIdle, b.ClosedByClient)
		}
		verdict := r.Verdict
		if !r.AsExpected {
			verdict += "\n(NOT what this scenario is meant to show: " + r.Expected + ")"
		}
		_ = t.Append(r.Name, configCell(r), r.Reader,
			strconv.Itoa(r.CloseWaitPeak)+" / "+strconv.Itoa(r.CloseWaitFinal),
			human.AgeMS(r.CloseWaitOldestMS), client, brk, verdict)
	}
	_ = t.Render()
}

// writeExplanations says, under the table, what each scenario shows and
// what was noted while it ran.
func writeExplanations(w io.Writer, results []*repro.Result) {
	if len(results) == 0 {
		return
	}
	fmt.Fprintln(w, "\nWhat each scenario shows:")
	for _, r := range results {
		fmt.Fprintf(w, "  %-17s %s\n", r.Name, wrap(r.Shows, 78, strings.Repeat(" ", 20)))
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  %-17s note: %s\n", "", wrap(n, 72, strings.Repeat(" ", 26)))
		}
	}
	fmt.Fprintln(w, `
CLOSE_WAIT means the broker closed the connection (it sent FIN) and the client has not
closed its end. Linux keeps such a socket, with its file descriptor, until the client
closes it; a client that never reads an idle connection never notices. To see it on a
host: kdiag scan --state close-wait. To check a config: kdiag lint FILE.`)
}
