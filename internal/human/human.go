// Package human formats counts and durations for people, the same way in
// every kdiag output (findings, reports, repro verdicts, command summaries).
package human

import (
	"fmt"
	"time"
)

// Plural writes n with its noun, adding "s" when n is not 1: "1 socket",
// "3 sockets".
func Plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Round rounds a duration to what a person reads: to the minute past an
// hour, to the second past ten seconds, else to a tenth of a second.
func Round(d time.Duration) time.Duration {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute)
	case d >= 10*time.Second:
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// Age writes how old something is (a CLOSE_WAIT socket, the oldest of a
// pile) compactly, the same in every table, summary and log line: "0s",
// "0.4s", "9.8s", "45s", "3m12s", "2h05m", "3d04h". It rounds as Round does,
// so an age here reads the same as in a diagnosis, and past a day to the
// hour; two units at most, the second zero-padded, so that ages in a column
// line up and compare at a glance. Below zero (a clock step) it is "0s".
func Age(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	const day = 24 * time.Hour
	d = Round(d)
	if d >= day {
		d = d.Round(time.Hour)
	}
	switch {
	case d >= day:
		return fmt.Sprintf("%dd%02dh", int64(d/day), int64(d%day/time.Hour))
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int64(d/time.Hour), int64(d%time.Hour/time.Minute))
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int64(d/time.Minute), int64(d%time.Minute/time.Second))
	}
	// Below a minute Round leaves whole seconds or tenths: 12s, 1.2s.
	tenths := int64(d / (100 * time.Millisecond))
	if tenths%10 == 0 {
		return fmt.Sprintf("%ds", tenths/10)
	}
	return fmt.Sprintf("%d.%ds", tenths/10, tenths%10)
}

// AgeMS is Age of a count of milliseconds, as JSON results carry them.
func AgeMS(ms int64) string { return Age(time.Duration(ms) * time.Millisecond) }
