package repro

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/kdiag/kdiag/analyzer"
	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/internal/human"
	"github.com/kdiag/kdiag/internal/table"
	"github.com/kdiag/kdiag/netstat"
	"github.com/kdiag/kdiag/report"
	"github.com/kdiag/kdiag/repro"
)

// maxConnLines bounds the connections the text lists (-o json and the
// reports have them all).
const maxConnLines = 20

// at writes a time since CMD started: "3.5s".
func at(ms int64) string { return human.AgeMS(ms) }

// brief writes a short time in milliseconds below a second ("40ms"), as
// human.AgeMS would round it to 0s.
func brief(ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + "ms"
	}
	return human.AgeMS(ms)
}

// timeRow is one row of the table over time.
type timeRow struct {
	ms                                      int64
	est, cw, held                           int
	opened, brokerClosed, clientClosed, rnd int
}

// timeRows makes the table over time: a row when a count changed, at most
// one a second (the counts of connections opened and closed add up over
// the rows it skips), and the last sample.
func timeRows(res *repro.CommandResult) []timeRow {
	var rows []timeRow
	var prev timeRow
	from := int64(-1)
	for i, s := range res.Series {
		r := timeRow{ms: s.ElapsedMS, est: s.Established, cw: s.CloseWait, held: s.HeldClose}
		for _, c := range res.Connections {
			if c.OpenedMS > from && c.OpenedMS <= r.ms {
				r.opened++
			}
			if c.ClosedMS > from && c.ClosedMS <= r.ms {
				switch c.ClosedBy {
				case "broker":
					r.brokerClosed++
				case "client":
					r.clientClosed++
				}
			}
		}
		for _, rd := range res.Rounds {
			if rd.AtMS > from && rd.AtMS <= r.ms {
				r.rnd++
			}
		}
		events := r.opened+r.brokerClosed+r.clientClosed+r.rnd > 0
		changed := events || r.est != prev.est || r.cw != prev.cw || r.held != prev.held
		last := i == len(res.Series)-1
		// A row for every sample with connections opened or closed, else
		// one when a count changed, at most every rowGap.
		if !(changed || last) || (len(rows) > 0 && !events && !last && r.ms-rows[len(rows)-1].ms < rowGap(res)) {
			continue
		}
		rows = append(rows, r)
		prev, from = r, r.ms
	}
	return rows
}

// rowGap is the least time between two rows of the table over time that
// only say a count changed: a second, more in a long run (about 60 rows).
func rowGap(res *repro.CommandResult) int64 {
	return max(1000, (res.DurationMS+res.MaxHoldMS)/60)
}

// writeTimeTable prints the table over time: what the command held toward
// the brokers, and the connections opened and closed, by whom.
func writeTimeTable(w io.Writer, res *repro.CommandResult) error {
	header := []string{"TIME", "ESTAB", "CLOSE_WAIT", "CLOSE\n(held)", "OPENED", "CLOSED BY\nBROKER", "CLOSED BY\nCLIENT"}
	var rows [][]string
	for _, r := range timeRows(res) {
		bc := strconv.Itoa(r.brokerClosed)
		if r.rnd > 0 && res.Closes == repro.ClosesDriven {
			bc += " (driven)"
		}
		rows = append(rows, []string{at(r.ms), strconv.Itoa(r.est), strconv.Itoa(r.cw), strconv.Itoa(r.held),
			strconv.Itoa(r.opened), bc, strconv.Itoa(r.clientClosed)})
	}
	if len(rows) == 0 {
		return nil
	}
	return table.Render(w, header, rows)
}

// closedByWords says who closed a connection first, for people.
func closedByWords(by string) string {
	switch by {
	case "":
		return "open"
	case "broker":
		return "broker (idle)"
	case "stopped":
		return "client, stopped by kdiag"
	case "kdiag":
		return "kdiag (cluster stopped)"
	}
	return by
}

// connSentence says what happened to one connection, from both sides.
func connSentence(c *repro.Conn) string {
	var b strings.Builder
	fmt.Fprintf(&b, "opened at %s, %s", at(c.OpenedMS), human.Plural(c.Requests, "request"))
	if c.LastRequestMS >= 0 && c.Requests > 1 {
		fmt.Fprintf(&b, " (the last at %s)", at(c.LastRequestMS))
	}
	switch c.ClosedBy {
	case "":
		b.WriteString("; open at the end")
	case "kdiag", "stopped":
		b.WriteString("; open until kdiag stopped the command")
	case "client":
		fmt.Fprintf(&b, "; the client closed it at %s", at(c.ClosedMS))
	case "broker":
		fmt.Fprintf(&b, "; the broker closed it at %s, idle %s; %s", at(c.ClosedMS), brief(c.IdleMS), afterClose(c))
	default:
		fmt.Fprintf(&b, "; closed at %s (%s)", at(c.ClosedMS), c.ClosedBy)
	}
	if c.ClosedBy == "broker" {
		if c.ReconnectMS >= 0 {
			fmt.Fprintf(&b, "; it reconnected (node %d) at %s", c.ReconnectNode, at(c.ReconnectMS))
		}
		if c.Held {
			b.WriteString(" [held]")
		}
	}
	return b.String()
}

// afterClose says what the client did with its end of a connection the
// broker closed.
func afterClose(c *repro.Conn) string {
	rq := ""
	if c.RecvQ > 0 {
		rq = fmt.Sprintf(" (Recv-Q %d)", c.RecvQ)
	}
	switch c.Outcome {
	case repro.OutcomeClosedAtOnce:
		return fmt.Sprintf("the client closed it at once (gone by %s)", at(c.GoneMS))
	case repro.OutcomeClosedLater:
		return fmt.Sprintf("the client held it in CLOSE_WAIT%s for %s, then closed it (gone by %s)", rq, at(c.CloseWaitMS), at(c.GoneMS))
	case repro.OutcomeHeldCloseWait:
		return fmt.Sprintf("the client held it in CLOSE_WAIT%s for %s, to the end", rq, at(c.CloseWaitMS))
	case repro.OutcomeHeldClose:
		s := fmt.Sprintf("the client held it in CLOSE_WAIT%s for %s, then, after keepalive's reset at %s, in CLOSE with its fd open for %s",
			rq, at(c.CloseWaitMS), at(c.HeldCloseAtMS), at(c.HeldCloseMS))
		if c.GoneMS >= 0 {
			s += fmt.Sprintf(" (gone by %s)", at(c.GoneMS))
		}
		return s
	}
	return "the client's end was not seen after the close"
}

// growthSentence says whether the connections the command held grew.
func growthSentence(res *repro.CommandResult) string {
	verb := "did not grow"
	if res.Grew {
		verb = "grew"
	}
	return fmt.Sprintf("%s, %s opened in all (at most %d held in the first third of the run, %d at the end)",
		verb, human.Plural(len(res.Connections), "connection"), res.ConnectionsFrom, res.ConnectionsTo)
}

// clientSentence names the client and how it was recognized.
func clientSentence(res *repro.CommandResult) string {
	if res.ClientPID == 0 {
		return "no process of the command held a connection to the brokers"
	}
	s := fmt.Sprintf("%s (pid %d)", res.Client, res.ClientPID)
	if len(res.Client.Evidence) > 0 {
		s += ": " + strings.Join(res.Client.Evidence, "; ")
	}
	return s
}

// writeCommandText prints a -- CMD run for people, width columns wide:
// the table over time, each connection, the client, the verdict, the fix.
func writeCommandText(w io.Writer, res *repro.CommandResult, width int) error {
	fmt.Fprintln(w)
	if len(res.Connections) > 0 {
		if err := writeTimeTable(w, res); err != nil {
			return err
		}
	}
	if len(res.Connections) > 0 {
		fmt.Fprintln(w, "\nConnections (times since the command started):")
		for i, c := range res.Connections {
			if i == maxConnLines {
				fmt.Fprintf(w, "  ... and %d more (-o json and --report have them all)\n", len(res.Connections)-maxConnLines)
				break
			}
			fmt.Fprintf(w, "  %s\n", wrap(fmt.Sprintf("%s: %s", c, connSentence(c)), width-4, "    "))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, wrap("Client: "+clientSentence(res), width, "  "))
	if len(res.Connections) > 0 {
		fmt.Fprintln(w, wrap("Connections: "+growthSentence(res), width, "  "))
	}
	if res.Threads != nil {
		for _, n := range res.Threads.Network {
			fmt.Fprintln(w, wrap(fmt.Sprintf("Network thread %q while it held sockets: %s", n.Name, n.Words()), width, "  "))
		}
	}
	if res.Exit != nil && !res.Exit.ByKdiag {
		fmt.Fprintln(w, wrap(fmt.Sprintf("The command exited at %s: %s", brief(res.Exit.AtMS), res.Exit.Status), width, "  "))
		for _, l := range res.StderrTail {
			fmt.Fprintln(w, "  stderr: "+l)
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintln(w, wrap("Note: "+n, width, "  "))
	}
	fmt.Fprintln(w)
	// The verdict is one line, whatever the width: CI greps it
	// (action.yml), and a person reads it whole.
	fmt.Fprintln(w, res.Verdict)
	if res.Fix != "" {
		fmt.Fprintln(w, wrap("Fix: "+res.Fix, width, "  "))
	}
	if res.Ends != "" {
		fmt.Fprintln(w, wrap("Until then, what closes such a socket: "+res.Ends, width, "  "))
	}
	return nil
}

// writeHTMLReport writes the run as kdiag report does: the samples
// analyzed (analyzer.Analyze, CLOSE_WAIT and ESTABLISHED over time per
// process, findings) in report's self-contained HTML page.
func writeHTMLReport(w io.Writer, res *repro.CommandResult) error {
	brokers := map[netip.AddrPort]bool{}
	for _, b := range res.Brokers {
		if ap, err := netip.ParseAddrPort(b); err == nil {
			brokers[ap] = true
		}
	}
	a := analyzer.Analyze(res.Snapshots, analyzer.Options{
		IsBroker: func(ap netip.AddrPort) bool { return brokers[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] },
		Identify: func(p netstat.Process) clients.Client {
			if p.PID == res.ClientPID {
				return res.Client
			}
			return clients.FromProcess(p)
		},
		BrokerIdle: time.Duration(res.BrokerIdleMS) * time.Millisecond,
		StuckAge:   time.Duration(res.MaxHoldMS) * time.Millisecond,
	})
	notes := []string{res.Verdict}
	if res.Fix != "" {
		notes = append(notes, "Fix: "+res.Fix)
	}
	return report.HTML(w, report.Input{Origin: "kdiag repro -- " + strings.Join(res.Command, " "), Analysis: a, Notes: notes})
}
