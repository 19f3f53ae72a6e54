package watch

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/internal/cmd/scan"
	"github.com/kdiag/kdiag/netstat"
)

// A broker host's view in watch (--listen-ports, --by-client): each scan's
// connections by client address, with the connections each client opened
// per minute (analyzer.ClientTracker), drawn live instead of the table of
// processes, exported as metrics, and summed up at exit.

// clientHeader is the live table's header: scan's columns, and NEW/MIN, the
// connections each client opened per minute over the last minute.
func clientHeader() []string {
	h := scan.ClientHeader
	return append(append(h[:len(h)-1:len(h)-1], "NEW/MIN"), h[len(h)-1])
}

// clientRow is c's row under clientHeader.
func clientRow(c analyzer.ClientCounts) []string {
	r := scan.ClientRow(c)
	return append(append(r[:len(r)-1:len(r)-1], newPerMinute(c)), r[len(r)-1])
}

// newPerMinute writes c's rate of new connections, "-" before it has one
// (a single scan).
func newPerMinute(c analyzer.ClientCounts) string {
	if !c.HasRate {
		return "-"
	}
	return fmt.Sprintf("%.1f", c.OpenedPerMinute)
}

// drawClients draws one scan of the broker host's view: on a terminal the
// table of clients redrawn in place, else one plain line.
func (v *liveView) drawClients(s *netstat.Snapshot, cs []analyzer.ClientCounts, ports []uint16, dur time.Duration) {
	v.n++
	if !v.io.IsStdoutTTY() {
		fmt.Fprintln(v.io.Out, plainClientLine(s, cs, dur))
		return
	}
	var buf bytes.Buffer
	if v.lines > 0 {
		fmt.Fprintf(&buf, "\x1b[%dA\x1b[J", v.lines)
	}
	var tb bytes.Buffer
	fmt.Fprintf(&tb, "kdiag watch  %s  every %s  scan %s  sample %d  clients of port %s  (Ctrl-C: stop)\n",
		s.Time.Format("15:04:05"), v.interval, scanLabel(s, dur), v.n, portList(ports))
	writeClientTable(&tb, cs, maxRows)
	v.lines = bytes.Count(tb.Bytes(), []byte("\n"))
	buf.Write(tb.Bytes())
	v.io.Out.Write(buf.Bytes())
}

// writeClientTable writes the clients, at most rows of them (0: all).
func writeClientTable(w io.Writer, cs []analyzer.ClientCounts, rows int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(clientHeader(), "\t"))
	for i, c := range cs {
		if rows > 0 && i == rows {
			fmt.Fprintf(tw, "…\t%d more\n", len(cs)-rows)
			break
		}
		fmt.Fprintln(tw, strings.Join(clientRow(c), "\t"))
	}
	tw.Flush()
}

// plainClientLine is one scan of the broker host's view as one line of
// key=value fields: the totals, then the three clients with the most
// connections.
func plainClientLine(s *netstat.Snapshot, cs []analyzer.ClientCounts, dur time.Duration) string {
	var sum analyzer.Counts
	opened := 0.0
	for _, c := range cs {
		for i, n := range c.Counts {
			sum[i] += n
		}
		opened += c.OpenedPerMinute
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s clients=%d connections=%d established=%d fin_wait2=%d close_wait=%d time_wait=%d new=%.1f/min scan=%s",
		s.Time.UTC().Format(time.RFC3339), len(cs), sum.Total(), sum.Get(netstat.Established), sum.Get(netstat.FinWait2),
		sum.Get(netstat.CloseWait), sum.Get(netstat.TimeWait), opened, scanLabel(s, dur))
	for i, c := range cs {
		if i == 3 {
			break
		}
		fmt.Fprintf(&b, " | %s established=%d fin_wait2=%d close_wait=%d time_wait=%d new=%s/min", c.Client, c.Counts.Get(netstat.Established),
			c.Counts.Get(netstat.FinWait2), c.Counts.Get(netstat.CloseWait), c.Counts.Get(netstat.TimeWait), newPerMinute(c))
	}
	return b.String()
}

// writeClientSummary writes, at the end of the watch, the clients at the
// last scan.
func writeClientSummary(w io.Writer, cs []analyzer.ClientCounts, ports []uint16) {
	if len(cs) == 0 {
		fmt.Fprintf(w, "Clients of port %s: none at the last scan.\n\n", portList(ports))
		return
	}
	fmt.Fprintf(w, "Clients of port %s at the last scan (NEW/MIN: connections opened per minute over the last minute, as new client ports between scans):\n", portList(ports))
	writeClientTable(w, cs, 0)
	fmt.Fprintln(w)
}

// portList writes ports as "9092" or "9092,9093".
func portList(ports []uint16) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ",")
}
