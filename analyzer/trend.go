package analyzer

import (
	"fmt"
	"math"
	"time"
)

// Verdict is what a count series is doing over a window.
type Verdict int

// Verdicts. TooShort comes first so that the zero value never claims a trend.
const (
	// TooShort: fewer than Options.MinSamples samples or a window shorter
	// than Options.MinDuration; no claim is made.
	TooShort Verdict = iota
	// Steady: no significant trend (the count holds, or moves within noise).
	Steady
	// Growing: the count rises significantly: for CLOSE_WAIT, a leak.
	Growing
	// Draining: the count falls significantly: the sockets are being closed.
	Draining
	// Step: a rise the fit calls growing that is bounded: the peer closed
	// connections the process already had (a broker's idle close of
	// several at once), and no more arrive. A process cannot hold more
	// CLOSE_WAIT than it has connections; a leak keeps making new ones.
	// Set on CLOSE_WAIT trends only (see stepOf).
	Step
)

var verdictNames = [...]string{TooShort: "too-short", Steady: "steady", Growing: "growing", Draining: "draining", Step: "step"}

// String returns "too-short", "steady", "growing", "draining" or "step".
func (v Verdict) String() string {
	if v >= 0 && int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// MarshalText writes the verdict's name.
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText reads a verdict's name.
func (v *Verdict) UnmarshalText(b []byte) error {
	for i, n := range verdictNames {
		if n == string(b) {
			*v = Verdict(i)
			return nil
		}
	}
	return fmt.Errorf("unknown verdict %q", b)
}

// Trend is a least-squares line fitted to a count series, with what the
// verdict rests on.
type Trend struct {
	// Samples is the number of points fitted; Span the time they cover.
	Samples int           `json:"samples"`
	Span    time.Duration `json:"span_ns"`
	// First, Last, Min and Max are observed counts.
	First int `json:"first"`
	Last  int `json:"last"`
	Min   int `json:"min"`
	Max   int `json:"max"`
	// PerMinute is the fitted slope in sockets per minute.
	PerMinute float64 `json:"per_minute"`
	// StdErr is the slope's standard error (sockets per minute); 0 when the
	// points lie exactly on the line.
	StdErr float64 `json:"stderr"`
	// Change is the fitted change over the window: PerMinute times Span.
	Change  float64 `json:"change"`
	Verdict Verdict `json:"verdict"`
}

// Fit fits counts[i] observed at times[i] (same length, times ascending) and
// gives the verdict under opts' thresholds:
//
//   - TooShort when there are fewer than MinSamples points or they span less
//     than MinDuration: a few samples cannot tell a leak from a burst.
//   - Growing when the slope is positive, at least MinT standard errors from
//     zero (a t statistic: the fit is unlikely to be noise around a flat
//     line), and the fitted change over the window is at least MinChange
//     sockets (so that a significant but tiny drift, 3 → 4, is not a leak).
//   - Draining, symmetrically, for a falling count.
//   - Steady otherwise.
//
// Points exactly on a line have no residual error; then any slope passes the
// t test and MinChange alone decides.
func Fit(times []time.Time, counts []int, opts Options) Trend {
	opts = opts.withDefaults()
	n := len(counts)
	tr := Trend{Samples: n}
	if n == 0 || len(times) != n {
		return tr
	}
	tr.First, tr.Last, tr.Min, tr.Max = counts[0], counts[n-1], counts[0], counts[0]
	for _, c := range counts {
		tr.Min, tr.Max = min(tr.Min, c), max(tr.Max, c)
	}
	tr.Span = times[n-1].Sub(times[0])
	if n < 3 || tr.Span <= 0 {
		return tr
	}
	t0 := times[0]
	var sx, sy float64
	for i := range n {
		sx += times[i].Sub(t0).Minutes()
		sy += float64(counts[i])
	}
	mx, my := sx/float64(n), sy/float64(n)
	var sxx, sxy float64
	for i := range n {
		dx := times[i].Sub(t0).Minutes() - mx
		sxx += dx * dx
		sxy += dx * (float64(counts[i]) - my)
	}
	if sxx == 0 {
		return tr
	}
	slope := sxy / sxx
	var ssr float64
	for i := range n {
		fit := my + slope*(times[i].Sub(t0).Minutes()-mx)
		r := float64(counts[i]) - fit
		ssr += r * r
	}
	tr.PerMinute = slope
	tr.StdErr = math.Sqrt(ssr / float64(n-2) / sxx)
	// Rounding leaves a residual of ~1e-13 on exact lines; treat it as zero.
	if tr.StdErr < 1e-9*math.Max(1, math.Abs(slope)) {
		tr.StdErr = 0
	}
	tr.Change = slope * tr.Span.Minutes()
	if n < opts.MinSamples || tr.Span < opts.MinDuration {
		tr.Verdict = TooShort
		return tr
	}
	significant := tr.StdErr == 0 || math.Abs(slope)/tr.StdErr >= opts.MinT
	switch {
	case significant && slope > 0 && tr.Change >= opts.MinChange:
		tr.Verdict = Growing
	case significant && slope < 0 && -tr.Change >= opts.MinChange:
		tr.Verdict = Draining
	default:
		tr.Verdict = Steady
	}
	return tr
}
