package report

import (
	"embed"
	"fmt"
	"github.com/kdiag/kdiag/internal/human"
	"html/template"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/netstat"
)

//go:embed templates/*.tmpl
var templates embed.FS

var (
	// Parsed on first use, not at start-up: every kdiag command pays for a
	// package-level parse, and only report needs it.
	htmlTmpl = sync.OnceValue(func() *template.Template {
		return template.Must(template.New("report.html.tmpl").Funcs(funcs).ParseFS(templates, "templates/report.html.tmpl"))
	})
	funcs = template.FuncMap{
		"upper": strings.ToUpper,
		"time":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"join":  strings.Join,
	}
)

// page is what the HTML template renders.
type page struct {
	Origin   string
	A        *analyzer.Analysis
	Duration string
	Sources  string
	CWLast   int
	EstLast  int
	// HeldLast counts the held CLOSE sockets at the last sample (fds of
	// TCP sockets in no kernel table: a CLOSE_WAIT one reset, still held).
	// Held is true when any sample had one: the CLOSE_WAIT trend columns
	// then count both (analyzer.Counts.Leaked), and say so.
	HeldLast int
	Held     bool
	Counts   map[string]int
	Rows     []row
	Charts   []chart
	Notes    []string
	// Unseen is UnseenLine: shown above the findings.
	Unseen string
}

func newPage(in Input) page {
	a := in.Analysis
	p := page{Origin: in.Origin, A: a, Duration: human.Age(a.End.Sub(a.Start)), Sources: strings.Join(a.Sources, ", "),
		Counts: map[string]int{}, Rows: rows(a), Unseen: UnseenLine(a)}
	for _, ps := range a.Processes {
		// Not ps.CloseWait.Last: that trend counts the held CLOSE
		// sockets too, so "CLOSE_WAIT at the last sample" said 6 for 3
		// CLOSE_WAIT and 3 held CLOSE.
		p.CWLast += ps.Last.Get(netstat.CloseWait)
		p.HeldLast += ps.Last.Get(netstat.Close)
		p.EstLast += ps.Established.Last
		p.Held = p.Held || hadHeld(ps.Points)
	}
	for _, f := range a.Findings {
		p.Counts[f.Severity.String()]++
	}
	for i := range a.Processes {
		if i == maxCharts {
			break
		}
		ps := &a.Processes[i]
		if ps.CloseWait.Max == 0 && ps.Established.Max == 0 {
			continue
		}
		p.Charts = append(p.Charts, newChart(p.Rows[i].ChartID, fmt.Sprintf("%s (pid %d)", ps.Name(), ps.Key.PID), a.Start, a.End, ps.Points))
		p.Rows[i].Charted = true
	}
	p.Notes = append(p.Notes, in.Notes...)
	for _, n := range a.Notes {
		p.Notes = append(p.Notes, fmt.Sprintf("%s (%s)", n.Text, human.Plural(n.Count, "scan")))
	}
	return p
}

// HTML writes a self-contained page: inline CSS and SVG, no script, no
// external asset, every value escaped by html/template.
func HTML(w io.Writer, in Input) error {
	return htmlTmpl().Execute(w, newPage(in))
}

// chart is one process's SVG line chart.
type chart struct {
	ID, Title      string
	W, H           int
	X0, Y0, X1, Y1 float64 // plot area: left, top, right, bottom
	TickY          float64 // bottom of the x tick marks
	YMid           float64 // middle of the y axis, for its label
	XTicks, YTicks []tick
	Lines          []line
	XLabel, YLabel string
}

type tick struct {
	Pos   float64
	Label string
}

type line struct {
	Name, Class string
	Points      string
	LX, LY      float64 // legend position: left, text baseline
	RY          float64 // top of the legend's colour box
	Last, Max   int
}

func newChart(id, title string, start, end time.Time, pts []analyzer.Point) chart {
	c := chart{ID: id, Title: title, W: 760, H: 280, X0: 60, Y0: 30, X1: 720, Y1: 240,
		XLabel: "time (UTC)", YLabel: "sockets", TickY: 245, YMid: 135}
	peak := 0
	for _, p := range pts {
		peak = max(peak, p.Counts.Get(netstat.CloseWait), p.Counts.Get(netstat.Established), p.Counts.Get(netstat.Close))
	}
	ymax, step := niceScale(peak)
	span := end.Sub(start)
	x := func(t time.Time) float64 {
		if span <= 0 {
			return (c.X0 + c.X1) / 2
		}
		return c.X0 + float64(t.Sub(start))/float64(span)*(c.X1-c.X0)
	}
	y := func(v int) float64 { return c.Y1 - float64(v)/float64(ymax)*(c.Y1-c.Y0) }
	for v := 0; v <= ymax; v += step {
		c.YTicks = append(c.YTicks, tick{y(v), fmt.Sprint(v)})
	}
	layout := "15:04:05"
	if span >= 24*time.Hour {
		layout = "01-02 15:04"
	}
	for i := range 5 {
		t := start.Add(span * time.Duration(i) / 4)
		c.XTicks = append(c.XTicks, tick{x(t), t.UTC().Format(layout)})
		if span <= 0 {
			break
		}
	}
	series := []struct {
		st          netstat.State
		name, class string
	}{{netstat.CloseWait, "CLOSE_WAIT", "cw"}, {netstat.Established, "ESTABLISHED", "est"}}
	if hadHeld(pts) {
		series = append(series, struct {
			st          netstat.State
			name, class string
		}{netstat.Close, "held CLOSE", "held"})
	}
	for _, s := range series {
		var b strings.Builder
		// Two legends side by side above the plot; a third (held CLOSE)
		// under the first, which the chart's width leaves no room beside.
		i := len(c.Lines)
		l := line{Name: s.name, Class: s.class, LX: 330 + float64(i%2)*200, LY: 14 + float64(i/2)*13}
		l.RY = l.LY - 9
		for i, p := range pts {
			if i > 0 {
				b.WriteByte(' ')
			}
			v := p.Counts.Get(s.st)
			fmt.Fprintf(&b, "%.1f,%.1f", x(p.Time), y(v))
			l.Max = max(l.Max, v)
			l.Last = v
		}
		l.Points = b.String()
		c.Lines = append(c.Lines, l)
	}
	return c
}

// niceScale returns an axis maximum at or above peak and a tick step, both
// 1, 2 or 5 times a power of ten, with about five ticks.
func niceScale(peak int) (ymax, step int) {
	if peak <= 0 {
		return 1, 1
	}
	raw := float64(peak) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step = int(mag)
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = int(m * mag)
			break
		}
	}
	step = max(step, 1)
	ymax = (peak + step - 1) / step * step
	return ymax, step
}

// hadHeld reports whether any point counts a held CLOSE socket.
func hadHeld(pts []analyzer.Point) bool {
	for _, p := range pts {
		if p.Counts.Get(netstat.Close) > 0 {
			return true
		}
	}
	return false
}
