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
